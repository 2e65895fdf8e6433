"""Iterations and the verdict of a Workflow whose groups are all terminal (spec/controllers.md
5.6-5.8): the history record of an iteration, the final condition, the succeeded nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import ConditionType, WorkflowReason
from nvcre.conditions import condition_true


def history_record(iteration: int, groups: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``iterationHistory`` entry of a finished iteration that is not the last."""
    return {
        "iteration": iteration,
        "groups": [
            {
                k: v
                for k, v in {
                    "name": g["name"],
                    "phase": g.get("phase"),
                    "jobName": (g.get("jobRef") or {}).get("name"),
                    "startTime": g.get("startTime"),
                    "completionTime": g.get("completionTime"),
                }.items()
                if v is not None
            }
            for g in groups
        ],
    }


@dataclass(frozen=True)
class Verdict:
    cond_type: str
    reason: str
    message: str
    validation_failed: bool = False
    """Also set the Workflow's ``ValidationFailed`` condition."""


def verdict(
    groups: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    iterations: int,
    failed_jobs: Iterable[Mapping[str, Any]],
) -> Verdict:
    """``Succeeded`` when no group failed in any iteration; else ``Failed``, with the reason
    taken from the current iteration's failed Jobs (hardware before validation)."""
    failed = sum(1 for it in history for g in it.get("groups") or () if g.get("phase") == "Failed")
    failed += sum(1 for g in groups if g.get("phase") == "Failed")
    if failed == 0:
        return Verdict(
            ConditionType.SUCCEEDED,
            WorkflowReason.JOB_COMPLETED,
            f"All {iterations} iterations completed successfully",
        )
    jobs = list(failed_jobs)
    hardware = any(condition_true(j, ConditionType.HARDWARE_FAILED) for j in jobs)
    validation = any(condition_true(j, ConditionType.VALIDATION_FAILED) for j in jobs)
    reason = (
        WorkflowReason.JOB_HARDWARE_FAILED
        if hardware
        else WorkflowReason.JOB_VALIDATION_FAILED
        if validation
        else WorkflowReason.ITERATIONS_FAILED
    )
    message = f"{failed} groups failed across {iterations} iterations"
    if hardware:
        message += "; hardware failures occurred on one or more nodes"
    return Verdict(ConditionType.FAILED, reason, message, validation_failed=validation)


def succeeded_nodes(groups: Sequence[Mapping[str, Any]], failed: Iterable[str]) -> list[str]:
    """Nodes of the final iteration's Succeeded groups that no failed-nodes entry names: a node
    that failed anywhere in the run (an earlier iteration, an overlapping overflow group) is
    reported failed, never in both lists."""
    excluded = set(failed)
    return sorted(
        {n for g in groups if g.get("phase") == "Succeeded" for n in g.get("nodes") or ()} - excluded
    )
