"""The progress ``--wait`` shows (nvcre.orchestration.progress): a pure function of the run, its
Workflows and their Jobs, and the ``[watch]`` lines a change prints (cli.md 4.2, 5.1)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from nvcre.api.v1alpha1.constants import ConditionType, JobReason, Label
from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.orchestration import progress
from nvcre.render.workloadrun import build_workflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NODES = [f"gpu-node-{i:03d}" for i in range(8)]


def _condition(type_: str, reason: str, message: str = "") -> list[dict[str, Any]]:
    trio = (ConditionType.IN_PROGRESS, ConditionType.SUCCEEDED, ConditionType.FAILED)
    return [
        {
            "type": t,
            "status": "True" if t == type_ else "False",
            "reason": reason if t == type_ else "Superseded",
            "message": message if t == type_ else "",
        }
        for t in trio
    ]


def _run() -> tuple[dict[str, Any], dict[str, Any]]:
    document = yaml.safe_load((EXAMPLES / "workloadrun" / "basic.yaml").read_text())
    document["metadata"]["namespace"] = "team-a"
    workflow = build_workflow(
        WorkloadRun.model_validate(document), None, resolve=False, gpu_arch="h100"
    ).workflow
    return document, copy.deepcopy(workflow)


def _job(name: str, workflow: str, reason: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {Label.WORKFLOW: workflow, Label.GROUP: name.rsplit("-", 1)[-1]},
        },
        "status": {"conditions": _condition(ConditionType.IN_PROGRESS, reason)},
    }


def _running(workflow: dict[str, Any], blocked: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    name = workflow["metadata"]["name"]
    workflow["status"] = {
        "conditions": _condition(ConditionType.IN_PROGRESS, "JobRunning", "Iteration 1/1: 2 groups running"),
        "orchestration": {
            "totalNodes": 8,
            "nodesPerJob": 4,
            "totalGroups": 2,
            "currentIteration": 1,
            "groups": [
                {
                    "name": "group-0",
                    "nodes": NODES[:4],
                    "phase": "Succeeded",
                    "jobRef": {"name": f"{name}-g0"},
                },
                {"name": "group-1", "nodes": NODES[4:], "phase": "Running", "jobRef": {"name": f"{name}-g1"}},
            ],
        },
    }
    reason = JobReason.WORKLOAD_SCHEDULING_BLOCKED if blocked else JobReason.WORKLOAD_RUNNING
    return workflow, [
        _job(f"{name}-g0", name, JobReason.WORKLOAD_COMPLETED),
        _job(f"{name}-g1", name, reason),
    ]


def test_a_workloadrun_before_any_condition_is_pending_and_waits_for_status() -> None:
    run, _ = _run()
    snapshot = progress.workloadrun_snapshot(run, [], [])
    assert (snapshot.phase, snapshot.terminal, snapshot.name, snapshot.namespace) == (
        "Pending",
        False,
        "my-workload",
        "team-a",
    )
    assert progress.change_lines(None, snapshot, 3) == []
    assert progress.heartbeat_lines(snapshot, 15.4) == ["[watch] Waiting for status... (15s)"]


def test_groups_nodes_and_a_scheduling_blocked_reason_come_from_the_workflow_and_its_jobs() -> None:
    run, workflow = _run()
    run["status"] = {
        "conditions": _condition(ConditionType.IN_PROGRESS, "WorkflowCreated", "Workflow my-workload created")
    }
    workflow, jobs = _running(workflow, blocked=True)
    snapshot = progress.workloadrun_snapshot(run, [workflow], jobs)
    (category,) = snapshot.categories
    assert category.reason == JobReason.WORKLOAD_SCHEDULING_BLOCKED
    assert (category.nodes("Running"), category.nodes("Succeeded"), category.nodes("Failed")) == (4, 4, 0)
    assert category.iteration == "1/1"
    assert [(g.name, g.phase, g.reason) for g in category.groups] == [
        ("group-0", "Succeeded", JobReason.WORKLOAD_COMPLETED),
        ("group-1", "Running", JobReason.WORKLOAD_SCHEDULING_BLOCKED),
    ]
    rows = progress.rows(snapshot)
    assert rows[0] == progress.Row(
        "my-workload (iteration 1/1)", "InProgress", 4, 4, 0, "WorkloadSchedulingBlocked"
    )
    assert rows[2] == progress.Row(
        "  group-1 (gpu-node-004..gpu-node-007)", "Running", 4, 0, 0, "WorkloadSchedulingBlocked"
    )
    lines = progress.change_lines(None, snapshot, 90.7)
    assert lines[0] == "[watch] my-workload: InProgress (1m30s) — Workflow my-workload created"
    assert (
        "[watch]   my-workload group-1 [gpu-node-004, gpu-node-005, gpu-node-006, gpu-node-007]: Running (WorkloadSchedulingBlocked)"
        in lines
    )


def test_only_what_changed_prints_a_line() -> None:
    run, workflow = _run()
    run["status"] = {"conditions": _condition(ConditionType.IN_PROGRESS, "WorkflowCreated", "created")}
    wf, jobs = _running(copy.deepcopy(workflow), blocked=True)
    blocked = progress.workloadrun_snapshot(run, [wf], jobs)
    assert progress.change_lines(blocked, blocked, 20) == []
    wf, jobs = _running(copy.deepcopy(workflow), blocked=False)
    unblocked = progress.workloadrun_snapshot(run, [wf], jobs)
    assert progress.change_lines(blocked, unblocked, 20) == [
        "[watch]   my-workload group-1 [gpu-node-004, gpu-node-005, gpu-node-006, gpu-node-007]: Running (WorkloadRunning)"
    ]
    assert progress.heartbeat_lines(unblocked, 30) == ["[watch] my-workload: InProgress (30s) — created"]


def test_a_terminal_run_ends_the_watch() -> None:
    run, _ = _run()
    run["status"] = {"conditions": _condition(ConditionType.FAILED, "WorkflowFailed", "1 groups failed")}
    snapshot = progress.workloadrun_snapshot(run, [], [])
    assert snapshot.terminal
    assert progress.final_line(snapshot, 724) == "[watch] WorkloadRun failed. (12m4s)"


def test_a_certification_has_one_category_per_spec_entry_with_its_workflow() -> None:
    cert = yaml.safe_load((EXAMPLES / "certification" / "gpu-cluster-cert.yaml").read_text())
    _, workflow = _run()
    workflow["metadata"]["name"] = "gpu-cluster-cert-communication-nccl-all-reduce"
    workflow, jobs = _running(workflow, blocked=False)
    cert["status"] = {
        "conditions": _condition(ConditionType.IN_PROGRESS, "CategoryRunning"),
        "categoryStatuses": [
            {
                "domain": "communication",
                "variant": "nccl-all-reduce",
                "status": "InProgress",
                "workflowRef": {"name": workflow["metadata"]["name"]},
            },
        ],
    }
    snapshot = progress.certification_snapshot(cert, [workflow], jobs)
    assert [(c.name, c.state) for c in snapshot.categories] == [
        ("communication/nccl-all-reduce", "InProgress"),
        ("training/nemotron5-8b", "Pending"),
    ]
    assert snapshot.categories[0].nodes("Succeeded") == 4
    assert (
        progress.change_lines(None, snapshot, 61)[0]
        == "[watch] communication/nccl-all-reduce: InProgress (1m1s) — JobRunning"
    )
    assert progress.heartbeat_lines(snapshot, 75) == [
        "[watch] communication/nccl-all-reduce: InProgress (1m15s) — JobRunning"
    ]


def test_a_failed_group_shows_why_its_job_failed() -> None:
    run, workflow = _run()
    workflow, jobs = _running(workflow, blocked=False)
    workflow["status"]["orchestration"]["groups"][1]["phase"] = "Failed"
    jobs[1]["status"]["conditions"] = [
        *_condition(ConditionType.FAILED, JobReason.WORKLOAD_COMPLETED),
        {"type": ConditionType.VALIDATION_FAILED, "status": "True", "reason": JobReason.THRESHOLD_VIOLATED},
    ]
    (category,) = progress.workloadrun_snapshot(run, [workflow], jobs).categories
    assert [(g.phase, g.reason) for g in category.groups] == [
        ("Succeeded", JobReason.WORKLOAD_COMPLETED),
        ("Failed", JobReason.THRESHOLD_VIOLATED),
    ]
    assert category.nodes("Failed") == 4


def test_an_isolation_re_test_shows_its_suspect_with_its_partners() -> None:
    run, workflow = _run()
    workflow, jobs = _running(workflow, blocked=False)
    name = workflow["metadata"]["name"]
    workflow["status"]["orchestration"]["groups"] = [
        {
            "name": "isolate-0",
            "nodes": [NODES[6], NODES[0]],
            "phase": "Running",
            "suspect": NODES[6],
            "jobRef": {"name": f"{name}-g1"},
        }
    ]
    (category,) = progress.workloadrun_snapshot(run, [workflow], jobs).categories
    rows = progress.rows(progress.workloadrun_snapshot(run, [workflow], jobs))
    assert rows[1].name == "  isolate-0 (gpu-node-006 with gpu-node-000)", "not a range of nodes"
    assert category.groups[0].suspect == NODES[6]
