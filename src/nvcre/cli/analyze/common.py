"""What every ``nvcrectl analyze`` command shares: reading logs, loading a profile, thresholds and
exit codes: the verdict of :func:`nvcre.measure.verdicts.judge`, the Job controller's own (0 pass,
1 fail, 2 bad input)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import yaml

from nvcre import yamlio
from nvcre.api.v1alpha1.constants import JobReason
from nvcre.cli.common import emit
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.lines import read_lines
from nvcre.measure.profile import CompiledProfile, ProfileError, compile_profile
from nvcre.measure.thresholds import Verdict

PASSED = 0
FAILED = 1
BAD_INPUT = 2
INPUT_ERRORS = (JobReason.UNKNOWN_THRESHOLD_KEY, JobReason.INVALID_THRESHOLD_EXPRESSION)
"""Verdicts that judge the command line, not the log: exit 2."""
FORMATS = ("yaml", "json", "table")

F = TypeVar("F", bound=Callable[..., Any])


def bad_input(message: str) -> NoReturn:
    """``Error: <message>`` on stderr and exit status 2."""
    click.echo(f"Error: {' '.join(message.splitlines())}", err=True)
    sys.exit(BAD_INPUT)


def log_lines(paths: Sequence[str]) -> Iterator[str]:
    """The lines of every log in order (``-`` is stdin), one at a time, without line ends, each
    cut at :data:`~nvcre.measure.lines.MAX_LINE_BYTES` as the controllers cut them."""
    for path in paths:
        if path == "-":
            yield from read_lines(sys.stdin.buffer)
            continue
        try:
            with open(path, "rb") as log:
                yield from read_lines(log)
        except OSError as error:
            bad_input(f"{path}: cannot read file: {error.strerror or error}")


def load_profile(spec: str, needs: str | None = None) -> CompiledProfile:
    """A built-in LogProfile by name, or a LogProfile manifest file; with ``needs``, it must have
    that pattern."""
    builtin = {str(p["metadata"]["name"]): p for p in builtin_profiles()}
    if spec in builtin:
        manifest: Any = builtin[spec]
    elif Path(spec).is_file():
        try:
            manifest = yamlio.load(Path(spec).read_text())
        except (OSError, yaml.YAMLError) as error:
            bad_input(f"{spec}: not a readable LogProfile: {error}")
        if not isinstance(manifest, dict) or manifest.get("kind") != "LogProfile":
            bad_input(f"{spec}: not a LogProfile manifest")
    else:
        bad_input(f'--profile "{spec}": neither a built-in profile ({", ".join(sorted(builtin))}) nor a file')
    try:
        profile = compile_profile(manifest)
    except ProfileError as error:
        bad_input(f"LogProfile {spec}: {error}")
    if needs is not None and profile.pattern(needs) is None:
        bad_input(f"LogProfile {spec}: spec.patterns.{needs}: required")
    return profile


def _parse_threshold(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    thresholds: dict[str, str] = {}
    for value in values:
        key, sep, expression = value.partition("=")
        if not sep or not key.strip() or not expression.strip():
            raise click.BadParameter(f'"{value}": expected KEY=EXPR, e.g. busBandwidthGBps="value >= 400"')
        thresholds[key.strip()] = expression.strip()
    return thresholds


def threshold_option(func: F) -> F:
    """``--threshold KEY=EXPR`` (repeatable): judge the measured values as the Job controller does."""
    return click.option(
        "--threshold",
        "thresholds",
        multiple=True,
        callback=_parse_threshold,
        metavar="KEY=EXPR",
        help="A threshold as in validation.performance.thresholds (CEL over `value`); repeatable.",
    )(func)


def report(
    status: dict[str, Any], output: str, table: Callable[[dict[str, Any]], str], verdict: Verdict
) -> NoReturn:
    """Print ``status`` with the verdict the Job controller would write, and exit with its code:
    0 pass, 1 fail, 2 a threshold that is not valid input."""
    status = {
        **status,
        "verdict": {"failed": verdict.failed, "reason": verdict.reason, "message": verdict.message},
    }
    if output == "table":
        click.echo(table(status) + f"verdict: {verdict.reason}: {verdict.message}\n", nl=False)
    else:
        emit(status, output)
    if not verdict.failed:
        sys.exit(PASSED)
    click.echo(f"Error: {verdict.message}", err=True)
    sys.exit(BAD_INPUT if verdict.reason in INPUT_ERRORS else FAILED)
