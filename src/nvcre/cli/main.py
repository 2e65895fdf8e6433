"""Entry point of ``nvcrectl``."""

from __future__ import annotations

import click

from nvcre import __version__
from nvcre.cli.certification import certification_group
from nvcre.cli.validate import validate_command
from nvcre.cli.workflow import workflow_group
from nvcre.cli.workloadrun import workloadrun_group


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="nvcrectl", message="%(prog)s %(version)s")
def cli() -> None:
    """nvcrectl certifies GPU clusters with the NVIDIA Cluster Readiness Engine."""


cli.add_command(validate_command)
cli.add_command(workflow_group)
cli.add_command(workloadrun_group)
cli.add_command(certification_group)


def main() -> None:
    cli(prog_name="nvcrectl")
