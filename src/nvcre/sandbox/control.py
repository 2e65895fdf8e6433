"""``up``, ``status``, ``down`` and the fault changes of a sandbox (the shell behind
``nvcrectl sandbox``)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node

from nvcre.sandbox import fault_state
from nvcre.sandbox.fault_state import Entry, FaultState
from nvcre.sandbox.faults import Fault, parse_faults
from nvcre.sandbox.state import (
    SUPERVISOR,
    Record,
    StateDir,
    default_state_dir,
    read_applied,
    read_faults,
    write_faults,
)
from nvcre.sandbox.styles import parse_log_style
from nvcre.sandbox.supervisor import RUNNER, Options, startup_timeout, utc_now, write_options
from nvcre.testing import binaries as bins
from nvcre.testing.nodes import gpu_node_names, platform_node_spec
from nvcre.testing.processes import alive, log_tail


class SandboxError(RuntimeError):
    """``up`` could not start a sandbox; the message says why and what to do."""


def _stop_hint(state: StateDir) -> str:
    return f"nvcrectl sandbox down --state-dir {state.path}"


def up(
    state: StateDir, options: Options, *, timeout: float | None = None, log: Callable[[str], None] = print
) -> Record:
    """Start a sandbox in ``state`` and return its record once every component is ready
    (within ``timeout`` s, by default :func:`~nvcre.sandbox.supervisor.startup_timeout`).

    The supervisor keeps running detached. Any failure or interruption (Ctrl-C) stops whatever
    was started and removes the state directory before the exception propagates.
    """
    check_options(options)
    if state.running():
        record = state.read()
        raise SandboxError(
            f"a sandbox is already running in {state.path} (supervisor pid {record.supervisor if record else '?'}); "
            f"stop it with `{_stop_hint(state)}`"
        )
    if state.path.exists():  # what a crashed sandbox left: its groups, its files
        state.stop()
    write_options(state, options)
    timeout = startup_timeout(options.nodes) if timeout is None else timeout
    t0 = time.monotonic()
    with open(state.log_path, "ab") as out:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "nvcre.sandbox.supervisor", str(state.path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # detached: survives this command and its terminal's Ctrl-C
        )
    state.write_pid(SUPERVISOR, supervisor.pid)
    try:
        while True:
            record = state.read()
            if record is not None and record.ready:
                record.startup_seconds = round(time.monotonic() - t0, 1)
                return record
            if supervisor.poll() is not None or (record is not None and record.error):
                detail = record.error if record and record.error else log_tail(state.log_path, 20)
                raise SandboxError(f"the sandbox did not start: {detail}\n(log: {state.log_path})")
            if time.monotonic() - t0 > timeout:
                raise SandboxError(f"the sandbox was not ready after {timeout:.0f}s (log: {state.log_path})")
            time.sleep(0.1)
    except BaseException:
        log("[nvcre.sandbox] stopping what was started")
        state.stop()
        raise


def check_options(options: Options) -> None:
    """Reject faults that do not parse or name no node of the sandbox, and a log style that does
    not parse, before anything starts."""
    names = set(gpu_node_names(options.nodes, options.prefix))
    try:
        faults = parse_faults(options.faults)
        parse_log_style(options.log_style)
        platform_node_spec(options.platform, options.product, gpus=options.gpus)
    except ValueError as error:
        raise SandboxError(str(error)) from None
    if not options.speed > 0:
        raise SandboxError(
            f"--speed {options.speed}: must be a positive number of simulated seconds a second"
        )
    check_fault_nodes(faults, names)


def check_fault_nodes(faults: Iterable[Fault], names: Collection[str]) -> None:
    """Reject a node fault naming no node of ``names`` (a ``link`` may name a topology domain)."""
    for fault in faults:
        if fault.peer is None and fault.node not in names:
            first = min(names, default="")
            raise SandboxError(f"fault {fault} names no sandbox node (nodes: {first} ...)")


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int
    running: bool
    log: str


@dataclass(frozen=True)
class NodeStatus:
    name: str
    ready: str
    faults: tuple[str, ...]


@dataclass(frozen=True)
class Status:
    record: Record | None
    running: bool
    components: tuple[ComponentStatus, ...]
    nodes: tuple[NodeStatus, ...]
    faults: tuple[Entry, ...] = ()  #: the faults in force, in the order they were added


def status(state: StateDir) -> Status:
    """The components recorded in ``state`` (alive or not) and the nodes with their faults."""
    record = state.read()
    if record is None:
        return Status(None, False, (), ())
    components = tuple(ComponentStatus(c.name, c.pid, alive(c.pid), c.log) for c in record.components)
    try:
        found = read_faults(state.faults_path)
    except ValueError:
        found = None
    in_force = found if found is not None else fault_state.initial(record.faults, "")
    faults = {
        n: [e.spec for e in entries] for n, entries in fault_state.by_node(in_force, record.nodes).items()
    }
    ready = {name: "?" for name in record.nodes}
    if record.kubeconfig and state.running():
        try:
            with Client(KubeConfig.from_file(record.kubeconfig)) as client:
                for node in client.list(Node):
                    name = str(node.metadata.name if node.metadata else "")
                    conditions = (node.status.conditions if node.status else None) or []
                    ready[name] = next((c.status for c in conditions if c.type == "Ready"), "?")
        except Exception:  # the API server is down: status still lists what was recorded
            pass
    nodes = tuple(NodeStatus(n, ready.get(n, "?"), tuple(faults.get(n, ()))) for n in record.nodes)
    return Status(record, state.running(), components, nodes, in_force.entries)


#: How long a fault change waits for the runner to take it (a poll of thousands of pods takes
#: seconds).
FAULT_CHANGE_TIMEOUT = 60.0


def _running_record(state: StateDir) -> Record:
    record = state.read()
    if record is None or not state.running():
        raise SandboxError(f"no sandbox running in {state.path} (start one with `nvcrectl sandbox up`)")
    if not record.ready:
        raise SandboxError(f"the sandbox in {state.path} is still starting; try again once `up` returned")
    return record


def change_faults(
    state: StateDir, change: Callable[[FaultState], FaultState], *, timeout: float = FAULT_CHANGE_TIMEOUT
) -> tuple[FaultState, FaultState]:
    """Apply ``change`` to the faults in force of the sandbox running in ``state`` and wait until
    its runner took the change (it then applies to every group that starts from now on, and the
    Node shows it). Returns the faults before and after. One change at a time (a lock); the file
    is replaced whole, so the runner sees the change whole or not at all."""
    record = _running_record(state)
    runner = next((c for c in record.components if c.name == RUNNER), None)
    if runner is not None and not alive(runner.pid):
        raise SandboxError(f"the sandbox's runner is not running (log: {runner.log})")
    with state.faults_lock():
        try:
            before = read_faults(state.faults_path) or fault_state.initial(record.faults, "")
        except ValueError as error:
            raise SandboxError(f"{state.faults_path}: {error}") from None
        after = change(before)
        write_faults(state.faults_path, after)
    deadline = time.monotonic() + timeout
    while read_applied(state.faults_path) < after.generation:
        if runner is not None and not alive(runner.pid):
            raise SandboxError(f"the sandbox's runner is not running (log: {runner.log})")
        if time.monotonic() > deadline:
            log = runner.log if runner else state.log_path
            raise SandboxError(
                f"the sandbox's runner did not take the change within {timeout:.0f}s (log: {log})"
            )
        time.sleep(0.05)
    return before, after


def add_faults(
    state: StateDir, specs: Sequence[str], *, timeout: float = FAULT_CHANGE_TIMEOUT
) -> list[Entry]:
    """Add ``specs`` (``--fault``'s syntax) to the running sandbox's faults; the entries added. A
    spec that does not parse, or names no node of the sandbox, changes nothing."""
    record = _running_record(state)
    try:
        check_fault_nodes(parse_faults(specs), record.nodes)
    except ValueError as error:
        raise SandboxError(str(error)) from None
    now = utc_now()
    before, after = change_faults(state, lambda s: fault_state.added(s, specs, now), timeout=timeout)
    return [e for e in after.entries if e not in before.entries]


def clear_faults(
    state: StateDir, nodes: Sequence[str] = (), *, timeout: float = FAULT_CHANGE_TIMEOUT
) -> list[Entry]:
    """Clear the faults of ``nodes`` (every fault when none is given) of the running sandbox;
    the entries cleared. A name that is neither a sandbox node nor the end of a link in force
    changes nothing."""
    record = _running_record(state)
    if nodes:
        try:
            ends = {end for e in (read_faults(state.faults_path) or FaultState()).entries for end in e.ends}
        except ValueError:
            ends = set()
        unknown = [n for n in nodes if n not in record.nodes and n not in ends]
        if unknown:
            first = min(record.nodes, default="")
            raise SandboxError(f"{', '.join(unknown)}: no sandbox node (nodes: {first} ...) and no link end")
    before, after = change_faults(state, lambda s: fault_state.cleared(s, nodes or None), timeout=timeout)
    return fault_state.removed(before, after)


def down(state: StateDir) -> list[str]:
    """Stop the sandbox in ``state`` (also after a crash) and remove its files; the groups killed."""
    return state.stop()


@contextlib.contextmanager
def running(state: StateDir, options: Options) -> Iterator[Record]:
    """A sandbox for the ``with`` block (a test's or a benchmark's): the control plane's binaries
    built if missing, :func:`up`, then :func:`down` however the block ends."""
    bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    try:
        yield up(state, options)
    finally:
        down(state)


@dataclass(frozen=True)
class Started:
    """A sandbox :func:`started` runs: its state directory and a client of its cluster."""

    state: StateDir
    kube: Client
    kubeconfig: str


@contextlib.contextmanager
def started(work: Path, options: Options) -> Iterator[Started]:
    """:func:`running` with its state under ``work``, and a client of the cluster."""
    state = StateDir(work / "state")
    with running(state, options) as record:
        yield Started(state, Client(KubeConfig.from_file(record.kubeconfig)), str(record.kubeconfig))


def kubectl_path() -> str:
    """The kubectl built with the control plane (what ``python -m nvcre.testing paths`` shows)."""
    try:
        return str(bins.ensure([bins.KUBECTL], build_missing=False).path(bins.KUBECTL))
    except Exception:
        return "kubectl"


def usage(record: Record, state: StateDir) -> list[str]:
    """What ``up`` prints once ready: the kubeconfig, how to use it, how to stop."""
    kubectl = kubectl_path()
    return [
        f"sandbox ready in {record.startup_seconds:.1f}s: {len(record.nodes)} {record.product} nodes ({record.platform})",
        f"kubeconfig: {record.kubeconfig}",
        "",
        f"  export KUBECONFIG={record.kubeconfig}",
        f"  {kubectl} --kubeconfig {record.kubeconfig} get nodes -L nvidia.com/gpu.product",
        f"  nvcrectl sandbox status{'' if state.path == default_state_dir() else f' --state-dir {state.path}'}",
        f"  {_stop_hint(state)}",
    ]


__all__ = [
    "ComponentStatus",
    "NodeStatus",
    "SandboxError",
    "Status",
    "add_faults",
    "clear_faults",
    "down",
    "status",
    "up",
    "usage",
]
