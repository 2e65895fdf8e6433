"""Diagnose mode in the Workflow controller: run the rounds :mod:`nvcre.orchestration.diagnose`
decides, read their results, record the outcome.

Every decision is a pure function of what the status already records (the diagnose status, the
round's groups and their phases) and of frozen measurements, so a reconcile killed at any line
decides the same again: the node-result ConfigMaps (merges, idempotent) are written before the
status write that ends the diagnosis, and a new round is one status write that replaces the
groups. The Jobs of earlier rounds stay (the report reads them); every round's Jobs have names
of their own (``<wf>-<group>-iter-<round>``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import ConditionType, Default, WorkflowReason
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.controllers.children import get_live
from nvcre.controllers.workflow.dependencies import delete_group_job
from nvcre.controllers.workflow.results import record_failed, record_succeeded
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.durations import parse_duration
from nvcre.measure import thresholds, verdicts
from nvcre.naming import bandwidth_measurement_name
from nvcre.objects import Obj
from nvcre.orchestration import diagnose
from nvcre.orchestration.completion import may_be_transient
from nvcre.orchestration.discovery import labels_of, name_of
from nvcre.orchestration.iterations import history_record
from nvcre.runtime.controller import Result


def diagnose_spec(spec: dict[str, Any]) -> dict[str, Any] | None:
    value = (spec.get("orchestration") or {}).get("diagnose")
    return dict(value) if value else None


def settings(spec: dict[str, Any]) -> diagnose.Settings:
    """``spec``: the Workflow spec with its overrides applied."""
    config = diagnose_spec(spec) or {}
    workload = (spec.get("jobTemplate") or {}).get("spec") or {}
    return diagnose.Settings(
        min_group_size=int(config.get("minGroupSize") or 2),
        max_rounds=config.get("maxRounds"),
        mnnvl=diagnose.mnnvl_enabled(workload),
    )


def first_round(state: WorkflowState, nodes: list[Obj], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The screening groups; the diagnose status that records them goes into ``state``."""
    key = (diagnose_spec(spec) or {}).get("topologyKey")
    step = diagnose.start(
        {name_of(n): (labels_of(n).get(key) if key else None) for n in nodes}, key, state.timestamp()
    )
    state.orchestration["diagnose"] = step.status
    return [g.to_status() for g in step.groups]


def _deadline_passed(state: WorkflowState) -> str | None:
    """``deadline <d> reached`` once the diagnosis has run longer than ``diagnose.deadline``."""
    deadline = (diagnose_spec(state.spec) or {}).get("deadline")
    started = (state.orchestration.get("diagnose") or {}).get("startTime")
    if not deadline or not started:
        return None
    try:
        limit = timedelta(microseconds=parse_duration(str(deadline)) / 1000)
    except ValueError:
        return None
    return f"deadline {deadline} reached" if state.ctx.clock.now() - parse_time(started) >= limit else None


async def check_deadline(state: WorkflowState, spec: dict[str, Any]) -> bool:
    """End the diagnosis when its deadline passed: stop the round's Jobs, then record what it
    knows (deleting is idempotent and the decision is taken again after a kill)."""
    why = _deadline_passed(state)
    if why is None:
        return False
    for group in state.groups:
        if group.get("phase") == "Running" and group.get("jobRef"):
            await delete_group_job(state, group)
    await _finish(state, diagnose.stop(state.orchestration.get("diagnose") or {}, settings(spec), why))
    return True


def _gate(spec: dict[str, Any]) -> str | None:
    performance = (spec.get("validation") or {}).get("performance") or {}
    expression = ((performance.get("thresholds") or {}).get("thresholds") or {}).get(thresholds.BUS_BANDWIDTH)
    return str(expression) if expression else None


async def _passes_gate(state: WorkflowState, group: dict[str, Any], expression: str) -> bool | None:
    """The group's final bus bandwidth against ``expression``; None while there is no final
    measurement to judge (the round waits); a terminal measurement without data fails."""
    name = group["jobRef"]["name"]
    job = await get_live(state.ctx.client, resources.Job, name, state.namespace)
    measurement = await get_live(
        state.ctx.client, resources.BandwidthMeasurement, bandwidth_measurement_name(name), state.namespace
    )
    if job is None or measurement is None or not verdicts.belongs(measurement, job):
        return None
    values = thresholds.bandwidth_values(measurement)
    if thresholds.BUS_BANDWIDTH not in values:
        return False if thresholds.measurement_complete(measurement) else None
    return not thresholds.evaluate({thresholds.BUS_BANDWIDTH: expression}, values).failed


async def round_complete(state: WorkflowState, spec: dict[str, Any]) -> Result | None:
    """Every group of the round is terminal: the next round, or the verdict."""
    gate = _gate(spec)
    results = []
    for group in state.groups:
        passed = group.get("phase") == "Succeeded"
        if passed and gate and group.get("jobRef"):
            judged = await _passes_gate(state, group, gate)
            if judged is None:
                return Result(requeue_after=Default.REQUEUE_SECONDS)
            passed = judged
        results.append(
            diagnose.GroupResult(
                group["name"],
                tuple(group.get("nodes") or ()),
                passed,
                tuple(group.get("domains") or ()),
                transient=passed and bool(group.get("retries")),
            )
        )
    orchestration = state.orchestration
    step = diagnose.advance(orchestration.get("diagnose") or {}, results, settings(spec))
    round_ = int(orchestration.get("currentIteration") or 1)
    orchestration.setdefault("iterationHistory", []).append(history_record(round_, state.groups))
    orchestration["completedIterations"] = round_
    if step.verdict is not None:
        await _finish(state, step)
        return None
    orchestration.update(
        diagnose=step.status,
        groups=[g.to_status() for g in step.groups],
        totalGroups=len(step.groups),
        currentIteration=int(step.status["round"]),
    )
    await state.record(ConditionType.IN_PROGRESS, WorkflowReason.ITERATION_COMPLETED, step.message)
    return Result(requeue_after=Default.REQUEUE_IMMEDIATE_SECONDS)


async def _finish(state: WorkflowState, step: diagnose.Step) -> None:
    verdict = step.verdict
    assert verdict is not None
    if verdict.failed:
        await record_failed(state, verdict.failed)
    await record_succeeded(state, verdict.healthy)
    state.orchestration["diagnose"] = step.status
    if verdict.succeeded:
        await state.record(ConditionType.SUCCEEDED, WorkflowReason.JOB_COMPLETED, verdict.message)
        return
    reason = (
        WorkflowReason.DIAGNOSE_LIMIT_REACHED if verdict.limit_reached else WorkflowReason.ITERATIONS_FAILED
    )
    await state.record(ConditionType.FAILED, reason, verdict.message)


def retest_limit(job: Obj) -> int:
    """A diagnose group is re-run once when its failure may be transient (see
    :func:`~nvcre.orchestration.completion.may_be_transient`)."""
    return 1 if may_be_transient(job) else 0
