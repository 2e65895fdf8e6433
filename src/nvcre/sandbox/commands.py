"""``nvcrectl sandbox up|down|status|run|fault`` and ``python -m nvcre.sandbox`` (docs/sandbox.md)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from nvcre.cli.common import UserError, load_object, user_errors
from nvcre.sandbox.control import SandboxError, add_faults, clear_faults, down, status, up, usage
from nvcre.sandbox.state import StateDir, default_state_dir
from nvcre.sandbox.supervisor import Options
from nvcre.testing import binaries as bins

_STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the sandbox keeps its record, pid files and logs "
    "(default $XDG_STATE_HOME/nvcre/sandbox or ~/.local/state/nvcre/sandbox).",
)


#: The clock ``nvcrectl sandbox`` runs at: simulated workloads take their real duration divided
#: by this (the seed's certification, about ten simulated minutes, in under three).
CLI_SPEED = 4.0

R = TypeVar("R")


def _state(path: Path | None) -> StateDir:
    return StateDir((path or default_state_dir()).absolute())


@click.group("sandbox")
def sandbox_group() -> None:
    """A simulated GPU cluster where workloads really run."""


def _sandbox_options(func: Callable[..., R]) -> Callable[..., R]:
    """The options that shape a sandbox (``up`` and ``run``): FUNC is called with them as
    ``state`` (the sandbox's state directory) and ``options`` (what ``up`` is asked for), beside
    its own parameters."""

    @functools.wraps(func)
    def with_sandbox(
        *,
        nodes: int,
        platform: str,
        product: str,
        gpus: int | None,
        domain_size: int | None,
        faults: tuple[str, ...],
        seed: int,
        log_style: str,
        speed: float,
        state_dir: Path | None,
        **rest: Any,
    ) -> R:
        options = Options(nodes, platform, product, gpus, domain_size, list(faults), seed, log_style, speed)
        return func(state=_state(state_dir), options=options, **rest)

    options: list[Callable[[Any], Any]] = [
        click.option(
            "--nodes", type=click.IntRange(min=1), default=16, show_default=True, help="Simulated GPU nodes."
        ),
        click.option(
            "--platform", default="aws", show_default=True, help="Platform of the nodes (providerID, NICs)."
        ),
        click.option(
            "--gpu",
            "product",
            default="NVIDIA-H100-80GB-HBM3",
            show_default=True,
            help="nvidia.com/gpu.product.",
        ),
        click.option(
            "--gpus",
            type=click.IntRange(min=1),
            default=None,
            help="GPUs per node (default: nvcre's default).",
        ),
        click.option(
            "--domain-size",
            type=click.IntRange(min=1),
            default=None,
            help="Nodes per topology domain (default: one).",
        ),
        click.option(
            "--fault", "faults", multiple=True, help="NODE=KIND[:ARG][@DELAY] (repeatable; docs/sandbox.md)."
        ),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the simulation."),
        click.option(
            "--log-style",
            default="",
            help="How the simulated launchers print: mpi, skypilot, pdsh or srun prefixes, timestamps, "
            "the nccl-2.4 table layout; comma-separated (docs/sandbox.md).",
        ),
        click.option(
            "--speed",
            type=click.FloatRange(min=0.0, min_open=True),
            default=CLI_SPEED,
            show_default=True,
            help="Simulated seconds per wall-clock second: how much faster than real hardware workloads run.",
        ),
        _STATE_DIR,
    ]
    decorated: Callable[..., R] = with_sandbox
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


@sandbox_group.command("up")
@_sandbox_options
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="Seconds to wait until ready (default: 300 + 0.1 per node).",
)
def up_command(state: StateDir, options: Options, timeout: float | None) -> None:
    """Start a sandbox and return once it is ready; it keeps running until `down`."""
    try:
        record = up(state, options, timeout=timeout, log=lambda line: click.echo(line, err=True))
    except SandboxError as error:
        raise click.ClickException(str(error)) from None
    except KeyboardInterrupt:
        raise click.Abort() from None
    click.echo("\n".join(usage(record, state)))


@sandbox_group.command("status")
@_STATE_DIR
def status_command(state_dir: Path | None) -> None:
    """List the sandbox's components (running or not) and its nodes with their faults."""
    state = _state(state_dir)
    found = status(state)
    if found.record is None:
        click.echo(f"no sandbox in {state.path}")
        raise SystemExit(1)
    click.echo(f"sandbox in {state.path}: {'running' if found.running else 'NOT running'}")
    click.echo(f"kubeconfig: {found.record.kubeconfig}")
    click.echo(f"speed: {found.record.speed:g}x, log style: {found.record.log_style or 'plain'}")
    click.echo("components:")
    for c in found.components:
        click.echo(f"  {c.name:<28} pid {c.pid:<8} {'running' if c.running else 'NOT running':<12} {c.log}")
    click.echo("nodes:")
    for n in found.nodes:
        click.echo(f"  {n.name:<28} Ready={n.ready:<8} {', '.join(n.faults) or '-'}")
    if not found.faults:
        click.echo("faults in force: none")
        return
    click.echo("faults in force (each applies to the groups that start after it was added):")
    for entry in sorted(found.faults, key=lambda e: e.ends):
        added = f"added {entry.added}" if entry.added else ""
        click.echo(f"  {entry.fault.node:<28} {entry.spec:<40} {added}".rstrip())


@sandbox_group.group("fault")
def fault_group() -> None:
    """Change the faults of a running sandbox.

    A change applies to the groups (workloads) that start after the command returned; a group
    already running keeps the faults it started with.
    """


@fault_group.command("add")
@click.argument("specs", nargs=-1, required=True, metavar="NODE=KIND[:ARG][@DELAY]...")
@_STATE_DIR
def fault_add_command(specs: tuple[str, ...], state_dir: Path | None) -> None:
    """Add faults to a running sandbox, for the groups that start afterwards.

    Specs as `up --fault` takes them (also link:A,B:FRACTION). A fault of a kind the node already has replaces it. Every spec is checked first: one that
    does not parse or names no sandbox node is an error and nothing changes. Node effects that
    hold from the start (missing-gpus) are on the Node when the command returns.
    """
    try:
        entries = add_faults(_state(state_dir), specs)
    except SandboxError as error:
        raise click.ClickException(str(error)) from None
    for entry in entries:
        click.echo(f"added {entry.spec} (applies to groups that start from now on)")


@fault_group.command("clear")
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@_STATE_DIR
def fault_clear_command(nodes: tuple[str, ...], state_dir: Path | None) -> None:
    """Clear the faults of NODEs, or every fault without NODE.

    A link naming one of the NODEs is cleared too. What the cleared faults wrote to a Node is taken back when the command returns (labels,
    taints and conditions of an xid or not-ready, missing GPUs); groups that start from now on
    run without them.
    """
    try:
        entries = clear_faults(_state(state_dir), nodes)
    except SandboxError as error:
        raise click.ClickException(str(error)) from None
    if not entries:
        click.echo("no fault to clear" + (f" on {', '.join(nodes)}" if nodes else ""))
    for entry in entries:
        click.echo(f"cleared {entry.spec}")


@sandbox_group.command("down")
@_STATE_DIR
def down_command(state_dir: Path | None) -> None:
    """Stop every component (also after a crash) and remove the sandbox's files."""
    state = _state(state_dir)
    if not state.path.exists():
        click.echo(f"no sandbox in {state.path}")
        return
    killed = down(state)
    click.echo(f"sandbox in {state.path} stopped" + (f" (killed: {', '.join(killed)})" if killed else ""))


@sandbox_group.command("run")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@_sandbox_options
@click.option(
    "--timeout",
    default=None,
    help="How long to wait for the run (a duration; default: 30m, a Certification's derived from the catalog).",
)
@click.option(
    "--results-file", type=click.Path(path_type=Path, dir_okay=False), help="Write the JSON report."
)
@click.option(
    "--junit-file", type=click.Path(path_type=Path, dir_okay=False), help="Write a JUnit XML report."
)
@click.option(
    "--html-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the report as one self-contained HTML page.",
)
@user_errors
def run_command(
    state: StateDir,
    options: Options,
    file: Path,
    timeout: str | None,
    results_file: Path | None,
    junit_file: Path | None,
    html_file: Path | None,
) -> None:
    """Bring a sandbox up, run the Certification or WorkloadRun in FILE to the end, print its
    report and tear the sandbox down (also on Ctrl-C or an error); exits with the report's verdict.
    """
    from lightkube import Client, KubeConfig

    from nvcre.cli import run_commands, run_execution

    found = load_object(file).get("kind")
    if found == "WorkloadRun":
        document = run_commands.load_workloadrun(file, "", "")
        kind = run_execution.workloadrun_kind()
        seconds = run_execution.parse_timeout(timeout or run_commands.WORKLOADRUN_TIMEOUT, True)
        created: Callable[[dict[str, Any]], list[str]] = run_commands.workloadrun_created
    elif found == "Certification":
        document = run_commands.load_certification(file, "", "")
        kind = run_execution.certification_kind()
        seconds = (
            run_execution.parse_timeout(timeout, True) if timeout else run_commands.derived_timeout(document)
        )
        created = run_commands.certification_created
    else:
        raise UserError(f'{file}: expected kind Certification or WorkloadRun, got "{found}"')
    t0 = time.monotonic()
    try:  # in the foreground: a first run builds the control plane (minutes, see docs/testing.md)
        bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    except bins.BinaryError as error:
        raise UserError(f"cannot build the sandbox's control plane: {error}") from None
    try:
        record = up(state, options, log=lambda line: click.echo(line, err=True))
    except SandboxError as error:
        raise UserError(str(error)) from None
    except KeyboardInterrupt:
        raise UserError("interrupted") from None
    click.echo(
        f"[sandbox] ready in {record.startup_seconds:.1f}s: {len(record.nodes)} {record.product} nodes "
        f"({record.platform}){''.join(f', {f}' for f in record.faults)}"
        f"{f', log style {record.log_style}' if record.log_style else ''}, {record.speed:g}x speed",
        err=True,
    )
    try:
        with Client(KubeConfig.from_file(record.kubeconfig)) as kube:
            request = run_execution.RunRequest(
                kind,
                document,
                True,
                seconds or 0.0,
                False,
                None,
                results_file,
                junit_file,
                created,
                stays=False,
                html_file=html_file,
            )
            run_execution.execute(kube, request)
    finally:
        click.echo("[sandbox] tearing down...", err=True)
        down(state)
        click.echo(f"[sandbox] done in {time.monotonic() - t0:.0f}s", err=True)
