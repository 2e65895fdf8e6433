"""The end of an iteration (every group terminal): start the next one, or write the verdict and
the succeeded nodes (decided by :mod:`nvcre.orchestration.iterations`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvcre.api.v1alpha1.constants import ConditionType, Default, WorkflowReason
from nvcre.conditions import set_in_status
from nvcre.controllers.workflow import isolating
from nvcre.controllers.workflow.comparing import fail_by_comparison
from nvcre.controllers.workflow.results import failed_node_names, record_succeeded
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.objects import Obj
from nvcre.orchestration.iterations import history_record, succeeded_nodes, verdict
from nvcre.runtime.controller import Result


async def iteration_complete(state: WorkflowState, spec: Mapping[str, Any]) -> Result | None:
    """Every group of the iteration (or of its isolation round) is terminal. ``spec``: the
    Workflow's spec with its overrides resolved (the topology key a platform brings)."""
    orchestration = state.orchestration
    current = int(
        orchestration.get("currentIteration") or int(orchestration.get("completedIterations") or 0) + 1
    )
    judged: dict[str, Obj] = {}
    if state.isolating:
        retests = await fail_by_comparison(state, peers=state.orchestration["isolation"].get("groups") or ())
        await isolating.finish(state, retests.jobs, retests.compared)
        judged = retests.jobs
    elif not isolating.isolated(state, current):
        judged = (await fail_by_comparison(state)).jobs
        if await isolating.start(state, current, spec):
            return Result(requeue_after=Default.REQUEUE_IMMEDIATE_SECONDS)
    completed = int(orchestration.get("completedIterations") or 0) + 1
    orchestration["completedIterations"] = completed
    total = state.iterations
    if completed >= total:
        await _final_status(state, judged)
        return None
    current = int(orchestration.get("currentIteration") or completed)
    orchestration.setdefault("iterationHistory", []).append(history_record(current, state.groups))
    for group in state.groups:
        # Each jobRef stays on the Pending group: the launch deletes those Jobs once this is written.
        group.update(phase="Pending", retries=0)
        group.pop("startTime", None)
        group.pop("completionTime", None)
    orchestration["currentIteration"] = completed + 1
    await state.record(
        ConditionType.IN_PROGRESS,
        WorkflowReason.ITERATION_COMPLETED,
        f"Iteration {completed}/{total} completed, starting next",
    )
    return Result(requeue_after=Default.REQUEUE_IMMEDIATE_SECONDS)


async def _final_status(state: WorkflowState, judged: dict[str, Obj]) -> None:
    """``judged``: the Jobs the outlier verdicts just wrote, fresher than the cache."""
    failed_jobs = [
        job
        for job in (
            judged.get(g["name"]) or state.caches.jobs.get(state.namespace, g["jobRef"]["name"])
            for g in state.groups
            if g.get("phase") == "Failed" and g.get("jobRef")
        )
        if job is not None
    ]
    decided = verdict(
        state.groups, state.orchestration.get("iterationHistory") or [], state.iterations, failed_jobs
    )
    isolation = state.orchestration.get("isolation") or {}
    failed = await failed_node_names(state)
    cleared = [n for n in isolation.get("clearedNodes") or () if n not in failed]
    await record_succeeded(state, [*succeeded_nodes(state.groups, failed), *cleared])
    message = f"{decided.message}; {isolation['message']}" if isolation.get("message") else decided.message

    def extra(status: dict[str, Any]) -> None:
        state.apply(status)
        if decided.validation_failed:
            set_in_status(
                status,
                ConditionType.VALIDATION_FAILED,
                "True",
                WorkflowReason.JOB_VALIDATION_FAILED,
                "One or more Jobs failed performance threshold validation",
                state.workflow["metadata"].get("generation"),
                state.ctx.clock.now(),
            )

    await state.record(decided.cond_type, decided.reason, message, extra=extra)
