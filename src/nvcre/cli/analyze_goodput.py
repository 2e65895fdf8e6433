"""``nvcrectl analyze goodput LOG...``: a saved training log through the GoodputMeasurement
controller's own parser and calculator, printed as the status it would write.

The logs are read in the order given as one stream (``-`` is stdin); the run ends at the last
time a line shows (the kubelet prefix of ``kubectl logs --timestamps``, else the log's own
stamps), as if the Job had succeeded then.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from nvcre.cli.common import UserError, emit, load_object, output_option, user_errors
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import GoodputParser, finish, no_data, observe
from nvcre.measure.profile import CompiledProfile, ProfileError, compile_profile

DEFAULT_PROFILE = "megatron-training"
NO_TIME = datetime.min.replace(tzinfo=UTC)
FIELDS = (
    "currentStep",
    "highestStep",
    "avgStepTimeSec",
    "avgTFLOPSPerGPU",
    "trainingTimeSec",
    "lostWorkTimeSec",
    "rescheduleTimeSec",
    "resumeTimeSec",
    "checkpointSaveTimeSec",
    "result",
    "lastCheckpointStep",
    "lastCheckpointTime",
    "applicationStartTime",
    "trainingStartTime",
    "lastStepTimestamp",
    "warmupBaseStep",
    "warmupTimeSec",
    "nonWarmupTimeSec",
    "logInterval",
)


def load_profile(ref: str) -> CompiledProfile:
    """A built-in profile by name, or a LogProfile manifest file."""
    by_name = {p["metadata"]["name"]: p for p in builtin_profiles()}
    if ref in by_name:
        body = by_name[ref]
    elif Path(ref).is_file() or ref == "-":
        body = load_object(ref)
    else:
        raise UserError(
            f'--profile "{ref}": not a built-in profile ({", ".join(sorted(by_name))}) nor a file'
        )
    try:
        profile = compile_profile(body)
    except ProfileError as error:
        raise UserError(f"--profile {ref}: {error}") from error
    if profile.pattern("trainingStep") is None:
        raise UserError(f"--profile {ref}: has no trainingStep pattern")
    return profile


def lines_of(paths: tuple[str, ...]) -> Iterator[str]:
    for path in paths:
        try:
            stream = sys.stdin if path == "-" else open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError as error:
            raise UserError(f"{path}: cannot read file: {error.strerror or error}") from error
        with stream:
            for line in stream:
                yield line.rstrip("\r\n")


def analyze(paths: tuple[str, ...], profile: CompiledProfile) -> dict[str, Any]:
    """The status fields the controller would write for these logs, ended at their last time."""
    window = GoodputParser(profile).feed_all(lines_of(paths))
    end = window.last_time
    if end is None:  # no time anywhere: the steps and averages, no time terms
        status = observe({}, window, now=NO_TIME, log_interval=profile.log_interval, final=True)
    else:
        status = observe({}, window, now=end, log_interval=profile.log_interval)
        status = finish(status, "Succeeded", anchor=end)
    return {key: status[key] for key in FIELDS if key in status}


def table(status: dict[str, Any]) -> str:
    width = max(len(k) for k in FIELDS)
    return "".join(f"{key:<{width}}  {status[key]}\n" for key in FIELDS if key in status)


@click.command("goodput")
@click.argument("logs", nargs=-1, required=True)
@click.option(
    "--profile",
    "profile_ref",
    default=DEFAULT_PROFILE,
    show_default=True,
    help="A built-in LogProfile (megatron-training, megatron-bridge, nemo-training) or a LogProfile file.",
)
@output_option(default="table", formats=("table", "json", "yaml"))
@user_errors
def goodput(logs: tuple[str, ...], profile_ref: str, output: str) -> None:
    """Goodput of a saved training log (LOG: a file, or - for stdin), as the GoodputMeasurement
    controller would compute it. Exit 1 when no training step was recognised."""
    profile = load_profile(profile_ref)
    status = analyze(logs, profile)
    if output == "table":
        click.echo(table(status), nl=False)
    else:
        emit(status, output)
    if no_data(status):
        raise UserError(f"no goodput computed: no timed training step recognised with profile {profile.name}")
