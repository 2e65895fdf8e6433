"""``certification report NAME...`` and ``workloadrun report NAME`` (cli.md 4.4, 5.3)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from nvcre.cli import connection
from nvcre.cli.common import UserError, output_option, user_errors
from nvcre.cli.report_io import (
    read_certification_report,
    read_workloadrun_report,
    report_exit_errors,
    write_html,
    write_junit,
    write_results,
)
from nvcre.report.html import render_html
from nvcre.report.jsonreport import to_json
from nvcre.report.model import Report
from nvcre.report.text import render_text

_RESULTS = click.option(
    "--results-file", type=click.Path(path_type=Path, dir_okay=False), help="Write the JSON report here."
)
_JUNIT = click.option(
    "--junit-file", type=click.Path(path_type=Path, dir_okay=False), help="Write a JUnit XML report here."
)
_HTML = click.option(
    "--html-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the report as one self-contained HTML page here.",
)


@dataclass(frozen=True)
class _Files:
    """Where ``--results-file``, ``--junit-file`` and ``--html-file`` write the reports (None: not
    written)."""

    results: Path | None
    junit: Path | None
    html: Path | None


def _report_options(func: Callable[..., None]) -> Callable[..., None]:
    """The report file flags (passed as one ``files``), the cluster flags (one ``cluster``) and
    :func:`user_errors`."""

    @functools.wraps(func)
    def command(
        *args: Any, results_file: Path | None, junit_file: Path | None, html_file: Path | None, **kwargs: Any
    ) -> None:
        func(*args, files=_Files(results_file, junit_file, html_file), **kwargs)

    return _RESULTS(_JUNIT(_HTML(connection.cluster_options(user_errors(command)))))


def _finish(reports: list[Report], files: _Files) -> None:
    if files.results is not None:
        write_results(files.results, reports)
    if files.junit is not None:
        write_junit(files.junit, reports)
    if files.html is not None:
        write_html(files.html, reports)
    errors = report_exit_errors(reports)
    if errors:
        raise UserError("; ".join(errors))


@click.command("report")
@click.argument("names", nargs=-1, required=True)
@output_option(default="text", formats=("text", "html"))
@_report_options
def certification_report_command(
    names: tuple[str, ...], output: str, files: _Files, cluster: connection.Cluster
) -> None:
    """Print the report of one or more Certifications (exit 1 unless all succeeded); ``-o html``
    prints one self-contained HTML page holding them all."""
    kube, namespace = cluster.client(), cluster.namespace
    reports = [read_certification_report(kube, name, namespace) for name in names]
    if output == "html":
        click.echo(render_html(reports), nl=False)
    else:
        click.echo("\n".join(render_text(r) for r in reports), nl=False)
    _finish(reports, files)


@click.command("report")
@click.argument("name")
@output_option(default="text", formats=("text", "json", "html"))
@_report_options
def workloadrun_report_command(name: str, output: str, files: _Files, cluster: connection.Cluster) -> None:
    """Print the report of a WorkloadRun (exit 1 unless it succeeded)."""
    kube, namespace = cluster.client(), cluster.namespace
    report = read_workloadrun_report(kube, name, namespace)
    if output == "json":
        click.echo(json.dumps(to_json(report), indent=2, ensure_ascii=False))
    elif output == "html":
        click.echo(render_html([report]), nl=False)
    else:
        click.echo(render_text(report), nl=False)
    _finish([report], files)
