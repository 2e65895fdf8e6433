"""nvcre_job_status and nvcre_workflow_domain_nodes from plain Jobs and Workflows."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.decide.run_metrics import domain_samples, job_samples, job_status


def job(*true: str, name: str = "wf-group-0-iter-1") -> dict[str, Any]:
    conditions = [{"type": t, "status": "True"} for t in true]
    return {
        "metadata": {"name": name, "namespace": "team", "labels": {"nvcre.nvidia.com/workflow": "wf"}},
        "status": {"conditions": [*conditions, {"type": "Succeeded", "status": "False"}]},
    }


@pytest.mark.parametrize(
    ("true", "status"),
    [
        ((), "pending"),
        (("InProgress",), "running"),
        (("Succeeded",), "succeeded"),
        (("Failed",), "failed"),
        (("InProgress", "Failed"), "failed"),
        (("InProgress", "HardwareFailed"), "failed"),
        (("Succeeded", "ValidationFailed"), "failed"),
    ],
)
def test_job_status(true: tuple[str, ...], status: str) -> None:
    assert job_status(job(*true)) == status


def test_a_timed_out_job_is_failed_and_only_failed() -> None:
    """#401: a Job that timed out reports failed (1) and no other status (0)."""
    assert job_samples([job("InProgress", "Failed")]) == [
        (("team", "wf-group-0-iter-1", "wf", "failed"), 1.0),
        (("team", "wf-group-0-iter-1", "wf", "pending"), 0.0),
        (("team", "wf-group-0-iter-1", "wf", "running"), 0.0),
        (("team", "wf-group-0-iter-1", "wf", "succeeded"), 0.0),
    ]


def test_domain_nodes_by_group_phase() -> None:
    workflow = {
        "metadata": {"name": "wf", "namespace": "team"},
        "status": {
            "orchestration": {
                "groups": [
                    {"name": "group-0", "phase": "Succeeded", "domains": ["rack-a"], "nodes": ["a1", "a2"]},
                    {"name": "group-1", "phase": "Running", "domains": ["rack-b"], "nodes": ["b1", "b2"]},
                    {
                        "name": "group-2-overflow",
                        "phase": "Failed",
                        "domains": ["rack-a", "rack-b"],
                        "domainNodeCounts": {"rack-a": 1, "rack-b": 1},
                        "nodes": ["a3", "b3"],
                    },
                ]
            }
        },
    }
    simple = {
        "metadata": {"name": "flat", "namespace": "team"},
        "status": {
            "orchestration": {"groups": [{"name": "group-0", "phase": "Running", "nodes": ["x", "y"]}]}
        },
    }
    got = {labels: value for labels, value in domain_samples([workflow, simple]) if value}
    assert got == {
        ("team", "wf", "rack-a", "Succeeded"): 2.0,
        ("team", "wf", "rack-a", "Failed"): 1.0,
        ("team", "wf", "rack-b", "Running"): 2.0,
        ("team", "wf", "rack-b", "Failed"): 1.0,
    }
    assert len(domain_samples([workflow, simple])) == 8  # two domains, four phases each
