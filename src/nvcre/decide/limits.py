"""A run's promises (pure): the most nodes it may take and when the whole of it must end.

Certification and WorkloadRun share both: ``spec.maxNodes`` (else the manager's
``--max-nodes-per-run``) is checked against the nodes the target resolves to before a Workflow is
created; ``spec.deadline`` counts from the run's creation, and its Workflows carry the instant as
``spec.orchestration.deadlineTime``, which the Workflow controller enforces on its Jobs; they
carry the node limit too (``spec.orchestration.maxNodes``), checked again at their own discovery.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from nvcre.api.v1alpha1.constants import TERMINAL_CONDITION_TYPES, ConditionType, WorkflowReason
from nvcre.api.v1alpha1.meta import format_time, parse_time
from nvcre.conditions import condition_of, condition_true
from nvcre.durations import parse_duration
from nvcre.objects import Obj

MAX_NODES_FLAG = "--max-nodes-per-run"


class NodeLimit(NamedTuple):
    nodes: int
    source: str
    """Where the limit comes from, as the message names it."""


def node_limit(spec: Mapping[str, Any], default: int) -> NodeLimit | None:
    """The run's node limit: ``spec.maxNodes`` when set (0: none), else the manager's ``default``
    (0: none)."""
    value = spec.get("maxNodes")
    if value is not None:
        return NodeLimit(int(value), "spec.maxNodes") if int(value) > 0 else None
    return NodeLimit(default, f"the manager's {MAX_NODES_FLAG}") if default > 0 else None


def workflow_limit(workflow: Obj) -> NodeLimit | None:
    """A Workflow's ``spec.orchestration.maxNodes`` (its run's limit); None when it has none."""
    value = ((workflow.get("spec") or {}).get("orchestration") or {}).get("maxNodes")
    return NodeLimit(int(value), "spec.orchestration.maxNodes") if value else None


def too_many_nodes(count: int, limit: NodeLimit | None) -> str | None:
    """Why a run whose target resolves to ``count`` nodes must not start; None when it may."""
    if limit is None or count <= limit.nodes:
        return None
    return (
        f"the target resolves to {count} nodes, more than the run's limit of {limit.nodes} ({limit.source})"
    )


def deadline_of(run: Obj) -> datetime | None:
    """When the run's ``spec.deadline`` passes: its creation plus the duration, rounded up to a
    whole second (the instant its Workflows carry); None without one (or without a readable
    creation time or duration, which admission rules out)."""
    text = (run.get("spec") or {}).get("deadline")
    created = run["metadata"].get("creationTimestamp")
    if not text or not isinstance(created, str):
        return None
    try:
        at = parse_time(created) + timedelta(microseconds=parse_duration(str(text)) // 1000)
    except ValueError:
        return None
    return at + timedelta(microseconds=1_000_000 - at.microsecond) if at.microsecond else at


def seconds_left(deadline: datetime | None, now: datetime) -> float | None:
    """Seconds until ``deadline`` (0 or less once it passed); None without one."""
    return None if deadline is None else (deadline - now).total_seconds()


def passed(deadline: datetime | None, now: datetime) -> bool:
    return deadline is not None and now >= deadline


def deadline_message(run: Obj) -> str:
    """The Failed message of a run stopped by its deadline."""
    deadline = deadline_of(run)
    at = format_time(deadline) if deadline is not None else "?"
    return (
        f"The run's deadline ({run['spec'].get('deadline')}, spec.deadline) passed at {at}: "
        "nothing more starts and what was running is stopped; what was judged before keeps its result"
    )


def with_promises(workflow: Obj, deadline: datetime | None, limit: NodeLimit | None) -> Obj:
    """``workflow`` (a body about to be created) carrying the run's deadline and node limit, which
    it keeps itself (a node that joins the target after the run counted it still counts)."""
    orchestration = workflow["spec"].setdefault("orchestration", {})
    if deadline is not None:
        orchestration["deadlineTime"] = format_time(deadline)
    if limit is not None:
        orchestration["maxNodes"] = limit.nodes
    return workflow


def workflow_deadline(workflow: Obj) -> datetime | None:
    """A Workflow's ``spec.orchestration.deadlineTime``; None when it has none."""
    text = ((workflow.get("spec") or {}).get("orchestration") or {}).get("deadlineTime")
    if not text:
        return None
    try:
        return parse_time(str(text))
    except ValueError:
        return None


class Stop(NamedTuple):
    """What a Workflow whose deadline passed does: delete ``jobs``, write ``groups``, end with
    ``message``."""

    jobs: list[str]
    groups: list[dict[str, Any]]
    message: str


def stop(workflow: Obj, groups: Sequence[Mapping[str, Any]], jobs: Iterable[Obj]) -> Stop:
    """``jobs``: the Workflow's Jobs as cached. Every unfinished one goes (a running group's Job even
    when the cache does not show it yet), never the Job of a group already judged; the running
    groups go back to Pending, not judged."""
    judged = {
        (g.get("jobRef") or {}).get("name") for g in groups if g.get("phase") in ("Succeeded", "Failed")
    }
    names = {
        str(j["metadata"]["name"])
        for j in jobs
        if not any(condition_true(j, t) for t in TERMINAL_CONDITION_TYPES)
        and not j["metadata"].get("deletionTimestamp")
    }
    running = [g for g in groups if g.get("phase") == "Running"]
    names |= {g["jobRef"]["name"] for g in running if g.get("jobRef")}
    updated = []
    for group in groups:
        group = dict(group)
        if group.get("phase") == "Running":
            group["phase"] = "Pending"
            for key in ("jobRef", "startTime"):
                group.pop(key, None)
        updated.append(group)
    done = sum(1 for g in groups if g.get("phase") in ("Succeeded", "Failed"))
    stopped = ", ".join(str(g["name"]) for g in running) or "none"
    deadline = ((workflow.get("spec") or {}).get("orchestration") or {}).get("deadlineTime")
    message = (
        f"Deadline {deadline} passed: {done} of {len(groups)} groups judged; "
        f"running groups stopped, not judged: {stopped}"
    )
    return Stop(sorted(names - judged), updated, message)


def ended_by_deadline(workflow: Obj | None) -> bool:
    """The Workflow was stopped by its deadline."""
    if workflow is None or not condition_true(workflow, ConditionType.FAILED):
        return False
    return (condition_of(workflow, ConditionType.FAILED) or {}).get(
        "reason"
    ) == WorkflowReason.DEADLINE_EXCEEDED
