"""``nvcrectl analyze dcgm LOG...``: what a saved ``dcgmi diag`` output says, test by test.

The logs are read in order as one text (``-`` is stdin): the JSON of ``dcgmi diag --json`` (also
among other log lines, or a log tail that lost its beginning) or dcgmi's text table, as
:mod:`nvcre.measure.dcgm` reads them. It prints each test's result on each entity (GPU) with
DCGM's message, the level and DCGM version where known, whether the whole report was read, and
the one-line summary. It passes as the Job of a DCGM category does
(:func:`nvcre.decide.job.diagnostics.verdict`): the whole report read, with results, no test
failed, and not every test beyond the software checks skipped.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from nvcre.cli.analyze.common import log_lines, report
from nvcre.cli.common import output_option
from nvcre.decide.job.diagnostics import NO_REPORT, verdict
from nvcre.measure.dcgm import Diagnosis, read_diag, summary


def dcgm_status(diagnosis: Diagnosis | None) -> dict[str, Any]:
    """Everything the log says, as ``-o json|yaml`` prints it (the table prints the summary as its
    verdict's message)."""
    if diagnosis is None:
        return {
            "level": None,
            "version": None,
            "complete": False,
            "passed": False,
            "tests": 0,
            "failedTests": [],
            "results": [],
            "summary": NO_REPORT,
        }
    return {
        "level": diagnosis.level,
        "version": diagnosis.version,
        "complete": diagnosis.complete,
        "passed": not verdict(diagnosis).failed,
        "tests": len(diagnosis.tests()),
        "failedTests": list(dict.fromkeys(r.test for r in diagnosis.failed)),
        "results": [asdict(r) for r in diagnosis.results],
        "summary": summary(diagnosis),
    }


def dcgm_table(status: dict[str, Any]) -> str:
    header = ("CATEGORY", "TEST", "ENTITY", "STATUS", "MESSAGE")
    rows = [header]
    rows += [
        (r["category"] or "-", r["test"], r["entity"], r["status"], r["message"] or "-")
        for r in status["results"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)), row[-1]]
        ).rstrip()
        for row in rows
    ]

    def cell(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "-" if value is None else str(value)

    lines += [
        "",
        f"level: {cell(status['level'])}",
        f"version: {cell(status['version'])}",
        f"complete: {cell(status['complete'])}",
        f"tests: {status['tests']}",
        f"failedTests: {', '.join(status['failedTests']) or '-'}",
    ]
    return "\n".join(lines) + "\n"


@click.command("dcgm")
@click.argument("logs", nargs=-1, required=True)
@click.option(
    "--level",
    type=click.IntRange(1, 4),
    help="The run level (dcgmi diag -r N), when the log does not show the command line.",
)
@output_option(default="table", formats=("table", "json", "yaml"))
def dcgm_command(logs: tuple[str, ...], level: int | None, output: str) -> None:
    """Test results of a saved ``dcgmi diag`` output (LOG: a file, or - for stdin): its --json
    report or its text table, each test on each GPU with DCGM's message, and a summary.

    Exit status 0 when the whole report was read and no test failed, 1 when a test failed, the
    report is cut short or the log holds none, 2 for bad input.
    """
    diagnosis = read_diag("\n".join(log_lines(logs)), level=level)
    status = dcgm_status(diagnosis)
    report(status, output, dcgm_table, verdict(diagnosis))
