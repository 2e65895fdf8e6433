"""The Certification's sequencing: which category runs, what its Workflow's end makes of it, and
the Certification's outcome (pure, no cluster)."""

from __future__ import annotations

from typing import Any

from nvcre.decide import certification as sequencing

CERT = {"metadata": {"name": "c", "namespace": "ns"}}


def workflow(*true: str, **status: Any) -> dict[str, Any]:
    conditions = [{"type": t, "status": "True", "reason": "R", "message": f"{t} message"} for t in true]
    return {"metadata": {"name": "wf"}, "status": {"conditions": conditions, **status}}


def entry(status: str, **extra: Any) -> dict[str, Any]:
    return {"domain": "network", "variant": "nccl", "status": status, **extra}


def test_the_first_category_not_done_runs_next() -> None:
    statuses = [entry("Succeeded"), entry("Failed"), entry("Pending"), entry("Pending")]
    assert sequencing.current(statuses) == 2
    assert sequencing.current(statuses[:2]) is None
    assert not sequencing.following(entry("InProgress"))
    assert sequencing.following(entry("InProgress", workflowRef={"name": "wf"}))


def test_the_outcome_fails_with_any_failed_category() -> None:
    assert sequencing.outcome([entry("Succeeded")], None).cond_type == "Succeeded"
    failed = sequencing.outcome([entry("Succeeded"), entry("Failed")], None)
    assert (failed.cond_type, failed.reason) == ("Failed", "WorkflowFailed")
    assert (
        sequencing.outcome([entry("Failed")], "Category network/nccl: slow").reason
        == "WorkflowValidationFailed"
    )


def test_following_copies_the_workflows_end_and_node_refs() -> None:
    ref = {"name": "wf-succeeded"}
    done = sequencing.follow(entry("InProgress"), workflow("Succeeded", succeededNodesRef=ref))
    assert done.entry["status"] == "Succeeded" and done.entry["succeededNodesRef"] == ref and done.ended
    assert done.transition == (
        "InProgress",
        "WorkflowRunning",
        "Workflow for category network/nccl succeeded, advancing to next category",
    )
    gone = sequencing.follow(entry("InProgress"), None)
    assert gone.entry["status"] == "Failed" and gone.ended
    assert (
        gone.transition is not None
        and gone.transition.message == "Workflow for category network/nccl not found"
    )
    running = sequencing.follow(entry("InProgress"), workflow("InProgress"))
    assert (running.entry["status"], running.ended) == ("InProgress", False)
    assert sequencing.follow(entry("InProgress"), workflow()).transition is None  # not started yet


def test_a_started_category_names_its_workflow() -> None:
    statuses = [entry("Succeeded"), entry("Pending")]
    started, transition = sequencing.started(statuses, 1, "wf-2", "ns")
    assert started["workflowRef"] == {"name": "wf-2", "namespace": "ns"} and started["status"] == "InProgress"
    assert transition.message == "Created Workflow for category network/nccl (2 of 2)"
    assert statuses[1]["status"] == "Pending"  # the caller's list is left as it was


def test_the_first_validation_failure_names_its_category() -> None:
    statuses = [
        entry("Failed", workflowRef={"name": "a"}),
        entry("Failed", workflowRef={"name": "b", "namespace": "x"}),
    ]
    assert [(ns, name) for _, ns, name in sequencing.failed_workflows(CERT, statuses)] == [
        ("ns", "a"),
        ("x", "b"),
    ]
    assert sequencing.validation_message(statuses[0], workflow("Failed")) is None
    assert (
        sequencing.validation_message(statuses[1], workflow("Failed", "ValidationFailed"))
        == "Category network/nccl: ValidationFailed message"
    )


def test_a_stale_failure_whose_workflow_still_runs_is_recovered() -> None:
    cert = {
        **CERT,
        "status": {
            "categoryStatuses": [
                entry("Failed", workflowRef={"name": "running"}),
                entry("Failed", workflowRef={"name": "ended"}),
            ]
        },
    }
    found = {"running": workflow("InProgress"), "ended": workflow("Failed")}
    recovered = sequencing.recovered(cert, lambda _ns, name: found.get(name))
    assert recovered is not None and [e["status"] for e in recovered] == ["InProgress", "Failed"]
    assert cert["status"]["categoryStatuses"][0]["status"] == "Failed"
    assert sequencing.recovered(cert, lambda _ns, _name: None) is None


def test_the_summary_counts_categories_ended_and_the_failed_nodes() -> None:
    statuses = [
        {"status": "Failed", "failedNodeCount": 2},
        {"status": "Succeeded"},
        {"status": "InProgress", "failedNodeCount": 1},
        {"status": "Pending"},
    ]
    assert sequencing.summary(statuses) == {"progress": "2/4", "failedNodeCount": 3}
    assert sequencing.summary([]) == {"progress": "0/0", "failedNodeCount": 0}
    # the names in the categories' failed-nodes ConfigMaps: a node failed in two counts once
    assert sequencing.summary(statuses, ["n1", "n2", "n1"]) == {"progress": "2/4", "failedNodeCount": 2}


def test_the_failed_nodes_configmaps_are_read_only_when_two_categories_failed_nodes() -> None:
    one = [
        {"status": "Failed", "failedNodeCount": 2, "failedNodesRef": {"name": "a-failed"}},
        {"status": "Succeeded", "failedNodesRef": {"name": "b-failed"}},
    ]
    assert sequencing.failed_nodes_refs(one) == []  # its count is its nodes, each once
    two = [*one, {"status": "Failed", "failedNodeCount": 1, "failedNodesRef": {"name": "c-failed"}}]
    assert sequencing.failed_nodes_refs(two) == [{"name": "a-failed"}, {"name": "c-failed"}]


def test_a_category_copies_its_workflows_failed_node_count() -> None:
    workflow = {"status": {"failedNodesRef": {"kind": "ConfigMap", "name": "f"}, "failedNodeCount": 2}}
    entry = sequencing.with_workflow_record({"status": "Failed"}, workflow)
    assert (entry["failedNodesRef"], entry["failedNodeCount"]) == ({"kind": "ConfigMap", "name": "f"}, 2)
