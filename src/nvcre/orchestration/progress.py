"""What ``--wait`` shows of a running Certification or WorkloadRun: a pure function of the
objects read from the cluster (the run, its Workflows, their Jobs), and the ``[watch]`` lines of
cli.md 4.2 / 5.1 that a change of it prints.

A category is one Workflow (a WorkloadRun has one, named like the run); a group is one entry of
the Workflow's ``status.orchestration.groups``, its reason the one of its Job's active condition
(``WorkloadSchedulingBlocked`` when its pods cannot be placed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType, JobReason, Label
from nvcre.conditions import PENDING, condition_of, run_state
from nvcre.durations import format_duration

VERDICTS: Final = (ConditionType.HARDWARE_FAILED, ConditionType.VALIDATION_FAILED)


@dataclass(frozen=True)
class GroupProgress:
    name: str
    phase: str
    """Pending, Running, Succeeded or Failed (the Workflow's group phase)."""
    nodes: tuple[str, ...]
    reason: str = ""
    """The reason of its Job's active condition, e.g. ``WorkloadRunning``."""
    suspect: str = ""
    """An isolation re-test's node under test (its other nodes are healthy partners)."""


@dataclass(frozen=True)
class CategoryProgress:
    name: str
    """``domain/variant``, or the WorkloadRun's name."""
    state: str
    """Pending, InProgress, Succeeded or Failed."""
    reason: str = ""
    message: str = ""
    iteration: str = ""
    """``current/total`` once the Workflow has partitioned its nodes."""
    groups: tuple[GroupProgress, ...] = ()

    def nodes(self, phase: str) -> int:
        return sum(len(group.nodes) for group in self.groups if group.phase == phase)


@dataclass(frozen=True)
class Snapshot:
    kind: str
    name: str
    namespace: str
    phase: str
    """The active condition (InProgress, Succeeded, Failed), Pending before any."""
    reason: str = ""
    message: str = ""
    categories: tuple[CategoryProgress, ...] = ()

    @property
    def terminal(self) -> bool:
        return self.phase in (ConditionType.SUCCEEDED, ConditionType.FAILED)


def _verdict(job: Mapping[str, Any]) -> str:
    """The reason of a Job's true HardwareFailed or ValidationFailed condition (why its group failed)."""
    for verdict in VERDICTS:
        condition = condition_of(job, verdict) or {}
        if condition.get("status") == ConditionStatus.TRUE:
            return str(condition.get("reason") or "")
    return ""


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _groups(workflow: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]]) -> tuple[GroupProgress, ...]:
    wf_name = _name(workflow)
    reasons: dict[str, str] = {}
    for job in jobs:
        labels = (job.get("metadata") or {}).get("labels") or {}
        if labels.get(Label.WORKFLOW) == wf_name:
            reasons[_name(job)] = _verdict(job) or run_state(job)[1]
    groups = (((workflow.get("status") or {}).get("orchestration") or {}).get("groups")) or []
    out = []
    for group in groups:
        job_name = str((group.get("jobRef") or {}).get("name") or "")
        out.append(
            GroupProgress(
                name=str(group.get("name") or ""),
                phase=str(group.get("phase") or PENDING),
                nodes=tuple(group.get("nodes") or ()),
                reason=reasons.get(job_name, ""),
                suspect=str(group.get("suspect") or ""),
            )
        )
    return tuple(out)


def _category(
    name: str, state: str, workflow: Mapping[str, Any] | None, jobs: Sequence[Mapping[str, Any]]
) -> CategoryProgress:
    if workflow is None:
        return CategoryProgress(name, state)
    _, reason, message = run_state(workflow)
    groups = _groups(workflow, jobs)
    # A group whose pods cannot be placed is what a person waiting needs to see first.
    if any(g.reason == JobReason.WORKLOAD_SCHEDULING_BLOCKED for g in groups if g.phase == "Running"):
        reason = JobReason.WORKLOAD_SCHEDULING_BLOCKED
    orchestration = (workflow.get("status") or {}).get("orchestration") or {}
    iterations = int(((workflow.get("spec") or {}).get("orchestration") or {}).get("iterations") or 1)
    current = orchestration.get("currentIteration")
    iteration = f"{current}/{iterations}" if current else ""
    return CategoryProgress(name, state, reason, message, iteration, groups)


def workloadrun_snapshot(
    run: Mapping[str, Any], workflows: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]]
) -> Snapshot:
    """The progress of a WorkloadRun: one category, its Workflow (same name)."""
    name = _name(run)
    phase, reason, message = run_state(run)
    workflow = next((w for w in workflows if _name(w) == name), None)
    state = phase if workflow is not None or phase != PENDING else PENDING
    return Snapshot(
        "WorkloadRun",
        name,
        str((run.get("metadata") or {}).get("namespace") or ""),
        phase,
        reason,
        message,
        (_category(name, state, workflow, jobs),),
    )


