"""A GoodputMeasurement's status moved forward by one log read, an interruption or the Job's end
(spec measurements 3.3-3.5; pure: plain status dicts in, new status dicts out).

Everything that must survive a controller restart lives in the status: the warm-up base step,
the watermark of accumulated step time, the counted checkpoints, the open interruption. A
status passed through the same read twice is the same status (reads overlap by a second).
``trainingStartTime`` (beyond the reference's fields) is the first step's log time, the origin
of ``t_w``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, Literal

from nvcre.api.v1alpha1.meta import format_time
from nvcre.measure.goodput.calculator import fmt, goodput, number
from nvcre.measure.goodput.parser import Step, Window

Status = dict[str, Any]
Outcome = Literal["Succeeded", "Failed"]

INTERRUPTED_BY_FAILURE = "JobFailed"
INTERRUPTED_BY_RESTART = "WorkloadRestarted"


def stamp(moment: datetime) -> str:
    """A log-derived time in the status: RFC 3339, UTC, microseconds (the terms need them)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def moment(status: Mapping[str, Any], key: str) -> datetime | None:
    text = status.get(key)
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _int(status: Mapping[str, Any], key: str) -> int:
    try:
        return int(status.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def _add(status: Status, key: str, seconds: float) -> None:
    status[key] = fmt(number(status.get(key)) + seconds)


def _set_time(status: Status, key: str, value: datetime | None) -> None:
    if value is None:
        status.pop(key, None)
    else:
        status[key] = stamp(value)


def training_started(status: Mapping[str, Any]) -> bool:
    """The current run has logged a step (an open interruption means a new run has not yet)."""
    return bool(status.get("trainingStartTime")) and not status.get("pendingInterruption")


def warmup_base(status: Mapping[str, Any]) -> int | None:
    """The persisted warm-up base of the current run (None: the next step starts a run)."""
    if status.get("pendingInterruption") or status.get("warmupBaseStep") is None:
        return None
    return _int(status, "warmupBaseStep")


# --- averages over a window (3.3) ----------------------------------------------------------------


def average_step_time(steps: list[Step]) -> float:
    """Mean ``stepTiming > 0`` of the non-warm-up steps; else the mean timestamp gap per step."""
    kept = [s for s in steps if not s.warmup]
    timed = [s.step_timing for s in kept if s.step_timing > 0]
    if timed:
        return sum(timed) / len(timed)
    gaps = []
    for before, after in pairwise(kept):
        if before.timestamp is None or after.timestamp is None:
            continue
        gap = (after.timestamp - before.timestamp).total_seconds()
        if gap > 0:
            gaps.append(gap / max(after.global_step - before.global_step, 1))
    return sum(gaps) / len(gaps) if gaps else 0.0


def average_tflops(steps: list[Step]) -> float:
    """Mean ``tflops > 0`` over every step, warm-up included."""
    values = [s.tflops for s in steps if s.tflops > 0]
    return sum(values) / len(values) if values else 0.0


def step_time_above(steps: list[Step], watermark: int, log_interval: int) -> tuple[float, float]:
    """(warm-up, non-warm-up) seconds of the steps above ``watermark``: each line's per-step time
    times the steps since the line before it (``logInterval``, or 1, for the first)."""
    warm = steady = 0.0
    previous = 0
    for s in steps:
        if s.global_step > watermark and s.step_timing > 0:
            delta = s.global_step - previous
            if previous == 0 or delta < 1:
                delta = max(log_interval, 1)
            if s.warmup:
                warm += s.step_timing * delta
            else:
                steady += s.step_timing * delta
        previous = s.global_step
    return warm, steady


# --- one read ------------------------------------------------------------------------------------


def observe(
    status: Mapping[str, Any],
    window: Window,
    *,
    now: datetime,
    log_interval: int,
    final: bool = False,
) -> Status:
    """``status`` after one read of the log (``now``: the wall clock of the read).

    ``final``: the terminal read (3.5): step progress never goes back, the averages are kept
    unless the read went past the last step, and ``applicationStopTime`` is left alone.
    """
    out: Status = copy.deepcopy(dict(status))
    last = window.last_step
    if window.last_log_timestamp is not None and not final:
        out["applicationStopTime"] = stamp(now)
    if log_interval:
        out["logInterval"] = log_interval
    new_run = not training_started(out)
    if new_run and window.application_start_time is not None and not out.get("applicationStartTime"):
        out["applicationStartTime"] = stamp(window.application_start_time)
    _count_checkpoints(out, window)
    if last is None:
        return out
    moved_on = last.global_step > _int(out, "currentStep")
    if final and last.global_step < _int(out, "currentStep"):
        return out
    first = window.first_step
    assert first is not None
    if new_run:
        _start_run(out, window, first)
    out["currentStep"] = last.global_step
    out["highestStep"] = max(_int(out, "highestStep"), last.global_step)
    if window.warmup_base is not None:
        out["warmupBaseStep"] = window.warmup_base
    steps = list(window.steps)
    if not last.warmup and last.timestamp is not None:
        out["lastStepTimestamp"] = stamp(last.timestamp)
    if not final or moved_on:
        if (average := average_step_time(steps)) > 0:
            out["avgStepTimeSec"] = fmt(average)
        if (tflops := average_tflops(steps)) > 0:
            out["avgTFLOPSPerGPU"] = fmt(tflops)
    watermark = _int(out, "lastNonWarmupStep")
    warm, steady = step_time_above(steps, watermark, log_interval)
    if warm:
        _add(out, "warmupTimeSec", warm)
    if steady:
        _add(out, "nonWarmupTimeSec", steady)
    if last.global_step > watermark:
        out["lastNonWarmupStep"] = last.global_step
    if not final:
        _training_time(out, now)
    return out


def _start_run(out: Status, window: Window, first: Step) -> None:
    """The first step of a run: the start-up time, or the end of the open interruption."""
    started = first.timestamp
    pending = out.pop("pendingInterruption", None)
    if not out.get("trainingStartTime") and started is not None:
        out["trainingStartTime"] = stamp(started)
    if pending is None:
        app = moment(out, "applicationStartTime")
        if app is not None and started is not None and (started - app).total_seconds() > 0:
            _add(out, "resumeTimeSec", (started - app).total_seconds())
    else:
        interrupted = moment(pending, "tInterrupt")
        scheduled = window.application_start_time or moment(out, "applicationStartTime") or started
        if started is not None and scheduled is not None:
            if interrupted is not None:
                _add(out, "rescheduleTimeSec", max(0.0, (scheduled - interrupted).total_seconds()))
            _add(out, "resumeTimeSec", max(0.0, (started - scheduled).total_seconds()))
        if not _int(pending, "checkpointStep"):  # started over: the earlier runs' work is gone
            out.pop("priorWarmupTimeSec", None)
            out.pop("priorNonWarmupTimeSec", None)
        for key, prior in (
            ("warmupTimeSec", "priorWarmupTimeSec"),
            ("nonWarmupTimeSec", "priorNonWarmupTimeSec"),
        ):
            if out.get(prior):
                out[key] = out[prior]
            else:
                out.pop(key, None)
        out["lastNonWarmupStep"] = 0
    out["warmupBaseStep"] = first.global_step


def _count_checkpoints(out: Status, window: Window) -> None:
    """Each checkpoint newer than the last counted one adds its save time, once."""
    for checkpoint in window.checkpoints:
        if checkpoint.step <= _int(out, "lastCheckpointStep"):
            continue
        _add(out, "checkpointSaveTimeSec", checkpoint.save_duration)
        out["lastCheckpointStep"] = checkpoint.step
        _set_time(out, "lastCheckpointTime", checkpoint.timestamp)


def _training_time(out: Status, end: datetime) -> None:
    """``t_w`` up to ``end`` and the goodput ratio (nothing before the first step)."""
    start = moment(out, "trainingStartTime")
    if start is None:
        return
    out["trainingTimeSec"] = fmt(max((end - start).total_seconds(), 0.0))
    out["result"] = fmt(
        goodput(
            number(out.get("trainingTimeSec")),
            number(out.get("lostWorkTimeSec")),
            number(out.get("rescheduleTimeSec")),
            number(out.get("resumeTimeSec")),
            number(out.get("checkpointSaveTimeSec")),
        )
    )


# --- interruptions -------------------------------------------------------------------------------


def restart_seen(status: Mapping[str, Any], restart_count: int) -> bool:
    """The Job restarted its workload more often than this measurement has counted."""
    return restart_count > _int(status, "interruptionCount")


def interrupt(status: Mapping[str, Any], *, reason: str, at: datetime) -> Status:
    """Record an interruption at ``at``: lost work since the last checkpoint at once, the rest
    (``t_re``, ``t_rm``) when the next run logs its first step. A second interruption before
    that only counts (nothing more was lost)."""
    out: Status = copy.deepcopy(dict(status))
    out["interruptionCount"] = _int(out, "interruptionCount") + 1
    if out.get("pendingInterruption"):
        return out
    checkpoint = moment(out, "lastCheckpointTime")
    lost = max((at - checkpoint).total_seconds(), 0.0) if checkpoint is not None else 0.0
    pending: Status = {"tInterrupt": stamp(at), "tCh": fmt(lost), "reason": reason}
    if checkpoint is not None:
        pending["tCheckpoint"] = stamp(checkpoint)
    if _int(out, "lastCheckpointStep"):
        pending["checkpointStep"] = _int(out, "lastCheckpointStep")
    if _int(out, "currentStep"):
        pending["lastStep"] = _int(out, "currentStep")
    out["pendingInterruption"] = pending
    _add(out, "lostWorkTimeSec", lost)
    for key, prior in (
        ("warmupTimeSec", "priorWarmupTimeSec"),
        ("nonWarmupTimeSec", "priorNonWarmupTimeSec"),
    ):
        if out.get(key):
            out[prior] = out[key]
    for key in ("applicationStartTime", "lastStepTimestamp", "avgStepTimeSec", "warmupBaseStep"):
        out.pop(key, None)
    return out


# --- the end (3.5) -------------------------------------------------------------------------------


def finish(
    status: Mapping[str, Any], outcome: Outcome, *, anchor: datetime, terminated: datetime | None = None
) -> Status:
    """The terminal metrics: ``t_w`` to ``anchor`` (the Job's terminal condition time) on success;
    on failure an interruption at the termination time (``applicationStopTime``, else the
    container's ``terminated``, capped at ``anchor``) and ``t_w`` to it."""
    out: Status = copy.deepcopy(dict(status))
    end = anchor
    if outcome == "Failed":
        stop = moment(out, "applicationStopTime") or terminated
        end = min(stop, anchor) if stop is not None else anchor
        out = interrupt(out, reason=INTERRUPTED_BY_FAILURE, at=end)
    _training_time(out, end)
    out["completionTime"] = format_time(anchor)
    return out


def no_data(status: Mapping[str, Any]) -> bool:
    """No goodput was computed: the result is empty or 0."""
    return number(status.get("result")) == 0


NO_STEP = "no training step was recognised"
NO_STEP_TIME = (
    "its training steps carry no wall-clock time (no kubelet timestamp and no time in the step lines); "
    "read the pod's log with `kubectl logs --timestamps`"
)
NO_SPAN = "it shows no time after its first training step"


def unmeasurable(status: Mapping[str, Any]) -> str | None:
    """Why no goodput can be computed from what this status measured (None: it can be). Step time
    and TFLOP/s need no wall clock; goodput needs the time from the first step to the end."""
    if "currentStep" not in status:
        return NO_STEP
    if not status.get("trainingStartTime"):
        return NO_STEP_TIME
    if number(status.get("trainingTimeSec")) <= 0:
        return NO_SPAN
    return None
