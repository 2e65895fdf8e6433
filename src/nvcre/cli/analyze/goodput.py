"""``nvcrectl analyze goodput LOG...``: a saved training log through the GoodputMeasurement
controller's own parser and calculator, printed as the status it would write.

The logs are read in the order given as one stream (``-`` is stdin); the run ends at the last
time a line shows (the kubelet prefix of ``kubectl logs --timestamps``, else the log's own
stamps), as if the Job had succeeded then. Beyond the status it adds what only a whole log shows:
whether goodput is measurable from it (and why not), the step lines recognised, each checkpoint
save with its time, the checkpoint load, a save the log starts but never ends, and each time the
step goes back (the run started again from a checkpoint within the log).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from nvcre.api.v1alpha1.constants import MeasurementReason
from nvcre.cli.analyze.common import load_profile, log_lines, report, threshold_option
from nvcre.cli.common import output_option
from nvcre.measure.goodput import GoodputParser, Window, finish, fmt, observe, unmeasurable
from nvcre.measure.goodput.sampling import stamp
from nvcre.measure.profile import CompiledProfile
from nvcre.measure.thresholds import GOODPUT_RATIO, goodput_status_values
from nvcre.measure.verdicts import judge_offline

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
EXTRA = (
    "goodputMeasurable",
    "goodputNotMeasurableReason",
    "stepCount",
    "checkpoints",
    "checkpointLoad",
    "checkpointSaveUnfinished",
    "stepBacks",
)


def analyze(paths: tuple[str, ...], profile: CompiledProfile) -> dict[str, Any]:
    """The status fields the controller would write for these logs, ended at their last time, and
    the whole-log extras (:data:`EXTRA`)."""
    window = GoodputParser(profile).feed_all(log_lines(paths))
    end = window.last_time
    if end is None:  # no time anywhere: the steps and averages, no time terms
        status = observe({}, window, now=NO_TIME, log_interval=profile.log_interval, final=True)
    else:
        status = observe({}, window, now=end, log_interval=profile.log_interval)
        status = finish(status, "Succeeded", anchor=end)
    out = {key: status[key] for key in FIELDS if key in status}
    reason = unmeasurable(status)
    out["goodputMeasurable"] = reason is None
    if reason is not None:
        out["goodputNotMeasurableReason"] = reason
    return {**out, **_whole_log(window)}


def _whole_log(window: Window) -> dict[str, Any]:
    out: dict[str, Any] = {"stepCount": window.step_count, "checkpoints": []}
    for c in window.checkpoints:
        entry: dict[str, Any] = {"step": c.step}
        if c.timed:
            entry["saveTimeSec"] = fmt(c.save_duration)
        if c.timestamp is not None:
            entry["time"] = stamp(c.timestamp)
        out["checkpoints"].append(entry)
    restore = window.restore
    if restore is not None:
        load: dict[str, Any] = {"step": restore.step}
        if restore.load_duration:
            load["loadTimeSec"] = fmt(restore.load_duration)
        out["checkpointLoad"] = load
    pending = window.pending_save
    if pending is not None:  # started, never ended: the run stopped in it (or its end is in another log)
        unfinished: dict[str, Any] = {"step": pending.step}
        if pending.timestamp is not None:
            unfinished["time"] = stamp(pending.timestamp)
        out["checkpointSaveUnfinished"] = unfinished
    if window.step_backs:  # the run started again from a checkpoint within the log
        out["stepBacks"] = [{"from": high, "to": low} for high, low in window.step_backs]
    return out


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value) or "none"
    return str(value)


def table(status: dict[str, Any]) -> str:
    width = max(len(k) for k in (*FIELDS, *EXTRA))
    return "".join(f"{key:<{width}}  {_cell(status[key])}\n" for key in (*FIELDS, *EXTRA) if key in status)


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
    controller would compute it. Exit 1 when no training step with a step time or TFLOP/s was
    recognised, or a threshold is violated or needs goodput the log cannot give; 2 for bad input."""
    profile = load_profile(profile_ref, needs="trainingStep")
    status = analyze(logs, profile)
    measured = bool(goodput_status_values(status))
    reason = status.get("goodputNotMeasurableReason")
    if reason and measured and GOODPUT_RATIO not in thresholds:
        click.echo(f"Warning: goodput is not measurable from this log: {reason}", err=True)
    for back in status.get("stepBacks", ()):
        click.echo(
            f"Warning: the step goes back from {back['from']} to {back['to']} in this log: the run started "
            "again from a checkpoint within it (no restart of the Job), and goodput counts neither that "
            "interruption nor the steps done again as lost",
            err=True,
        )
    unfinished = status.get("checkpointSaveUnfinished")
    if unfinished is not None:
        click.echo(
            f"Warning: the checkpoint save at step {unfinished['step']} starts and never ends in this log (no done "
            "line, no save timer): the run stopped during it, or its end is in another log",
            err=True,
        )
    complete = (
        (MeasurementReason.JOB_SUCCEEDED, "Referenced Job completed successfully")
        if measured
        else (
            MeasurementReason.NO_DATA_COLLECTED,
            f"no training step with a step time or TFLOP/s recognised with profile {profile.name}",
        )
    )
    spec = {"thresholds": thresholds, "goodputMeasurement": {"logProfileRef": profile.name}}
    report(status, output, table, judge_offline(spec, goodput=(status, *complete)))
