"""``nvcrectl analyze nccl LOG...``: the status a BandwidthMeasurement would get from saved logs.

It prints ``results`` (per message size, both halves), ``transport``, ``wrongValues``, everything
else the log says (``test``, ``ranks``, ``hosts``, the footers, ``complete``, ``failureLines``...)
and the threshold inputs ``busBandwidthGBps`` / ``algBandwidthGBps`` (the maximum over sizes).
Several files are read in order as one log (rotated pieces of it); ``-`` is stdin. Lines are
streamed, so a log of any size fits in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import click

from nvcre.cli.analyze.common import FORMATS, bad_input, load_profile, log_lines, report, threshold_option
from nvcre.cli.common import output_option
from nvcre.measure.nccl import Aggregate, Parser, final_reason, peak
from nvcre.measure.profile import ProfileError
from nvcre.measure.thresholds import ALG_BANDWIDTH, BUS_BANDWIDTH, Verdict
from nvcre.measure.verdicts import judge_offline

#: The fields ``-o json|yaml`` always prints (null when the log does not state them).
FIELDS = (
    "test",
    "ranks",
    "hosts",
    "results",
    "wrongValues",
    "avgBusBandwidthGBps",
    "outOfBounds",
    "complete",
    "incompleteReason",
    "failureLines",
    "sizesDropped",
    "rowsWithoutHeader",
    "transport",
    "linesRead",
    "logTail",
)


def nccl_status(aggregate: Aggregate) -> dict[str, Any]:
    """What the BandwidthMeasurement controller writes for this log, and the threshold inputs."""
    results = aggregate.results()
    peaks = peak(results)
    status = aggregate.final_status()
    return {
        **{key: status.get(key) for key in FIELDS},
        BUS_BANDWIDTH: peaks[0] if peaks else None,
        ALG_BANDWIDTH: peaks[1] if peaks else None,
    }


def judge_nccl_log(
    parser: Parser,
    lines: Iterable[str],
    *,
    source: str,
    profile: str,
    thresholds: Mapping[str, str],
    expect_transport: str | None = None,
    nodes: int | None = None,
) -> tuple[dict[str, Any], Verdict]:
    """What a BandwidthMeasurement would hold for the log ``lines`` (``source`` names them in
    messages), and the verdict the Job controller would give its Job."""
    aggregate = parser.aggregate()
    parser.fold(aggregate, lines)
    status = nccl_status(aggregate)
    config: dict[str, Any] = {"logProfileRef": profile}
    if expect_transport:
        config["expectedTransport"] = expect_transport
    verdict = judge_offline(
        {"thresholds": dict(thresholds), "bandwidthMeasurement": config},
        nodes=nodes or 0,
        bandwidth=(status, *final_reason(aggregate, source)),
    )
    return status, verdict


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "-" if value is None else str(value)


def _wrong(result: dict[str, Any]) -> str:
    """The #wrong total, or the old float error column's largest value, or ``-``."""
    if "wrong" in result:
        return str(result["wrong"])
    return f"error {result['maxError']}" if "maxError" in result else "-"


def nccl_table(status: dict[str, Any]) -> str:
    header = (
        "SIZE (B)",
        "ALGBW (GB/s)",
        "BUSBW (GB/s)",
        "IN-PLACE ALGBW",
        "IN-PLACE BUSBW",
        "#WRONG",
        "SAMPLES",
    )
    rows = [header]
    rows += [
        (
            str(r["sizeBytes"]),
            r["algBW"],
            r["busBW"],
            _cell(r.get("inPlaceAlgBW")),
            _cell(r.get("inPlaceBusBW")),
            _wrong(r),
            str(r["samples"]),
        )
        for r in status["results"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    out_of_bounds = status["outOfBounds"]
    failures = status["failureLines"]
    lines += [
        "",
        f"test: {_cell(status['test'])}",
        f"ranks: {_cell(status['ranks'])}",
        f"hosts: {', '.join(status['hosts'] or ()) or '-'}",
        f"busBandwidthGBps: {number(status[BUS_BANDWIDTH])}",
        f"algBandwidthGBps: {number(status[ALG_BANDWIDTH])}",
        f"avgBusBandwidthGBps: {_cell(status['avgBusBandwidthGBps'])}",
        f"outOfBounds: {out_of_bounds['count']} {out_of_bounds['status']}"
        if out_of_bounds
        else "outOfBounds: -",
        f"complete: {_cell(status['complete'])}"
        + (f" ({status['incompleteReason']})" if status["incompleteReason"] else ""),
        f"failureLines: {failures['count'] if failures else '-'}",
        *(f"  {line}" for line in (failures or {}).get("lines", ())),
        f"transport: {', '.join(status['transport']) or '-'}",
        f"wrongValues: {status['wrongValues']}",
        f"sizesDropped: {status['sizesDropped']}",
    ]
    if status["rowsWithoutHeader"]:
        lines.append(f"rowsWithoutHeader: {status['rowsWithoutHeader']}")
    return "\n".join(lines) + "\n"


@click.command("nccl")
@click.argument("logs", nargs=-1, required=True)
@click.option(
    "--profile",
    default="nccl-bandwidth",
    show_default=True,
    help="A built-in LogProfile name, or a LogProfile manifest file.",
)
@threshold_option
@click.option(
    "--expect-transport",
    metavar="NAME",
    help="The network NCCL must use, as its `Using network` line names it (e.g. IB, AWS Libfabric).",
)
@click.option(
    "--nodes",
    type=click.IntRange(min=1),
    help="How many nodes the run spanned: a log from fewer hosts (or one rank) fails.",
)
@output_option(default="yaml", formats=FORMATS)
def nccl_command(
    logs: tuple[str, ...],
    profile: str,
    thresholds: dict[str, str],
    expect_transport: str | None,
    nodes: int | None,
    output: str,
) -> None:
    """Bandwidth per message size of nccl-tests LOG files (``-`` for stdin), judged exactly as the
    Job controller judges a Job's final bandwidth measurement.

    Prints what a BandwidthMeasurement would hold for that log once its Job succeeded, and the
    verdict the Job would get. Exit status 0 when it passes, 1 when it fails (no row recognised
    (a table without a header is never read by guessing its columns), corrupted results, a table
    cut short, failures logged, a threshold violated...), 2 for bad input.
    """
    try:
        parser = Parser(load_profile(profile))
    except ProfileError as error:
        bad_input(f"LogProfile {profile}: {error}")
    status, verdict = judge_nccl_log(
        parser,
        log_lines(logs),
        source="files " + ", ".join(logs),
        profile=profile,
        thresholds=thresholds,
        expect_transport=expect_transport,
        nodes=nodes,
    )
    report(status, output, nccl_table, verdict)
