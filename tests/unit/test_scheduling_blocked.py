"""A run waiting for GPUs says so at every level (nvcre.decide.scheduling): the Workflow names
the blocked group with its Job's message, and the Certification and WorkloadRun that run it
pass that on while it lasts (pure, no cluster)."""

from __future__ import annotations

from typing import Any

from nvcre.decide import certification as sequencing
from nvcre.decide import scheduling
from nvcre.health.scheduling import Blocked, unschedulable

WHY = (
    "Workload TrainJob/w-group-0-iter-1-workload cannot be scheduled: pod w-0: 0/4 nodes are "
    "available: 4 Insufficient nvidia.com/gpu."
)


def in_progress(reason: str, message: str, name: str = "w") -> dict[str, Any]:
    condition = {"type": "InProgress", "status": "True", "reason": reason, "message": message}
    return {"metadata": {"name": name}, "status": {"conditions": [condition]}}


def test_a_job_waiting_on_the_scheduler_is_blocked_one_pending_within_its_grace_is_not() -> None:
    assert scheduling.blocked_message(in_progress("WorkloadSchedulingBlocked", WHY)) == WHY
    assert scheduling.blocked_message(in_progress("WorkloadPending", "is pending: ...")) is None
    assert scheduling.blocked_message(in_progress("WorkloadRunning", "is running")) is None
    assert scheduling.blocked_message({"metadata": {"name": "j"}}) is None


def test_the_workflow_names_the_first_blocked_group_and_counts_the_others() -> None:
    running = "Iteration 1/1: 3 groups running"
    assert scheduling.workflow_in_progress(running, []) == ("JobRunning", running)
    assert scheduling.workflow_in_progress(running, [("group-0", WHY)]) == (
        "WorkloadSchedulingBlocked",
        f"Iteration 1/1: 3 groups running; group-0: {WHY}",
    )
    assert scheduling.workflow_in_progress(running, [("group-0", WHY), ("group-2", WHY)]) == (
        "WorkloadSchedulingBlocked",
        f"Iteration 1/1: 3 groups running; group-0 (and 1 more blocked): {WHY}",
    )


def test_a_certification_passes_its_blocked_workflow_on_and_goes_back_once_it_runs() -> None:
    entry = {"domain": "network", "variant": "nccl", "status": "InProgress", "workflowRef": {"name": "w"}}
    message = f"Iteration 1/1: 1 groups running; group-0: {WHY}"
    blocked = sequencing.follow(entry, in_progress("WorkloadSchedulingBlocked", message))
    assert blocked.transition == (
        "InProgress",
        "WorkloadSchedulingBlocked",
        f"Category network/nccl: {message}",
    )
    assert not blocked.ended
    running = sequencing.follow(entry, in_progress("JobRunning", "Iteration 1/1: 1 groups running"))
    assert running.transition == ("InProgress", "WorkflowRunning", "Certification in progress")


def test_a_workloadrun_passes_its_blocked_workflow_on_and_goes_back_once_it_runs() -> None:
    message = f"Iteration 1/1: 1 groups running; group-0: {WHY}"
    workflow = in_progress("WorkloadSchedulingBlocked", message, name="my-run")
    created = in_progress("WorkflowCreated", "Workflow my-run created", name="my-run")
    assert scheduling.run_in_progress(created, workflow) == ("WorkloadSchedulingBlocked", message)
    running = in_progress("JobRunning", "Iteration 1/1: 1 groups running", name="my-run")
    was_blocked = in_progress("WorkloadSchedulingBlocked", message, name="my-run")
    assert scheduling.run_in_progress(was_blocked, running) == ("WorkflowCreated", "Workflow my-run created")
    assert scheduling.run_in_progress(created, running) == ("WorkflowCreated", "Workflow my-run created")


def _pending(name: str, reason: str, message: str = "") -> dict[str, Any]:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
    return {"metadata": {"name": name}, "status": {"phase": "Pending", "conditions": [scheduled]}}


def test_only_an_unschedulable_pod_blocks_a_gated_one_waits_on_purpose() -> None:
    gated = _pending("w-0", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
    assert unschedulable([gated]) is None  # a queue (Kueue) admits it when it is its turn
    stuck = _pending("w-1", "Unschedulable", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    assert unschedulable([gated, stuck]) == Blocked(
        "w-1", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    )
    bound = {**stuck, "status": {**stuck["status"], "phase": "Running"}}
    assert unschedulable([bound]) is None
