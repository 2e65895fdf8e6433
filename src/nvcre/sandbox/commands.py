"""``nvcrectl sandbox up|down|status`` and ``python -m nvcre.sandbox`` (docs/sandbox.md)."""

from __future__ import annotations

from pathlib import Path

import click

from nvcre.sandbox.control import SandboxError, down, status, up, usage
from nvcre.sandbox.state import StateDir, default_state_dir
from nvcre.sandbox.supervisor import Options

_STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the sandbox keeps its record, pid files and logs "
    "(default $XDG_STATE_HOME/nvcre/sandbox or ~/.local/state/nvcre/sandbox).",
)


def _state(path: Path | None) -> StateDir:
    return StateDir((path or default_state_dir()).absolute())


@click.group("sandbox")
def sandbox_group() -> None:
    """A simulated GPU cluster where workloads really run."""


@sandbox_group.command("up")
@click.option(
    "--nodes", type=click.IntRange(min=1), default=16, show_default=True, help="Simulated GPU nodes."
)
@click.option(
    "--platform", default="aws", show_default=True, help="Platform of the nodes (providerID, NICs)."
)
@click.option(
    "--gpu", "product", default="NVIDIA-H100-80GB-HBM3", show_default=True, help="nvidia.com/gpu.product."
)
@click.option(
    "--gpus", type=click.IntRange(min=1), default=None, help="GPUs per node (default: nvcre's default)."
)
@click.option(
    "--domain-size",
    type=click.IntRange(min=1),
    default=None,
    help="Nodes per topology domain (default: one).",
)
@click.option(
    "--fault", "faults", multiple=True, help="NODE=KIND[:ARG][@DELAY] (repeatable; docs/sandbox.md)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the simulation.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait until ready.")
@_STATE_DIR
def up_command(
    nodes: int,
    platform: str,
    product: str,
    gpus: int | None,
    domain_size: int | None,
    faults: tuple[str, ...],
    seed: int,
    timeout: float,
    state_dir: Path | None,
) -> None:
    """Start a sandbox and return once it is ready; it keeps running until `down`."""
    state = _state(state_dir)
    options = Options(nodes, platform, product, gpus, domain_size, list(faults), seed)
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
    click.echo("components:")
    for c in found.components:
        click.echo(f"  {c.name:<28} pid {c.pid:<8} {'running' if c.running else 'NOT running':<12} {c.log}")
    click.echo("nodes:")
    for n in found.nodes:
        click.echo(f"  {n.name:<28} Ready={n.ready:<8} {', '.join(n.faults) or '-'}")


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
