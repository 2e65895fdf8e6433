"""The small pure decisions of the WorkloadRun and Certification controllers: texts and mirrors."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.controllers.workloadrun import mirrored_fields, outcome
from nvcre.decide.certification import initial_statuses, selector_text, waiting_message


def wf(*conditions: tuple[str, str, str, str], **status: Any) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions],
            **status,
        }
    }


def test_selector_text_is_sorted_or_any_node() -> None:
    assert selector_text({"nodeSelector": {"b": "2", "a": "1"}}) == "a=1,b=2"
    assert selector_text({}) == "any node"
    assert selector_text(None) == "any node"


@pytest.mark.parametrize(
    ("remaining", "text"),
    [(299.7, "4m59s"), (61, "1m1s"), (5, "5s"), (-3, "0s")],
)
def test_waiting_message_counts_down(remaining: float, text: str) -> None:
    assert waiting_message({"nodeSelector": {"pool": "a"}}, remaining) == (
        f"No schedulable nodes match pool=a; retrying for up to {text} more. "
        "Nodes that are cordoned or unschedulable do not count."
    )


def test_waiting_message_when_cordoned_nodes_are_opted_in() -> None:
    target = {"taintSelectors": [{"key": "node.kubernetes.io/unschedulable"}]}
    assert (
        waiting_message(target, 120)
        == "No nodes (including unschedulable) match any node; retrying for up to 2m0s more."
    )


def test_initial_statuses_are_all_pending_in_spec_order() -> None:
    cert = {
        "spec": {
            "categories": [{"domain": "a", "variant": "x"}, {"domain": "b", "variant": "y", "options": {}}]
        }
    }
    assert initial_statuses(cert) == [
        {"domain": "a", "variant": "x", "status": "Pending"},
        {"domain": "b", "variant": "y", "status": "Pending"},
    ]


def test_outcome_of_a_workflow() -> None:
    assert outcome(wf(("InProgress", "True", "JobRunning", "running"))) is None
    assert outcome(wf(("Succeeded", "True", "JobCompleted", "All 1 iterations completed successfully"))) == (
        "Succeeded",
        "WorkflowSucceeded",
        "Workflow completed successfully",
    )
    assert outcome(wf(("Failed", "True", "IterationsFailed", "1 groups failed across 1 iterations"))) == (
        "Failed",
        "WorkflowFailed",
        "1 groups failed across 1 iterations",
    )
    threshold = "One or more Jobs failed performance threshold validation"
    assert outcome(wf(("Failed", "True", "JobValidationFailed", threshold))) == (
        "Failed",
        "WorkflowValidationFailed",
        threshold,
    )


def test_mirrored_fields_copy_only_what_is_set() -> None:
    assert mirrored_fields(wf()) == {}
    workflow = wf(
        orchestration={"detectedPlatform": "aws", "detectedGPUArchitecture": "h100", "totalNodes": 4},
        succeededNodesRef={"kind": "ConfigMap", "name": "succeeded-nodes-1234abcd"},
    )
    assert mirrored_fields(workflow) == {
        "detectedPlatform": "aws",
        "detectedGPUArchitecture": "h100",
        "succeededNodesRef": {"kind": "ConfigMap", "name": "succeeded-nodes-1234abcd"},
    }