def certification_snapshot(
    cert: Mapping[str, Any], workflows: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]]
) -> Snapshot:
    """The progress of a Certification: one category per ``spec.categories`` entry, in order."""
    phase, reason, message = run_state(cert)
    statuses = {
        (s.get("domain"), s.get("variant")): s
        for s in ((cert.get("status") or {}).get("categoryStatuses") or [])
    }
    by_name = {_name(w): w for w in workflows}
    categories = []
    for category in (cert.get("spec") or {}).get("categories") or []:
        key = (category.get("domain"), category.get("variant"))
        status = statuses.get(key) or {}
        workflow_name = str((status.get("workflowRef") or {}).get("name") or "")
        categories.append(
            _category(
                f"{key[0]}/{key[1]}", str(status.get("status") or PENDING), by_name.get(workflow_name), jobs
            )
        )
    return Snapshot(
        "Certification",
        _name(cert),
        str((cert.get("metadata") or {}).get("namespace") or ""),
        phase,
        reason,
        message,
        tuple(categories),
    )


def elapsed_text(seconds: float) -> str:
    """Elapsed time truncated to whole seconds, as Go prints a duration (``1m30s``)."""
    return format_duration(int(seconds) * 1_000_000_000)


def _group_line(category: CategoryProgress, group: GroupProgress) -> str:
    reason = f" ({group.reason})" if group.reason else ""
    return f"{category.name} {group.name} [{', '.join(group.nodes)}]: {group.phase}{reason}"


def _run_line(snapshot: Snapshot, elapsed: str) -> str:
    message = f" — {snapshot.message}" if snapshot.message else ""
    return f"[watch] {snapshot.name}: {snapshot.phase} ({elapsed}){message}"


def _category_line(category: CategoryProgress, elapsed: str) -> str:
    reason = f" — {category.reason}" if category.reason else ""
    return f"[watch] {category.name}: {category.state} ({elapsed}){reason}"


def change_lines(previous: Snapshot | None, current: Snapshot, elapsed_seconds: float) -> list[str]:
    """The ``[watch]`` lines a change from ``previous`` to ``current`` prints (none if nothing changed).

    The run's phase (a WorkloadRun's active condition, a Certification's category states) and,
    below it, every group whose phase or reason changed.
    """
    elapsed = elapsed_text(elapsed_seconds)
    lines: list[str] = []
    if current.kind == "WorkloadRun":
        before = (previous.phase, previous.message) if previous else None
        if current.phase != PENDING and before != (current.phase, current.message):
            lines.append(_run_line(current, elapsed))
    old = {c.name: c for c in previous.categories} if previous else {}
    for category in current.categories:
        was = old.get(category.name)
        changed = was is None or (was.state, was.reason) != (category.state, category.reason)
        if current.kind == "Certification" and category.state != PENDING and changed:
            lines.append(_category_line(category, elapsed))
        old_groups = {g.name: g for g in was.groups} if was else {}
        for group in category.groups:
            if old_groups.get(group.name) != group:
                lines.append(f"[watch]   {_group_line(category, group)}")
    return lines


def heartbeat_lines(current: Snapshot, elapsed_seconds: float) -> list[str]:
    """The 15-second heartbeat: the current state again, or ``Waiting for status...`` before any."""
    elapsed = elapsed_text(elapsed_seconds)
    if current.kind == "WorkloadRun":
        if current.phase == PENDING:
            return [f"[watch] Waiting for status... ({elapsed})"]
        return [_run_line(current, elapsed)]
    running = [c for c in current.categories if c.state == ConditionType.IN_PROGRESS]
    if not running and all(c.state == PENDING for c in current.categories):
        return [f"[watch] Waiting for status... ({elapsed})"]
    return [_category_line(c, elapsed) for c in running]


def final_line(current: Snapshot, elapsed_seconds: float) -> str:
    """``[watch] WorkloadRun succeeded. (12m4s)`` once the run is terminal."""
    outcome = "succeeded" if current.phase == ConditionType.SUCCEEDED else "failed"
    return f"[watch] {current.kind} {outcome}. ({elapsed_text(elapsed_seconds)})"


@dataclass(frozen=True)
class Row:
    """One row of the live view: a category, or one of its groups (indented)."""

    name: str
    state: str
    running: int
    succeeded: int
    failed: int
    reason: str


def rows(snapshot: Snapshot) -> list[Row]:
    """The live view's table: per category its node counts, then its groups."""
    out: list[Row] = []
    for category in snapshot.categories:
        iteration = f" (iteration {category.iteration})" if category.iteration else ""
        out.append(
            Row(
                category.name + iteration,
                category.state,
                category.nodes("Running"),
                category.nodes("Succeeded"),
                category.nodes("Failed"),
                category.reason,
            )
        )
        for group in category.groups:
            count = len(group.nodes)
            if group.suspect:
                partners = [n for n in group.nodes if n != group.suspect]
                members = f"{group.suspect} with {', '.join(partners)}"
            else:
                members = f"{group.nodes[0]}..{group.nodes[-1]}" if count > 1 else "".join(group.nodes)
            out.append(
                Row(
                    f"  {group.name} ({members})",
                    group.phase,
                    count if group.phase == "Running" else 0,
                    count if group.phase == "Succeeded" else 0,
                    count if group.phase == "Failed" else 0,
                    group.reason,
                )
            )
    return out
