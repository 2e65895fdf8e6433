"""What every ``nvcrectl analyze`` command shares: reading logs, loading a profile, thresholds and
exit codes (0 measured and every threshold met, 1 nothing measured or a threshold violated,
2 bad input)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import yaml

from nvcre import yamlio
from nvcre.api.v1alpha1.constants import JobReason, MeasurementReason
from nvcre.cli.common import emit
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.profile import CompiledProfile, ProfileError, compile_profile
from nvcre.measure.thresholds import Verdict, evaluate, missing_keys, unknown_keys

MEASURED = 0
NOT_MEASURED = 1
VIOLATED = 1
BAD_INPUT = 2
FORMATS = ("yaml", "json", "table")

F = TypeVar("F", bound=Callable[..., Any])


def bad_input(message: str) -> NoReturn:
    """``Error: <message>`` on stderr and exit status 2."""
    click.echo(f"Error: {' '.join(message.splitlines())}", err=True)
    sys.exit(BAD_INPUT)


def log_lines(paths: Sequence[str]) -> Iterator[str]:
    """The lines of every log in order (``-`` is stdin), one at a time, without line ends."""
    for path in paths:
        if path == "-":
            for line in sys.stdin:
                yield line.rstrip("\r\n")
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as log:
                for line in log:
                    yield line.rstrip("\r\n")
        except OSError as error:
            bad_input(f"{path}: cannot read file: {error.strerror or error}")


def load_profile(spec: str, needs: str) -> CompiledProfile:
    """A built-in LogProfile by name, or a LogProfile manifest file; it must have pattern ``needs``."""
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
    if profile.pattern(needs) is None:
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


def verdict_of(
    thresholds: Mapping[str, str],
    values: Mapping[str, float],
    unavailable: Mapping[str, str] | None = None,
) -> Verdict | None:
    """The verdict the Job controller would reach on these final values (None: no thresholds).
    ``unavailable``: keys the log cannot give a value for, with why (the verdict's message)."""
    if not thresholds:
        return None
    unknown = unknown_keys(thresholds)
    if unknown is not None:
        return unknown
    missing = missing_keys(thresholds, values)
    if missing:
        why = [(unavailable or {}).get(key) for key in missing]
        message = f"no measured value in the log for keys: [{' '.join(missing)}]"
        if all(why):
            message = "; ".join(w for w in why if w)
        return Verdict(True, MeasurementReason.NO_DATA_COLLECTED, message)
    return evaluate(thresholds, values)


def report(
    status: dict[str, Any],
    output: str,
    table: Callable[[dict[str, Any]], str],
    *,
    measured: bool,
    no_data: str,
    thresholds: Mapping[str, str],
    values: Mapping[str, float],
    unavailable: Mapping[str, str] | None = None,
) -> NoReturn:
    """Print ``status`` (with the verdict when thresholds were given) and exit with its code."""
    verdict = verdict_of(thresholds, values, unavailable)
    if verdict is not None:
        status = {
            **status,
            "verdict": {"failed": verdict.failed, "reason": verdict.reason, "message": verdict.message},
        }
    if output == "table":
        text = table(status)
        if verdict is not None:
            text += f"verdict: {verdict.reason}: {verdict.message}\n"
        click.echo(text, nl=False)
    else:
        emit(status, output)
    if not measured:
        click.echo(f"Error: {no_data}", err=True)
        sys.exit(NOT_MEASURED)
    if verdict is None or not verdict.failed:
        sys.exit(MEASURED)
    bad = verdict.reason in (JobReason.UNKNOWN_THRESHOLD_KEY, JobReason.INVALID_THRESHOLD_EXPRESSION)
    click.echo(f"Error: {verdict.message}", err=True)
    sys.exit(BAD_INPUT if bad else VIOLATED)
