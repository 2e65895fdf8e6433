"""Launching groups: retiring a previous attempt's Job, then one Job per group of the wave,
with its Job-scoped dependency copies."""

from __future__ import annotations

import asyncio
from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    ConditionType,
    Default,
    Kind,
    Label,
    WorkflowReason,
)
from nvcre.controllers.children import (
    HolderTerminating,
    NameTaken,
    create_controlled,
    delete_if_present,
    get_live,
)
from nvcre.controllers.workflow.dependencies import (
    DependencyError,
    DependencyNotReady,
    create_dependency,
    delete_group_job,
    delete_refs,
    job_scoped_refs,
)
from nvcre.controllers.workflow.partitioning import Failure
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.naming import dependency_copy_suffix, job_name
from nvcre.objects import Obj
from nvcre.orchestration import launch as launch_rules
from nvcre.orchestration.dependencies import JobScopedCopies, job_scoped_copies
from nvcre.orchestration.waves import groups_to_launch
from nvcre.render.workflow import ResolvedWorkflow
from nvcre.runtime.controller import Result

REQUEUE = Result(requeue_after=Default.REQUEUE_SECONDS)
LAUNCHES_IN_FLIGHT = 16
"""Groups of a wave whose Job (and copies) are being created at once."""
_COMPUTE_DOMAIN = "ComputeDomain"


async def clean_group_dependencies(state: WorkflowState, group: dict[str, Any]) -> None:
    refs = job_scoped_refs(state, group)
    if not refs:
        return
    keep = await delete_refs(state, refs)
    state.dependency_refs = [r for r in state.dependency_refs if r not in refs or r in keep]


class _GroupView:
    def __init__(self, group: dict[str, Any]) -> None:
        self.name = str(group["name"])
        self.phase = str(group.get("phase", "Pending"))
        self.nodes = list(group.get("nodes") or ())


async def _create_job_for_group(
    state: WorkflowState, resolved: ResolvedWorkflow, group: dict[str, Any]
) -> None:
    iteration = int(state.orchestration.get("currentIteration") or 1)
    single = launch_rules.single(state.orchestration, state.iterations, isolating=state.isolating)
    name = job_name(state.name, group["name"], iteration, single=single)
    client = state.ctx.client
    if group.get("retries"):
        # A retry re-uses the Job name: wait until the failed attempt's Job (and with it the
        # copies it owns) is gone, rather than adopt copies that are on their way out.
        previous = await get_live(client, resources.Job, name, state.namespace)
        if previous is not None and previous["metadata"].get("deletionTimestamp"):
            raise DependencyNotReady(name)
    variant = (state.workflow["metadata"].get("labels") or {}).get(Label.CATEGORY_VARIANT)
    copies = job_scoped_copies(
        resolved.spec.get("dependencies") or [],
        launch_rules.job_spec(resolved.spec, state.orchestration, group, variant),
        dependency_copy_suffix(state.name, group["name"], iteration, single=single),
    )
    body = launch_rules.job_body(resolved.spec, state.name, group, name, copies)
    try:
        created = await create_controlled(client, resources.Job, body, state.workflow)
    except HolderTerminating as error:
        raise DependencyNotReady(name) from error
    except NameTaken as error:
        raise Failure(
            WorkflowReason.JOB_NAME_COLLISION,
            f'Job "{name}" already exists in namespace "{state.namespace}" and is not controlled by '
            f'Workflow "{state.name}"; refusing to adopt it',
        ) from error
    if not created.adopted:
        state.caches.created.add(state.namespace, name)
    try:
        await _create_copies(state, group, iteration, copies, created.obj)
    except DependencyError:
        # The Workflow fails on this refusal; the Job created for these copies would otherwise
        # wait for its runtime forever. Its controller releases it (the copies made so far
        # are its own: the garbage collector takes them with it).
        await delete_if_present(
            client, resources.Job, name, state.namespace, uid=created.obj["metadata"]["uid"]
        )
        raise
    group.update(
        phase="Running",
        jobRef={
            "apiVersion": API_VERSION,
            "kind": Kind.JOB,
            "name": name,
            "namespace": state.namespace,
            "uid": created.obj["metadata"]["uid"],
        },
        startTime=state.timestamp(),
    )


async def _create_copies(
    state: WorkflowState, group: dict[str, Any], iteration: int, copies: JobScopedCopies, job: Obj
) -> None:
    """Create the group's Job-scoped copies the status does not record yet, each with its Job as
    owner and label in its one create (the Job exists first, so its UID is known; its controller
    creates the TrainJob only once the runtime copy exists). A copy created by a pass that died
    before recording it is adopted. ComputeDomains come first: a new one stops the launch for a
    pass, giving the DRA driver time before the copies the workload needs."""
    recorded = {(r["kind"], r["name"]) for r in job_scoped_refs(state, group)}
    meta = job["metadata"]
    owner = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"], "uid": meta["uid"]}
    missing = [c for c in copies.objects if (c.get("kind"), c["metadata"]["name"]) not in recorded]
    domains = [c for c in missing if c.get("kind") == _COMPUTE_DOMAIN]
    for batch in (domains, [c for c in missing if c.get("kind") != _COMPUTE_DOMAIN]):
        for obj in batch:
            ref = await create_dependency(state, obj, owner=owner, labels={Label.JOB: meta["name"]})
            state.dependency_refs.append(
                {**ref, "scope": "job", "groupName": group["name"], "iteration": iteration}
            )
        if batch is domains and domains:
            raise DependencyNotReady(meta["name"])


async def _retire(state: WorkflowState) -> None:
    """Delete the Jobs of earlier attempts that the status still names on Pending groups (a
    retry or a new iteration recorded them before acting) and the group's copies, then write
    the status without them, so that a later pass never mistakes a new Job for an old one."""
    retiring = [g for g in state.groups if g.get("phase") == "Pending" and g.get("jobRef")]
    if not retiring:
        return
    for group in retiring:
        await delete_group_job(state, group)
        await clean_group_dependencies(state, group)
        group.pop("jobRef")
    await state.save()


async def launch(state: WorkflowState, resolved: ResolvedWorkflow) -> Result:
    """Create the Jobs of the wave's groups, up to ``LAUNCHES_IN_FLIGHT`` at a time, then record
    them. A group whose dependency is not ready yet stops the groups not started; an error
    stops them too and is raised once those in flight are done (what they created is adopted
    by the next pass: the names are deterministic)."""
    await _retire(state)
    execution = (resolved.spec.get("orchestration") or {}).get("execution") or {}
    wave = groups_to_launch([_GroupView(g) for g in state.groups], int(execution.get("maxConcurrent") or 0))
    gate = asyncio.Semaphore(LAUNCHES_IN_FLIGHT)
    stopped = False

    async def launch_group(group: dict[str, Any]) -> None:
        nonlocal stopped
        async with gate:
            if stopped:
                return
            try:
                await _create_job_for_group(state, resolved, group)
            except DependencyNotReady:
                stopped = True
            except BaseException:
                stopped = True
                raise

    outcomes = await asyncio.gather(
        *(launch_group(g) for g in state.groups if g["name"] in wave), return_exceptions=True
    )
    for outcome in outcomes:
        if isinstance(outcome, DependencyError):
            raise Failure(outcome.reason, f"Failed to create dependency: {outcome}") from outcome
        if isinstance(outcome, BaseException):
            raise outcome
    await state.record(ConditionType.IN_PROGRESS, WorkflowReason.JOB_CREATED, state.running_message())
    return REQUEUE
