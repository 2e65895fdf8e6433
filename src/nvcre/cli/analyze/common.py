"""What every ``nvcrectl analyze`` command shares: reading logs, loading a profile, thresholds and
exit codes: the verdict of :func:`nvcre.measure.verdicts.judge`, the Job controller's own (0 pass,
1 fail, 2 bad input)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from nvcre.api.v1alpha1.constants import JobReason
from nvcre.cli.common import BAD_INPUT, emit
from nvcre.inputs import STDIN, InputError, label, manifest_documents, open_log
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.lines import read_lines
from nvcre.measure.profile import CompiledProfile, ProfileError, compile_profile
from nvcre.measure.thresholds import Verdict
from nvcre.validation.manifests import check_object

PASSED = 0
FAILED = 1
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
    cut at :data:`~nvcre.measure.lines.MAX_LINE_BYTES` as the controllers cut them (a binary file
    is bad input; stray invalid bytes read as U+FFFD, see ``nvcre.inputs``)."""
    for path in paths:
        try:
            with open_log(path) as log:
                yield from read_lines(log)
        except InputError as error:
            bad_input(str(error))
        except OSError as error:
            bad_input(f"{label(path)}: cannot read file: {error.strerror or error}")


def _profile_manifest(path: str) -> dict[str, Any]:
    """The one LogProfile of a manifest file, checked like ``nvcrectl validate`` checks it."""
    try:
        documents = manifest_documents(path)
    except InputError as error:
        bad_input(str(error))
    if len(documents) != 1 or documents[0].get("kind") != "LogProfile":
        kinds = ", ".join(json.dumps(doc.get("kind")) for doc in documents)
        bad_input(f"{label(path)}: expected one LogProfile, found {len(documents)} object(s) of kind {kinds}")
    findings = check_object(documents[0], label(path), 0).findings
    if findings:
        bad_input(f"{label(path)}: LogProfile: {'; '.join(str(f) for f in findings)}")
    return documents[0]


def load_profile(spec: str, needs: str | None = None) -> CompiledProfile:
    """A built-in LogProfile by name, or a LogProfile manifest file; with ``needs``, it must have
    that pattern."""
    builtin = {str(p["metadata"]["name"]): p for p in builtin_profiles()}
    if spec in builtin:
        manifest: Any = builtin[spec]
    elif spec == STDIN or Path(spec).exists():
        manifest = _profile_manifest(spec)
    else:
        bad_input(f"{spec}: neither a built-in LogProfile ({', '.join(sorted(builtin))}) nor a file")
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


def with_verdict(status: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    """``status`` and the ``verdict`` the Job controller would write, as ``analyze`` prints them."""
    return {
        **status,
        "verdict": {"failed": verdict.failed, "reason": verdict.reason, "message": verdict.message},
    }


def report(
    status: dict[str, Any], output: str, table: Callable[[dict[str, Any]], str], verdict: Verdict
) -> NoReturn:
    """Print ``status`` with the verdict the Job controller would write, and exit with its code:
    0 pass, 1 fail, 2 a threshold that is not valid input."""
    status = with_verdict(status, verdict)
    if output == "table":
        click.echo(table(status) + f"verdict: {verdict.reason}: {verdict.message}\n", nl=False)
    else:
        emit(status, output)
    if not verdict.failed:
        sys.exit(PASSED)
    click.echo(f"Error: {verdict.message}", err=True)
    sys.exit(BAD_INPUT if verdict.reason in INPUT_ERRORS else FAILED)
