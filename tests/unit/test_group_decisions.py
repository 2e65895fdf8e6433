"""The pure decisions of the Workflow's groups: retry or finish, the failed-nodes entries a
group leaves, the timeout clock, the verdict and the succeeded nodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nvcre.orchestration.completion import Completion, complete, time_left, vanished
from nvcre.orchestration.iterations import history_record, succeeded_nodes, verdict

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
GROUP = {"name": "group-0", "nodes": ["a", "b"], "phase": "Running"}


def ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(*conditions: tuple[str, str, str], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "wf-job"},
        "status": {
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m} for t, r, m in conditions
            ],
            **status,
        },
    }


SUCCEEDED = job(("Succeeded", "WorkloadCompleted", "done"))
FAILED = job(
    ("Failed", "WorkloadFailed", "rank 1 died"),
    failedNodes=[{"name": "a", "reason": "WorkloadFailed", "message": "rank 1 died"}],
)
TIMED_OUT = job(("Failed", "JobTimedOut", "Job exceeded timeoutPerJob"))
HARDWARE = job(
    ("HardwareFailed", "HardwareFailureDetected", "Hardware failure detected on node(s): [b]"),
    failedNodes=[{"name": "b", "reason": "HardwareFailureDetected", "message": "by node health check"}],
)
VALIDATION = job(
    ("Succeeded", "WorkloadCompleted", "done"),
    ("ValidationFailed", "ThresholdViolated", "busBandwidthGBps 10 < 100"),
)


def entry(name: str, reason: str, message: str, *, cause: str | None = None) -> dict[str, str]:
    """A failed-node entry as the record spells it: the reference reason and nvcre's cause."""
    return {"name": name, "reason": reason, "cause": cause or reason, "message": message}


@pytest.mark.parametrize(
    ("name", "the_job", "retries", "limit", "expected"),
    [
        ("success", SUCCEEDED, 0, 2, Completion("Succeeded")),
        ("a failure with retries left is retried", FAILED, 1, 2, Completion("Pending")),
        ("a retried attempt lists nothing", HARDWARE, 0, 1, Completion("Pending")),
        (
            "no retries left: the Job's entries plus one for each node it did not name",
            FAILED,
            2,
            2,
            Completion(
                "Failed",
                (
                    entry("a", "WorkloadFailed", "rank 1 died"),
                    entry("b", "WorkloadFailed", 'Job "wf-job" failed: rank 1 died'),
                ),
            ),
        ),
        (
            "a timeout is never retried and lists every node",
            TIMED_OUT,
            0,
            3,
            Completion(
                "Failed",
                (
                    entry("a", "WorkloadFailed", "Job exceeded timeoutPerJob", cause="JobTimedOut"),
                    entry("b", "WorkloadFailed", "Job exceeded timeoutPerJob", cause="JobTimedOut"),
                ),
            ),
        ),
        (
            "the healthy nodes of a hardware failure are failed with the group",
            HARDWARE,
            0,
            0,
            Completion(
                "Failed",
                (
                    entry("b", "HardwareFailureDetected", "by node health check"),
                    entry(
                        "a",
                        "WorkloadFailed",
                        'Job "wf-job" failed: Hardware failure detected on node(s): [b]',
                    ),
                ),
            ),
        ),
        (
            "a threshold violation fails the group",
            VALIDATION,
            0,
            0,
            Completion(
                "Failed",
                tuple(
                    entry(
                        n,
                        "ThresholdViolation",
                        'Job "wf-job" failed: busBandwidthGBps 10 < 100',
                        cause="ThresholdViolated",
                    )
                    for n in "ab"
                ),
            ),
        ),
    ],
)
def test_complete(name: str, the_job: dict[str, Any], retries: int, limit: int, expected: Completion) -> None:
    assert complete({**GROUP, "retries": retries}, the_job, limit) == expected, name


def test_a_vanished_job_fails_its_group_and_lists_every_node() -> None:
    assert vanished(GROUP, "wf-job") == Completion(
        "Failed",
        tuple(
            entry(n, "WorkloadFailed", 'Job "wf-job" was deleted before it finished', cause="JobDeleted")
            for n in "ab"
        ),
    )
    assert vanished({"name": "group-0", "nodes": []}, "wf-job") == Completion("Failed"), "unpinned: no nodes"


@pytest.mark.parametrize(
    ("timeout", "status", "group_start", "expected"),
    [
        (None, {"workloadStartTime": ts(10)}, None, None),
        ("not-a-duration", {"workloadStartTime": ts(10)}, None, None),
        ("1m", {"workloadStartTime": ts(10)}, ts(1000), 50.0),
        ("1m", {"workloadStartTime": ts(70)}, None, -10.0),
        ("1m", {"workloadRef": {"name": "w"}}, ts(1000), None),
        ("1m", {}, ts(30), 30.0),
        ("1m", {}, None, None),
    ],
)
def test_time_left(
    timeout: str | None, status: dict[str, Any], group_start: str | None, expected: float | None
) -> None:
    assert time_left(timeout, {"status": status}, group_start, NOW) == expected


def groups(*phases: str) -> list[dict[str, Any]]:
    return [{"name": f"group-{i}", "nodes": [f"n{i}"], "phase": p} for i, p in enumerate(phases)]


def test_verdict() -> None:
    assert verdict(groups("Succeeded", "Succeeded"), [], 1, []).reason == "JobCompleted"
    history = [history_record(1, groups("Failed", "Succeeded"))]
    assert verdict(groups("Succeeded", "Succeeded"), history, 2, []) == verdict(
        groups("Failed", "Succeeded"), [], 2, []
    )
    failed = verdict(groups("Failed", "Failed"), history, 2, [HARDWARE, VALIDATION])
    assert (failed.cond_type, failed.reason, failed.message, failed.validation_failed) == (
        "Failed",
        "JobHardwareFailed",
        "3 groups failed across 2 iterations; hardware failures occurred on one or more nodes",
        True,
    )
    assert verdict(groups("Failed"), [], 1, [VALIDATION]).reason == "JobValidationFailed"
    assert verdict(groups("Failed"), [], 1, [FAILED]).reason == "IterationsFailed"


def test_history_record_keeps_what_is_set() -> None:
    record = history_record(
        3, [{"name": "g", "phase": "Succeeded", "jobRef": {"name": "j"}, "startTime": "t"}]
    )
    assert record == {
        "iteration": 3,
        "groups": [{"name": "g", "phase": "Succeeded", "jobName": "j", "startTime": "t"}],
    }


def test_succeeded_nodes_exclude_every_failed_node() -> None:
    overlapping = [
        {"name": "group-0", "nodes": ["a", "b"], "phase": "Succeeded"},
        {"name": "group-1-overflow", "nodes": ["b", "c"], "phase": "Failed"},
        {"name": "group-2", "nodes": ["d"], "phase": "Succeeded"},
    ]
    assert succeeded_nodes(overlapping, {"b", "c"}) == ["a", "d"]
    assert succeeded_nodes(overlapping, {"d"}) == ["a", "b"], "failed in an earlier iteration"
