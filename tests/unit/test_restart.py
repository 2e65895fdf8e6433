"""Checkpoint restart eligibility and stall detection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre.health.restart import (
    STARTUP_STALL,
    TRAINING_STALL,
    restart_eligible,
    restart_message,
    stalled,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def gm(**status: Any) -> dict[str, Any]:
    return {"status": status}


def test_restart_needs_a_checkpoint_restarts_left_and_a_written_checkpoint() -> None:
    spec = {"checkpoint": {"pvcName": "ckpt", "maxRestarts": 2}}
    assert restart_eligible(spec, {"restartCount": 1}, gm(lastCheckpointStep="100"))
    assert not restart_eligible(spec, {"restartCount": 2}, gm(lastCheckpointStep="100"))
    assert not restart_eligible(spec, {}, gm(lastCheckpointStep="0"))
    assert not restart_eligible(spec, {}, None)
    assert not restart_eligible({"checkpoint": {"pvcName": "ckpt"}}, {}, gm(lastCheckpointStep="5")), (
        "maxRestarts 0"
    )
    assert not restart_eligible({}, {}, gm(lastCheckpointStep="5"))
    assert restart_message(spec, {"restartCount": 1}) == "Restarting workload from checkpoint (restart 2/2)"


def test_no_stall_detection_without_a_multiplier_or_measurement() -> None:
    assert stalled({"spec": {}}, gm(startTime=ts(10_000)), NOW) is None
    assert stalled({"spec": {"stallMultiplier": 3}}, None, NOW) is None


def test_startup_stall_after_the_startup_timeout_plus_two_samples() -> None:
    job = {
        "spec": {
            "stallMultiplier": 3,
            "startupStallTimeoutSeconds": 100,
            "goodputMeasurement": {"sampleInterval": "10s"},
        }
    }
    assert stalled(job, gm(startTime=ts(119)), NOW) is None
    assert stalled(job, gm(startTime=ts(121)), NOW) == STARTUP_STALL
    later_start = {**job, "status": {"workloadStartTime": ts(50)}}
    assert stalled(later_start, gm(startTime=ts(1000)), NOW) is None, (
        "the clock starts when the workload runs"
    )


def test_training_stall_scales_with_the_average_step() -> None:
    job = {"spec": {"stallMultiplier": 2, "goodputMeasurement": {"sampleInterval": "5s"}}}
    measured = {"avgStepTimeSec": "10", "logInterval": "3"}
    # threshold = 2 x 10 s x 3 + 2 x 5 s = 70 s, strictly greater
    assert stalled(job, gm(lastStepTimestamp=ts(70), **measured), NOW) is None
    assert stalled(job, gm(lastStepTimestamp=ts(71), **measured), NOW) == TRAINING_STALL
