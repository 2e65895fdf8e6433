"""``nvcrectl analyze nccl LOG...``: the status a BandwidthMeasurement would get from saved logs.

It prints ``results`` (per message size), ``transport``, ``wrongValues`` and the threshold inputs
``busBandwidthGBps`` / ``algBandwidthGBps`` (the maximum over sizes). Several files are read in
order as one log (rotated pieces of it); ``-`` is stdin. Lines are streamed, so a log of any size
fits in memory.
"""

from __future__ import annotations

from typing import Any

import click

from nvcre.cli.analyze.common import FORMATS, bad_input, load_profile, log_lines, report, threshold_option
from nvcre.cli.common import output_option
from nvcre.measure.nccl import NO_ROWS, Aggregate, Parser, peak
from nvcre.measure.profile import ProfileError
from nvcre.measure.thresholds import ALG_BANDWIDTH, BUS_BANDWIDTH


def nccl_status(aggregate: Aggregate) -> dict[str, Any]:
    """What the BandwidthMeasurement controller writes for this log, and the threshold inputs."""
    results = aggregate.results()
    peaks = peak(results)
    return {
        "results": [r.to_status() for r in results],
        "transport": aggregate.transport,
        "wrongValues": aggregate.wrong_values,
        BUS_BANDWIDTH: peaks[0] if peaks else None,
        ALG_BANDWIDTH: peaks[1] if peaks else None,
    }


def nccl_table(status: dict[str, Any]) -> str:
    rows = [("SIZE (B)", "ALGBW (GB/s)", "BUSBW (GB/s)", "SAMPLES")]
    rows += [(str(r["sizeBytes"]), r["algBW"], r["busBW"], str(r["samples"])) for r in status["results"]]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines += [
        "",
        f"busBandwidthGBps: {number(status[BUS_BANDWIDTH])}",
        f"algBandwidthGBps: {number(status[ALG_BANDWIDTH])}",
        f"transport: {', '.join(status['transport']) or '-'}",
        f"wrongValues: {status['wrongValues']}",
    ]
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
@output_option(default="yaml", formats=FORMATS)
def nccl_command(logs: tuple[str, ...], profile: str, thresholds: dict[str, str], output: str) -> None:
    """Bandwidth per message size of nccl-tests LOG files (``-`` for stdin).

    Prints what a BandwidthMeasurement would hold for that log once its Job succeeded. Exit
    status 1 when no bandwidth row was recognised (NCCL 1.x and other old layouts are never
    guessed at) or a threshold is violated, 2 for bad input.
    """
    try:
        parser = Parser(load_profile(profile, needs="bandwidthResult"))
    except ProfileError as error:
        bad_input(f"LogProfile {profile}: {error}")
    aggregate = Aggregate()
    for line in log_lines(logs):
        aggregate.add(parser.parse_line(line))
    status = nccl_status(aggregate)
    values = {k: status[k] for k in (BUS_BANDWIDTH, ALG_BANDWIDTH) if status[k] is not None}
    report(
        status,
        output,
        nccl_table,
        measured=bool(aggregate.rows),
        no_data=f"{NO_ROWS} in {aggregate.lines} lines",
        thresholds=thresholds,
        values=values,
    )
