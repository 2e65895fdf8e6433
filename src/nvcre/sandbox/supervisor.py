"""The sandbox's supervisor: the detached process that owns every component while a sandbox runs.

``nvcrectl sandbox up`` starts it in a session of its own (``python -m nvcre.sandbox.supervisor
STATE_DIR``) and waits for its record to say ready. It starts the :class:`~nvcre.testing.cluster.Cluster`
(etcd, kube-apiserver, kwok, kube-controller-manager, kube-scheduler, JobSet, Trainer), creates the
simulated GPU nodes, starts ``nvcre-manager`` and the runner (:mod:`nvcre.sandbox.runner`), writes
a pid file per component and the record (:mod:`nvcre.sandbox.state`), then sleeps until SIGTERM
or SIGINT and stops everything in reverse order. Each component is the leader of its own process
group and dies with the supervisor (``PR_SET_PDEATHSIG``), so even a SIGKILLed supervisor leaves
no component running; ``down`` then kills whatever group is left and removes the directory.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType

from lightkube import Client
from lightkube.resources.core_v1 import Node

from nvcre.sandbox.fault_state import initial
from nvcre.sandbox.faults import parse_faults
from nvcre.sandbox.runner import initial_nodes
from nvcre.sandbox.state import (
    SUPERVISOR,
    ComponentRecord,
    Record,
    StateDir,
    listening_ports,
    write_faults,
)
from nvcre.testing import binaries as bins
from nvcre.testing.cluster import Cluster
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.nodes import node_ready, platform_nodes
from nvcre.testing.processes import Process, wait_until

OPTIONS = "options.json"
RUNNER = "runner"
MANAGER = "nvcre-manager"
#: Node creates in flight at once (a fleet of thousands is created in seconds, not minutes).
NODE_CREATES = 16


@dataclass
class Options:
    """What ``up`` was asked for."""

    nodes: int = 16
    platform: str = "aws"
    product: str = "NVIDIA-H100-80GB-HBM3"
    gpus: int | None = None
    domain_size: int | None = None
    faults: list[str] = field(default_factory=list)
    seed: int = 0
    log_style: str = ""  #: ``--log-style`` (:func:`~nvcre.sandbox.styles.parse_log_style`)
    speed: float = 1.0  #: simulated seconds per wall-clock second
    prefix: str = "gpu-node"


class Stop(BaseException):
    """SIGTERM or SIGINT reached the supervisor."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _processes(cluster: Cluster, manager: ManagerProcess, runner: Process) -> list[Process]:
    cp = cluster.control_plane
    found = [cp.etcd, cp.apiserver, cluster.kwok.process]
    if cluster.chain is not None:
        found += [c.process for c in cluster.chain.components]
    found += [manager.process, runner]
    return [p for p in found if p is not None]


