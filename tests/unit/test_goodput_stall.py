"""Acceptance cases 12(b) and 12(c): the Job's stall decision on a GoodputMeasurement status as
the goodput parser and sampler write it (spec measurements 5.3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre.decide.job import next_step
from nvcre.measure.goodput import GoodputParser, observe
from nvcre.measure.profile import compile_profile

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TS = r"\[(?P<timestamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\]"


def profile(log_interval: int) -> Any:
    return compile_profile(
        {
            "metadata": {"name": "p", "resourceVersion": "1"},
            "spec": {
                "timestamp": {"layout": "2006-01-02 15:04:05"},
                "logInterval": log_interval,
                "patterns": {
                    "trainingStep": {
                        "regex": TS + r" iteration\s+(?P<iteration>\d+)/\s*\d+ \| elapsed time per iteration "
                        r"\(ms\): (?P<elapsedTime>[\d.]+)",
                        "units": {"elapsedTime": "ms"},
                    },
                    "applicationStart": {
                        "regex": r"\[before the start of training step\] datetime: (?P<timestamp>[\d-]+ [\d:]+)"
                    },
                },
            },
        }
    )


def line(seconds_ago: float, text: str) -> str:
    when = NOW - timedelta(seconds=seconds_ago)
    return f"{when.strftime('%Y-%m-%dT%H:%M:%S')}Z [{when.strftime('%Y-%m-%d %H:%M:%S')}] {text}"


def measured(lines: list[str], log_interval: int, read_at: datetime) -> dict[str, Any]:
    window = GoodputParser(profile(log_interval)).feed_all(lines)
    return {"status": observe({}, window, now=read_at, log_interval=log_interval)}


def job(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"stallMultiplier": 3, **spec},
        "status": {"workloadRef": {"name": "j-workload"}, "workloadStartTime": "2026-03-01T11:00:00Z"},
    }


RUNNING = {"metadata": {"name": "j-workload", "uid": "u"}, "spec": {}, "status": {}}


def test_case_12b_training_stall_at_135_seconds() -> None:
    """stallMultiplier 3, avgStepTimeSec 2.5, logInterval 10, sampleInterval 30s: 3 x 2.5 x 10 + 60."""
    steps = [line(190, "iteration       10/ 100 | elapsed time per iteration (ms): 2500.0")]
    spec = {"goodputMeasurement": {"logProfileRef": "p", "sampleInterval": "30s"}}
    for ago, verdict in ((140, "stalled"), (130, "running")):
        lines = [*steps, line(ago, "iteration       20/ 100 | elapsed time per iteration (ms): 2500.0")]
        gm = measured(lines, 10, NOW - timedelta(seconds=5))
        assert (gm["status"]["avgStepTimeSec"], gm["status"]["logInterval"]) == ("2.500000", 10)
        decision = next_step.follow(job(**spec), RUNNING, gm, [], NOW)
        if verdict == "stalled":  # no checkpoint: Failed, not restarted
            assert decision == next_step.Fail(
                "Workload stalled: no training step within the configured threshold", "WorkloadStalled"
            )
        else:
            assert isinstance(decision, next_step.Progress) and decision.reason == "WorkloadRunning"


def test_case_12c_startup_stall_after_1320_seconds() -> None:
    """No step yet, the start line 1330 s ago (the workload started earlier), no sampleInterval:
    1200 + 2 x 60."""
    start = NOW - timedelta(seconds=1330)
    gm = measured(
        [line(1330, f"[before the start of training step] datetime: {start:%Y-%m-%d %H:%M:%S}")], 0, NOW
    )
    assert gm["status"]["applicationStartTime"] == "2026-03-01T11:37:50.000000Z"
    assert next_step.follow(job(), RUNNING, gm, [], NOW) == next_step.Fail(
        "Workload stalled: no training step observed within startup timeout", "WorkloadStalled"
    )
    younger = measured(
        [
            line(
                1310,
                f"[before the start of training step] datetime: {NOW - timedelta(seconds=1310):%Y-%m-%d %H:%M:%S}",
            )
        ],
        0,
        NOW,
    )
    assert isinstance(next_step.follow(job(), RUNNING, younger, [], NOW), next_step.Progress)
