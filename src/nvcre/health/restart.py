"""Checkpoint restarts and stall detection: when a workload is restarted instead of failed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nvcre.api.v1alpha1.constants import ConditionType, Default
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import condition_true
from nvcre.measure.interval import sample_interval_seconds
from nvcre.measure.nccl import progress

STARTUP_STALL = "Workload stalled: no training step observed within startup timeout"
TRAINING_STALL = "Workload stalled: no training step within the configured threshold"


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def sample_interval(job_spec: Mapping[str, Any]) -> float:
    """The goodput measurement's ``sampleInterval`` in seconds, as its controller reads it."""
    return sample_interval_seconds((job_spec.get("goodputMeasurement") or {}).get("sampleInterval"))


def restart_eligible(
    job_spec: Mapping[str, Any], job_status: Mapping[str, Any], goodput: Mapping[str, Any] | None
) -> bool:
    """A checkpointed Job may restart while restarts remain and a checkpoint was written."""
    checkpoint = job_spec.get("checkpoint")
    if not checkpoint or goodput is None:
        return False
    limit = int(checkpoint.get("maxRestarts") or 0)
    step = _number((goodput.get("status") or {}).get("lastCheckpointStep")) or 0
    return int(job_status.get("restartCount") or 0) < limit and step > 0


def restart_message(job_spec: Mapping[str, Any], job_status: Mapping[str, Any]) -> str:
    limit = int((job_spec.get("checkpoint") or {}).get("maxRestarts") or 0)
    return f"Restarting workload from checkpoint (restart {int(job_status.get('restartCount') or 0) + 1}/{limit})"


def stalled(job: Mapping[str, Any], goodput: Mapping[str, Any] | None, now: datetime) -> str | None:
    """Why the running workload counts as stalled, or None (spec: measurements 5.3)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    multiplier = spec.get("stallMultiplier")
    if not multiplier or goodput is None:
        return None
    measured = goodput.get("status") or {}
    interval = sample_interval(spec)
    last_step, average = measured.get("lastStepTimestamp"), _number(measured.get("avgStepTimeSec"))
    if not last_step or not average:
        anchor_text = measured.get("applicationStartTime") or measured.get("startTime")
        if not anchor_text:
            return None
        anchor = parse_time(anchor_text)
        if status.get("workloadStartTime"):
            anchor = max(anchor, parse_time(status["workloadStartTime"]))
        timeout = int(spec.get("startupStallTimeoutSeconds") or Default.STARTUP_STALL_SECONDS) + 2 * interval
        return STARTUP_STALL if (now - anchor).total_seconds() > timeout else None
    log_interval = max(int(_number(measured.get("logInterval")) or 1), 1)
    threshold = int(multiplier) * average * log_interval + 2 * interval
    return TRAINING_STALL if (now - parse_time(last_step)).total_seconds() > threshold else None


def bandwidth_stalled(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> str | None:
    """Why the running nccl-tests workload counts as stalled at its measurement's last read, or
    None (:mod:`nvcre.measure.nccl.progress`; a Complete measurement has nothing more to read)."""
    started = (job.get("status") or {}).get("workloadStartTime")
    if bandwidth is None or not started:
        return None
    if condition_true(bandwidth, ConditionType.COMPLETE):
        return None
    slack = sample_interval_seconds((bandwidth.get("spec") or {}).get("sampleInterval"))
    return progress.stalled((bandwidth.get("status") or {}).get("progress"), parse_time(started), slack)
