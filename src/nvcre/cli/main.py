"""Entry point of ``nvcrectl``.

Subcommands are imported when they run (or when help lists them with their summary), so a
command pays only for the modules it uses: loading the catalog or the API models takes most of
a cold start.
"""

from __future__ import annotations

import atexit
import gc

import click

from nvcre import __version__
from nvcre.cli.lazy import LazyGroup

COMMANDS = {
    "analyze": (
        "nvcre.cli.analyze",
        "analyze_group",
        "Analyze saved workload logs offline (NCCL bandwidth).",
    ),
    "certification": (
        "nvcre.cli.certification",
        "certification_group",
        "Certifications: catalog categories, renders, list and status.",
    ),
    "cluster": ("nvcre.cli.cluster", "cluster_group", "Inspect the GPU nodes nvcre would certify."),
    "completion": ("nvcre.cli.completion", "completion_command", "Shell completion script (bash, zsh)."),
    "fleet": (
        "nvcre.cli.fleet_commands",
        "fleet_command",
        "GPU nodes certified, failing, regressed, stale or never, from their NodeRecords.",
    ),
    "mcp": ("nvcre.cli.mcp_serve", "mcp_group", "A read-only MCP server for assistants (stdio)."),
    "node": ("nvcre.cli.fleet_commands", "node_group", "A node's history of results (its NodeRecord)."),
    "sandbox": (
        "nvcre.sandbox.commands",
        "sandbox_group",
        "A simulated GPU cluster where workloads really run.",
    ),
    "setup": ("nvcre.cli.setup", "setup_group", "Install, check and remove nvcre and Kubeflow Trainer."),
    "validate": ("nvcre.cli.validate", "validate_command", "Validate nvcre manifests without a cluster."),
    "version": ("nvcre.cli.version", "version_command", "The client's version and the cluster's manager's."),
    "workflow": ("nvcre.cli.workflow", "workflow_group", "Render hand-written Workflows."),
    "workloadrun": (
        "nvcre.cli.workloadrun",
        "workloadrun_group",
        "WorkloadRuns: render, status and cancel.",
    ),
}


class MainGroup(LazyGroup):
    """The top-level group: its help lists the subcommands' summaries without importing them."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx)])


@click.group(
    cls=MainGroup,
    lazy={name: (module, attribute) for name, (module, attribute, _) in COMMANDS.items()},
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name="nvcrectl", message="%(prog)s %(version)s")
def cli() -> None:
    """nvcrectl certifies GPU clusters with the NVIDIA Cluster Readiness Engine."""


def main() -> None:
    # A command's imports and first model builds allocate hundreds of thousands of long-lived
    # objects (pydantic's models and schemas) and next to no garbage. At the default threshold the
    # collector walks them ~80 times on the way in, and the interpreter's last collections walk
    # them all again on the way out, to free memory the ending process returns anyway: together a
    # quarter of a cold render. Frozen at exit, objects are still freed by reference counting and
    # exit handlers still run; a long command (``run --wait``) still collects every 100,000
    # allocations.
    gc.set_threshold(100_000, 20, 20)
    atexit.register(gc.freeze)
    cli(prog_name="nvcrectl")