def serve(state: StateDir) -> int:
    """Run the sandbox described by ``state``'s options until signalled."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    t0 = time.monotonic()
    options = Options(**json.loads((state.path / OPTIONS).read_text()))
    record = Record(
        supervisor=os.getpid(),
        platform=options.platform,
        product=options.product,
        faults=list(options.faults),
        seed=options.seed,
        log_style=options.log_style,
        speed=options.speed,
    )
    nodes = sandbox_nodes(options)
    record.nodes = [str(n.metadata.name) for n in nodes if n.metadata]
    state.write(record)
    write_faults(state.faults_path, initial(options.faults, utc_now()))
    workdir = state.cluster_dir
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(
        ControlPlane(binaries=bins.ensure((*bins.REQUIRED, *bins.CHAIN)), workdir=workdir),
        nodes=options.nodes,
    )
    manager: ManagerProcess | None = None
    runner: Process | None = None
    try:
        cluster.start()
        cp = cluster.control_plane
        with cp.client() as client:
            create_nodes(client, nodes, options)
        manager = ManagerProcess(cp, workdir, name=MANAGER)
        runner = Process(
            RUNNER, runner_argv(cluster, workdir, options, state.faults_path), workdir / f"{RUNNER}.log"
        )
        runner.start()
        manager.start(timeout=ready_timeout(options.nodes))
        wait_runner_ready(runner, workdir, ready_timeout(options.nodes))
        processes = _processes(cluster, manager, runner)
        for process in processes:
            assert process.pid is not None
            state.write_pid(process.name, process.pid)
        record.components = [ComponentRecord(p.name, p.pid or 0, str(p.log_path)) for p in processes]
        record.ports = listening_ports(p.pid for p in processes if p.pid)
        record.kubeconfig = str(cp.kubeconfig_path)
        record.ready = True
        record.startup_seconds = round(time.monotonic() - t0, 1)
        state.write(record)
        while True:
            signal.pause()
    except Stop:
        return 0
    except Exception as error:
        record.error = f"{type(error).__name__}: {error}"
        state.write(record)
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for part in (runner, manager):
            if part is not None:
                part.stop()
        cluster.stop()


def sandbox_nodes(options: Options) -> list[Node]:
    """The simulated GPU nodes ``options`` asks for, as they are before any fault."""
    return platform_nodes(
        options.nodes,
        options.platform,
        options.product,
        gpus=options.gpus,
        domain_size=options.domain_size,
        prefix=options.prefix,
    )


def create_nodes(client: Client, nodes: list[Node], options: Options) -> None:
    """Create ``nodes`` with the faults that hold from the start, :data:`NODE_CREATES` at a
    time, and wait until they are Ready (:func:`ready_timeout`)."""
    initial = initial_nodes(nodes, parse_faults(options.faults))
    with ThreadPoolExecutor(NODE_CREATES) as pool:
        list(pool.map(client.create, initial))  # list(): the first failure is raised here
    names = {str(n.metadata.name) for n in nodes if n.metadata}
    wait_until(
        lambda: names <= _ready_nodes(client),
        timeout=ready_timeout(len(names)),
        what=f"the {len(names)} sandbox nodes Ready",
    )


def ready_timeout(nodes: int) -> float:
    """Seconds to wait for ``nodes`` new nodes to be Ready: kwok makes a few hundred Ready per
    second on a quiet machine, a loaded one takes many times that."""
    return 60.0 + nodes / 20


def startup_timeout(nodes: int) -> float:
    """Seconds ``up`` waits by default for a sandbox of ``nodes`` nodes to be ready."""
    return 300.0 + nodes / 10


def utc_now() -> str:
    """Now, as the fault state dates a fault (RFC 3339, UTC, seconds)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def runner_argv(
    cluster: Cluster, workdir: Path, options: Options, faults_file: Path | None = None
) -> list[str]:
    """How the runner is started: it writes ``<workdir>/runner.ready`` after its first poll;
    with ``faults_file`` it takes the faults in force from there (``nvcrectl sandbox fault``)."""
    cp = cluster.control_plane
    return [
        sys.executable,
        "-m",
        "nvcre.sandbox.runner",
        f"--kubeconfig={cp.kubeconfig_path}",
        f"--logs-dir={cluster.kwok.logs_dir}",
        f"--ready-file={workdir / f'{RUNNER}.ready'}",
        f"--seed={options.seed}",
        f"--log-style={options.log_style}",
        f"--speed={options.speed}",
        *(f"--fault={f}" for f in options.faults),
        *([f"--faults-file={faults_file}"] if faults_file is not None else []),
    ]


def wait_runner_ready(runner: Process, workdir: Path, timeout: float = 60.0) -> None:
    wait_until(
        (workdir / f"{RUNNER}.ready").exists, timeout=timeout, what="the runner watching pods", process=runner
    )


def _ready_nodes(client: Client) -> set[str]:
    """The names of the Ready nodes, from one list (not one read per node)."""
    return {str(n.metadata.name) for n in client.list(Node) if n.metadata and node_ready(n)}


def write_options(state: StateDir, options: Options) -> None:
    state.path.mkdir(parents=True, exist_ok=True)
    (state.path / OPTIONS).write_text(json.dumps(asdict(options)))


def main() -> None:
    state = StateDir(Path(sys.argv[1]))
    state.write_pid(SUPERVISOR, os.getpid())
    sys.exit(serve(state))


if __name__ == "__main__":
    main()
