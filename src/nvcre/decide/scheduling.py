"""A run that waits for GPUs says so at every level, not only on its Job.

A Job whose pods kube-scheduler cannot place says ``InProgress``/``WorkloadSchedulingBlocked``
(:mod:`nvcre.decide.job.next_step`). While any running group's Job says so, its Workflow says
it too, naming the group, and so do the Certification or WorkloadRun that run the Workflow: a
person reading ``kubectl get`` or a tool watching conditions sees a run stuck on scheduling,
not one running (the reference showed Running for seven hours of Pending pods).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from nvcre.api.v1alpha1.constants import ConditionType, JobReason, WorkflowOwnerReason, WorkflowReason
from nvcre.conditions import condition_of

BLOCKED: Final = JobReason.WORKLOAD_SCHEDULING_BLOCKED
"""The reason each level gives while it waits on scheduling: the Job's, passed up."""


def blocked_message(obj: Mapping[str, Any]) -> str | None:
    """The message of ``obj``'s True ``InProgress`` condition when its reason is
    :data:`BLOCKED`; None otherwise."""
    current = condition_of(obj, ConditionType.IN_PROGRESS) or {}
    if current.get("status") != "True" or current.get("reason") != BLOCKED:
        return None
    return str(current.get("message") or "")


def workflow_in_progress(running: str, blocked: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """The Workflow's ``InProgress`` reason and message while groups run: ``JobRunning`` and
    ``running`` (how many run), or :data:`BLOCKED` naming the first blocked group (``blocked``:
    its name and its Job's message) and how many more are."""
    if not blocked:
        return WorkflowReason.JOB_RUNNING, running
    group, why = blocked[0]
    more = f" (and {len(blocked) - 1} more blocked)" if len(blocked) > 1 else ""
    return BLOCKED, f"{running}; {group}{more}: {why}"


def run_in_progress(run: Mapping[str, Any], workflow: Mapping[str, Any]) -> tuple[str, str]:
    """A WorkloadRun's ``InProgress`` reason and message while its Workflow runs: the Workflow's
    :data:`BLOCKED` and message while it waits on scheduling; else what the run said before
    (``WorkflowCreated``, ``Workflow <name> created`` once it is no longer blocked)."""
    blocked = blocked_message(workflow)
    if blocked is not None:
        return BLOCKED, blocked
    current = condition_of(run, ConditionType.IN_PROGRESS) or {}
    if current.get("reason") and current.get("reason") != BLOCKED:
        return str(current["reason"]), str(current.get("message") or "")
    return WorkflowOwnerReason.WORKFLOW_CREATED, f"Workflow {workflow['metadata']['name']} created"
