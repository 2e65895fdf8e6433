"""``nvcrectl analyze goodput LOG...``: a saved training log through the GoodputMeasurement
controller's own parser and calculator, printed as the status it would write.

The logs are read in the order given as one stream (``-`` is stdin); the run ends at the last
time a line shows (the kubelet prefix of ``kubectl logs --timestamps``, else the log's own
stamps), as if the Job had succeeded then.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from nvcre.cli.analyze.common import load_profile, log_lines, report, threshold_option
from nvcre.cli.common import output_option
from nvcre.measure.goodput import GoodputParser, finish, no_data, observe
from nvcre.measure.profile import CompiledProfile
from nvcre.measure.thresholds import goodput_status_values

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


def analyze(paths: tuple[str, ...], profile: CompiledProfile) -> dict[str, Any]:
    """The status fields the controller would write for these logs, ended at their last time."""
    window = GoodputParser(profile).feed_all(log_lines(paths))
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
@threshold_option
@output_option(default="table", formats=("table", "json", "yaml"))
def goodput_command(logs: tuple[str, ...], profile_ref: str, thresholds: dict[str, str], output: str) -> None:
    """Goodput of a saved training log (LOG: a file, or - for stdin), as the GoodputMeasurement
    controller would compute it. Exit 1 when no training step was recognised or a threshold is
    violated, 2 for bad input."""
    profile = load_profile(profile_ref, needs="trainingStep")
    status = analyze(logs, profile)
    values = goodput_status_values(status)
    report(
        status,
        output,
        table,
        measured=not no_data(status),
        no_data=f"no goodput computed: no timed training step recognised with profile {profile.name}",
        thresholds=thresholds,
        values=values,
    )
