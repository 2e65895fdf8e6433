"""``nvcrectl analyze``: read saved workload logs offline, with the parsers the controllers run.

``nvcrectl analyze nccl LOG...`` prints the status a BandwidthMeasurement would get from that
log: ``results`` (per message size), ``transport``, ``wrongValues`` and the threshold inputs
``busBandwidthGBps`` / ``algBandwidthGBps`` (the maximum over sizes). Several files are read in
order as one log (rotated pieces of it); ``-`` is stdin. Lines are streamed, so a log of any size
fits in memory. Exit status: 0 measured, 1 no bandwidth rows recognised, 2 bad input.

The group is meant to grow: each ``analyze`` command adds itself with ``@analyze_group.command``
and shares :func:`log_lines`, :func:`load_profile` and :func:`bad_input`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
import yaml

from nvcre.cli.common import emit, output_option
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import NO_ROWS, Aggregate, Parser, peak
from nvcre.measure.profile import CompiledProfile, ProfileError, compile_profile

BAD_INPUT = 2
NOT_MEASURED = 1
FORMATS = ("yaml", "json", "table")


def bad_input(message: str) -> NoReturn:
    """``Error: <message>`` on stderr and exit status 2."""
    click.echo(f"Error: {' '.join(message.splitlines())}", err=True)
    sys.exit(BAD_INPUT)


def log_lines(paths: Sequence[str]) -> Iterator[str]:
    """The lines of every log in order (``-`` is stdin), one at a time."""
    for path in paths:
        if path == "-":
            yield from sys.stdin
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as log:
                yield from log
        except OSError as error:
            bad_input(f"{path}: cannot read file: {error.strerror or error}")


def load_profile(spec: str) -> CompiledProfile:
    """A built-in LogProfile by name, or a LogProfile manifest file."""
    builtin = {str(p["metadata"]["name"]): p for p in builtin_profiles()}
    if spec in builtin:
        manifest: Any = builtin[spec]
    elif Path(spec).is_file():
        try:
            manifest = yaml.safe_load(Path(spec).read_text())
        except (OSError, yaml.YAMLError) as error:
            bad_input(f"{spec}: not a readable LogProfile: {error}")
        if not isinstance(manifest, dict) or manifest.get("kind") != "LogProfile":
            bad_input(f"{spec}: not a LogProfile manifest")
    else:
        bad_input(f'--profile "{spec}": neither a built-in profile ({", ".join(sorted(builtin))}) nor a file')
    try:
        return compile_profile(manifest)
    except ProfileError as error:
        bad_input(f"LogProfile {spec}: {error}")


def nccl_status(aggregate: Aggregate) -> dict[str, Any]:
    """What the BandwidthMeasurement controller writes for this log, and the threshold inputs."""
    results = aggregate.results()
    peaks = peak(results)
    return {
        "results": [r.to_status() for r in results],
        "transport": aggregate.transport,
        "wrongValues": aggregate.wrong_values,
        "busBandwidthGBps": peaks[0] if peaks else None,
        "algBandwidthGBps": peaks[1] if peaks else None,
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
        f"busBandwidthGBps: {number(status['busBandwidthGBps'])}",
        f"algBandwidthGBps: {number(status['algBandwidthGBps'])}",
        f"transport: {', '.join(status['transport']) or '-'}",
        f"wrongValues: {status['wrongValues']}",
    ]
    return "\n".join(lines) + "\n"


@click.group("analyze")
def analyze_group() -> None:
    """Analyze saved workload logs offline, exactly as the measurement controllers read them."""


@analyze_group.command("nccl")
@click.argument("logs", nargs=-1, required=True)
@click.option(
    "--profile",
    default="nccl-bandwidth",
    show_default=True,
    help="A built-in LogProfile name, or a LogProfile manifest file.",
)
@output_option(default="yaml", formats=FORMATS)
def nccl_command(logs: tuple[str, ...], profile: str, output: str) -> None:
    """Bandwidth per message size of nccl-tests LOG files (``-`` for stdin).

    Prints what a BandwidthMeasurement would hold for that log once its Job succeeded. Exit
    status 1 when no bandwidth row was recognised (NCCL 1.x and other old layouts are never
    guessed at), 2 for bad input.
    """
    try:
        parser = Parser(load_profile(profile))
    except ProfileError as error:
        bad_input(f"LogProfile {profile}: {error}")
    aggregate = Aggregate()
    for line in log_lines(logs):
        aggregate.add(parser.parse_line(line))
    status = nccl_status(aggregate)
    if output == "table":
        click.echo(nccl_table(status), nl=False)
    else:
        emit(status, output)
    if not aggregate.rows:
        click.echo(f"{NO_ROWS} in {aggregate.lines} lines", err=True)
        sys.exit(NOT_MEASURED)
