"""The Job controller's pure decisions, as tables: workload phase -> action, restart records,
which Node changes matter, node-health defaults."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nvcre.decide.job import next_step, restart
from nvcre.decide.job.health import node_changed
from nvcre.health.nodes import monitored_nodes, unhealthy_nodes, with_defaults

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
REF = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "j-workload", "uid": "t1"}


def job(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j"}, "spec": spec, "status": {"workloadRef": dict(REF)}}


def trainjob(*conditions: str, suspend: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": "j-workload", "uid": "t1"},
        "spec": {"suspend": suspend},
        "status": {"conditions": [{"type": c, "status": "True", "message": ""} for c in conditions]},
    }


CHECKPOINT = {"checkpoint": {"pvcName": "p", "maxRestarts": 1}}
GOODPUT = {"status": {"lastCheckpointStep": "5"}}


@pytest.mark.parametrize(
    ("spec", "workload", "goodput", "expected"),
    [
        ({}, None, None, next_step.Fail("Workload TrainJob/j-workload was deleted")),
        ({}, trainjob("Failed"), None, next_step.Fail("Workload TrainJob/j-workload has failed")),
        (
            CHECKPOINT,
            trainjob("Failed"),
            GOODPUT,
            next_step.Restart("Restarting workload from checkpoint (restart 1/1)", "t1"),
        ),
        (
            CHECKPOINT,
            None,
            GOODPUT,
            next_step.Restart("Restarting workload from checkpoint (restart 1/1)", None),
        ),
        (CHECKPOINT, trainjob("Failed"), None, next_step.Fail("Workload TrainJob/j-workload has failed")),
        (
            {},
            trainjob("Complete"),
            None,
            next_step.Succeed("Workload TrainJob/j-workload completed successfully"),
        ),
    ],
)
def test_follow(
    spec: dict[str, Any],
    workload: dict[str, Any] | None,
    goodput: dict[str, Any] | None,
    expected: next_step.Decision,
) -> None:
    assert next_step.follow(job(**spec), workload, goodput, [], NOW) == expected


@pytest.mark.parametrize(
    ("workload", "reason", "message"),
    [
        (trainjob(suspend=True), "WorkloadPending", "Workload TrainJob/j-workload is pending: suspended"),
        (trainjob(), "WorkloadRunning", "Workload TrainJob/j-workload is running"),
    ],
)
def test_follow_in_progress(workload: dict[str, Any], reason: str, message: str) -> None:
    decision = next_step.follow(job(), workload, None, [], NOW)
    assert isinstance(decision, next_step.Progress) and (decision.reason, decision.message) == (
        reason,
        message,
    )


def test_recording_a_restart_twice_counts_once() -> None:
    status: dict[str, Any] = {"workloadRef": dict(REF), "restartCount": 0, "workloadStartTime": "x"}
    change = restart.record("t1")
    change(status)
    status["conditions"] = [{"type": "InProgress", "status": "True", "reason": "WorkloadRestarting"}]
    change(status)  # a 409 re-applies it, or a later pass finds the marker
    assert status["restartCount"] == 1 and "workloadStartTime" not in status
    assert restart.restarting(status) and restart.replaced(status, trainjob())
    assert not restart.replaced(status, {"metadata": {"uid": "t2"}}), "a new workload of that name is kept"


def node(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"metadata": {"name": "n", "labels": {"a": "1"}}, "spec": {}, "status": {}}
    for key, value in parts.items():
        base[key] = {**base[key], **value}
    return base


def ready(status: str, heartbeat: str) -> dict[str, Any]:
    return {
        "conditions": [
            {"type": "Ready", "status": status, "reason": "KubeletReady", "lastHeartbeatTime": heartbeat}
        ]
    }


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (None, node(), True),
        (node(status=ready("True", "t1")), node(status=ready("True", "t2")), False),
        (node(status=ready("True", "t1")), node(status=ready("False", "t2")), True),
        (node(), node(spec={"unschedulable": True}), True),
        (node(), node(spec={"unschedulable": False}), False),
        (node(), node(spec={"taints": [{"key": "k", "effect": "NoSchedule"}]}), True),
        (node(), node(metadata={"labels": {"a": "2"}}), True),
    ],
)
def test_node_changes_that_matter(old: dict[str, Any] | None, new: dict[str, Any], changed: bool) -> None:
    assert node_changed(old, new) is changed


def test_defaults_let_an_expression_see_fields_a_node_lacks() -> None:
    bare = {"metadata": {"name": "n"}}
    filled = with_defaults(bare)
    assert filled["spec"] == {"taints": [], "unschedulable": False}
    assert filled["status"] == {"conditions": [], "addresses": [], "capacity": {}, "allocatable": {}}
    assert bare == {"metadata": {"name": "n"}}, "the cached node is not modified"
    verdict = unhealthy_nodes("node.spec.unschedulable == false && size(node.spec.taints) == 0", [bare])
    assert verdict.failing == ["n"] and not verdict.errors
    broken = unhealthy_nodes("node.status.nosuch == 1", [bare])
    assert broken.failing == [] and "n" in broken.errors, "an error counts as healthy, and is reported"


def test_monitored_nodes_are_those_of_running_and_pending_pods() -> None:
    pods = [
        {"spec": {"nodeName": n}, "status": {"phase": p}}
        for n, p in (
            ("a", "Running"),
            ("b", "Pending"),
            ("c", "Succeeded"),
            ("d", "Failed"),
            ("a", "Pending"),
        )
    ]
    assert monitored_nodes([*pods, {"spec": {}, "status": {"phase": "Pending"}}]) == ["a", "b"]
