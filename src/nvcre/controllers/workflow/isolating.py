"""Isolation in the Workflow controller: set suspects aside, run the re-test round
:mod:`nvcre.orchestration.isolation` plans, record what it decides.

A failed group's entries that no hardware report gave are kept on the group (``suspects``) in the
same status write as its phase, instead of going to the failed-nodes ConfigMap. When the
iteration ends, one status write saves the iteration's groups in ``orchestration.isolation`` and
replaces them with the round's groups; when those are all terminal, the ConfigMap gets the
decided entries (a merge: a replay writes nothing new) and one status write restores the
iteration's groups with the outcome, after which the iteration ends as any other.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import ConditionType, EventType, WorkflowReason
from nvcre.controllers.children import get_live
from nvcre.controllers.workflow.results import record_failed
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.objects import Obj
from nvcre.orchestration import isolation
from nvcre.orchestration.discovery import labels_of


def enabled(state: WorkflowState) -> bool:
    return isolation.enabled(state.spec.get("orchestration") or {})


def isolated(state: WorkflowState, iteration: int) -> bool:
    """This iteration's isolation round has run (or is running)."""
    return (state.orchestration.get("isolation") or {}).get("iteration") == iteration


async def record_or_set_aside(
    state: WorkflowState, group: dict[str, Any], entries: Sequence[Mapping[str, Any]]
) -> None:
    """Record a failed group's entries, or with isolation on keep those to re-test on the group
    (a hardware report is recorded at once). During the round itself only hardware reports are
    recorded: the round's outcome names the suspects. A one-node group is its node: recorded."""
    if not enabled(state) or len(group.get("nodes") or ()) < 2:
        await record_failed(state, entries)
        return
    now, later = isolation.set_aside(entries)
    await record_failed(state, now)
    if later and not state.isolating:
        group["suspects"] = later


def _domain_of(state: WorkflowState, spec: Mapping[str, Any]) -> dict[str, str]:
    """Each node's topology domain by the resolved key (a platform override may bring it), else
    by the detected platform's network-block label."""
    key = isolation.domain_key(spec.get("orchestration") or {}, state.orchestration.get("detectedPlatform"))
    if not key:
        return {}
    out = {}
    for group in state.groups:
        for name in group.get("nodes") or ():
            node = state.caches.nodes.get("", name)
            domain = labels_of(node).get(key) if node else None
            if domain:
                out[name] = str(domain)
    return out


async def start(state: WorkflowState, iteration: int, spec: Mapping[str, Any]) -> bool:
    """Start the round for this iteration's suspects; False when there is none to run (suspects
    without a healthy node to pair with are recorded as their group's failure said)."""
    if not enabled(state) or isolated(state, iteration):
        return False
    suspects = isolation.suspects(state.groups)
    if not suspects:
        return False
    plan = isolation.plan(state.groups, _domain_of(state, spec))
    await record_failed(state, plan.untested)
    orchestration = state.orchestration
    if not plan.groups:
        for group in state.groups:
            group.pop("suspects", None)
        return False
    previous = orchestration.get("isolation") or {}
    orchestration["isolation"] = {
        **{k: previous[k] for k in ("failedNodes", "clearedNodes", "links") if previous.get(k)},
        "iteration": iteration,
        "stage": "Running",
        "suspects": suspects,
        "groups": copy.deepcopy(state.groups),
    }
    orchestration["groups"] = [dict(g) for g in plan.groups]
    paired = sum(1 for g in plan.groups if not g.get("screen"))
    screened = len(plan.groups) - paired  # a ring: as many pairs as nodes
    how = [f"{paired} with healthy partners from the passing groups"] if paired else []
    how += [f"{screened} in pairs among themselves (no healthy node to pair with)"] if screened else []
    message = (
        f"Iteration {iteration}: re-testing {paired + screened} suspect nodes of "
        f"{len({s['group'] for s in suspects})} failed groups, {' and '.join(how)}"
    )
    state.emit(EventType.NORMAL, WorkflowReason.ISOLATING, message)
    await state.record(ConditionType.IN_PROGRESS, WorkflowReason.ISOLATING, message)
    return True


async def finish(state: WorkflowState, judged: Mapping[str, Obj], compared: Collection[str]) -> None:
    """Record the round's outcome and restore the iteration's groups (the caller ends the
    iteration in the same status write). ``judged``: the round's Jobs its outlier verdicts just
    wrote, fresher than the cache; ``compared``: its groups the outlier rule could judge."""
    orchestration = state.orchestration
    status = orchestration["isolation"]
    failures: dict[str, tuple[str, str] | None] = {}
    for group in state.groups:
        if group.get("phase") != "Failed" or not group.get("jobRef"):
            continue
        name = group["jobRef"]["name"]
        job = (
            judged.get(group["name"])
            or state.caches.jobs.get(state.namespace, name)
            or await get_live(state.ctx.client, resources.Job, name, state.namespace)
        )
        if job is None:
            continue
        if group.get("screen"):
            for node in group.get("nodes") or ():
                failures[isolation.screen_key(group, node)] = isolation.failure(job, node)
        else:
            failures[group["name"]] = isolation.failure(job, group["suspect"])
    outcome = isolation.decide(status, state.groups, failures, compared=compared)
    await record_failed(state, outcome.failed)
    restored = status.pop("groups", None) or []
    for group in restored:
        group.pop("suspects", None)
    status.update(
        stage="Complete",
        failedNodes=sorted({*(status.get("failedNodes") or ()), *(e["name"] for e in outcome.failed)}),
        clearedNodes=sorted({*(status.get("clearedNodes") or ()), *outcome.cleared}),
        links=[*(status.get("links") or ()), *outcome.links],
        retests=[
            {
                "suspect": suspect,
                "partners": [n for n in g.get("nodes") or () if n != suspect],
                **({"jobName": g["jobRef"]["name"]} if g.get("jobRef") else {}),
                "passed": g.get("phase") == "Succeeded",
            }
            for g in state.groups
            for suspect in (g.get("nodes") or () if g.get("screen") else (g["suspect"],))
        ],
        message=outcome.message,
    )
    for key in ("failedNodes", "clearedNodes", "links"):
        if not status[key]:
            del status[key]
    orchestration["groups"] = restored
    kind = EventType.WARNING if outcome.failed or outcome.links else EventType.NORMAL
    state.emit(kind, WorkflowReason.ISOLATION_COMPLETED, outcome.message)
