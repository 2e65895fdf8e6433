"""Running the groups: launching Jobs in waves, following them, retries, iterations, the verdict."""

from __future__ import annotations

import copy
import logging
from typing import Any

from lightkube import ApiError

from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    MANAGED_BY_VALUE,
    Annotation,
    ConditionType,
    Default,
    Kind,
    Label,
    WorkflowReason,
)
from nvcre.api.v1alpha1.meta import Condition, parse_time
from nvcre.conditions import set_condition
from nvcre.controllers import indexes, resources
from nvcre.controllers.children import delete_if_present, get_live
from nvcre.controllers.status import condition_true, now
from nvcre.controllers.workflow.dependencies import (
    DependencyError,
    DependencyNotReady,
    add_job_owner,
    create_dependency,
    delete_refs,
)
from nvcre.controllers.workflow.partitioning import Failure
from nvcre.controllers.workflow.results import record_failed, record_succeeded
from nvcre.controllers.workflow.state import WorkflowState, timestamp
from nvcre.durations import parse_duration
from nvcre.naming import dependency_copy_suffix, job_name, uses_single_job_name
from nvcre.orchestration.dependencies import job_scoped_copies
from nvcre.orchestration.discovery import cordoned_opt_in
from nvcre.orchestration.placement import node_affinity, tolerations
from nvcre.orchestration.waves import groups_to_launch
from nvcre.render.workflow import ResolvedWorkflow
from nvcre.runtime.controller import Result
from nvcre.runtime.objects import Obj, controller_owner, to_plain
from nvcre.workload import trainjob

log = logging.getLogger(__name__)

REQUEUE = Result(requeue_after=Default.REQUEUE_SECONDS)
TERMINAL_GROUP_PHASES = ("Succeeded", "Failed")


def iterations(state: WorkflowState) -> int:
    return max(int((state.spec.get("orchestration") or {}).get("iterations") or 1), 1)


def _single(state: WorkflowState) -> bool:
    return uses_single_job_name(int(state.orchestration.get("totalGroups") or 0), iterations(state))


def _running_message(state: WorkflowState) -> str:
    running = sum(1 for g in state.groups if g.get("phase") == "Running")
    return f"Iteration {state.orchestration.get('currentIteration', 1)}/{iterations(state)}: {running} groups running"


# -- launching --------------------------------------------------------------------------------


class _GroupView:
    def __init__(self, group: dict[str, Any]) -> None:
        self.name = str(group["name"])
        self.phase = str(group.get("phase", "Pending"))
        self.nodes = list(group.get("nodes") or ())


def _job_spec(state: WorkflowState, resolved: ResolvedWorkflow, group: dict[str, Any]) -> dict[str, Any]:
    template = resolved.spec["jobTemplate"]
    spec: dict[str, Any] = copy.deepcopy(template["spec"])
    performance = ((resolved.spec.get("validation") or {}).get("performance")) or {}
    thresholds = (performance.get("thresholds") or {}).get("thresholds")
    if thresholds:
        spec["thresholds"] = dict(thresholds)
    if performance.get("measurementTimeout"):
        spec["measurementTimeout"] = performance["measurementTimeout"]
    orchestration = resolved.spec.get("orchestration") or {}
    target = orchestration.get("target")
    if not spec.get("nodeHealthMonitor"):
        spec["nodeHealthMonitor"] = {"cel": {"expression": Default.NODE_HEALTH_EXPRESSION}}
    if cordoned_opt_in(target):
        spec.pop("nodeHealthMonitor", None)
    pinned = state.orchestration.get("placement", "Pinned") != "Unpinned"
    workload = spec["workload"]["trainJob"]
    affinity = node_affinity(
        target,
        group_nodes=group["nodes"] if pinned else None,
        products=state.orchestration.get("gpuProducts") or (),
    )
    spec["workload"]["trainJob"] = trainjob.place(
        workload,
        affinity=affinity,
        tolerations=tolerations(target, has_launcher=trainjob.has_launcher(workload)),
        num_nodes=len(group["nodes"]) if pinned else int(state.orchestration.get("nodesPerJob") or 1),
    )
    return spec


async def _create_job_for_group(
    state: WorkflowState, resolved: ResolvedWorkflow, group: dict[str, Any]
) -> None:
    iteration = int(state.orchestration.get("currentIteration") or 1)
    single = _single(state)
    name = job_name(state.name, group["name"], iteration, single=single)
    spec = _job_spec(state, resolved, group)
    dependencies = resolved.spec.get("dependencies") or []
    copies = job_scoped_copies(
        dependencies, spec, dependency_copy_suffix(state.name, group["name"], iteration, single=single)
    )
    already = any(
        r.get("scope") == "job" and r.get("groupName") == group["name"] and r.get("iteration") == iteration
        for r in state.dependency_refs
    )
    created_domain = False
    new_refs: list[dict[str, Any]] = []
    if not already:
        for obj in copies.objects:
            ref = await create_dependency(state, obj, owner=False)
            new_refs.append({**ref, "scope": "job", "groupName": group["name"], "iteration": iteration})
            created_domain = created_domain or obj.get("kind") == "ComputeDomain"
        state.dependency_refs.extend(new_refs)
    if created_domain:
        raise DependencyNotReady(name)
    template_meta = (resolved.spec["jobTemplate"].get("metadata")) or {}
    body = {
        "apiVersion": API_VERSION,
        "kind": Kind.JOB,
        "metadata": {
            "name": name,
            "namespace": state.namespace,
            "labels": {
                **(template_meta.get("labels") or {}),
                Label.MANAGED_BY: MANAGED_BY_VALUE,
                Label.WORKFLOW: state.name,
                Label.GROUP: group["name"],
            },
            "annotations": {
                **(template_meta.get("annotations") or {}),
                Annotation.GROUP_NODES: ",".join(group["nodes"]),
            },
            "ownerReferences": [state.owner_reference(controller=True)],
        },
        "spec": copies.job_spec,
    }
    client = state.ctx.client
    try:
        created = to_plain(resources.Job, await client.create(resources.Job.from_dict(body)))
    except ApiError as error:
        if error.status.code != 409:
            raise
        existing = to_plain(resources.Job, await client.get(resources.Job, name, namespace=state.namespace))
        owner = controller_owner(existing)
        if not owner or owner.get("uid") != state.uid or existing["metadata"].get("deletionTimestamp"):
            if owner and owner.get("uid") == state.uid:
                raise DependencyNotReady(name) from error  # our retried Job is still going away
            raise Failure(
                WorkflowReason.JOB_NAME_COLLISION,
                f'Job "{name}" already exists in namespace "{state.namespace}" and is not controlled by '
                f'Workflow "{state.name}"; refusing to adopt it',
            ) from error
        created = existing
    for ref in state.dependency_refs:
        if (
            ref.get("scope") == "job"
            and ref.get("groupName") == group["name"]
            and ref.get("iteration") == iteration
        ):
            await add_job_owner(state, ref, created)
    group.update(
        phase="Running",
        jobRef={"apiVersion": API_VERSION, "kind": Kind.JOB, "name": name, "namespace": state.namespace},
        startTime=timestamp(),
    )


async def launch(state: WorkflowState, resolved: ResolvedWorkflow) -> Result:
    execution = (resolved.spec.get("orchestration") or {}).get("execution") or {}
    wave = groups_to_launch([_GroupView(g) for g in state.groups], int(execution.get("maxConcurrent") or 0))
    result = REQUEUE
    launched = 0
    for group in state.groups:
        if group["name"] not in wave:
            continue
        try:
            await _create_job_for_group(state, resolved, group)
            launched += 1
        except DependencyNotReady:
            result = REQUEUE
            break
        except DependencyError as error:
            raise Failure(error.reason, f"Failed to create dependency: {error}") from error
    await state.record(ConditionType.IN_PROGRESS, WorkflowReason.JOB_CREATED, _running_message(state))
    return result


# -- following --------------------------------------------------------------------------------


def _terminal(job: Obj) -> bool:
    return any(
        condition_true(job, t)
        for t in (ConditionType.HARDWARE_FAILED, ConditionType.FAILED, ConditionType.SUCCEEDED)
    )


def _time_left(state: WorkflowState, job: Obj, group: dict[str, Any]) -> float | None:
    """Seconds until the Job exceeds ``timeoutPerJob`` (negative once it has); None when no
    clock runs: no timeout set, or a workload created but never seen running (pending,
    suspended by a queue, unschedulable)."""
    execution = ((state.spec.get("orchestration") or {}).get("execution")) or {}
    limit = execution.get("timeoutPerJob")
    if not limit:
        return None
    try:
        seconds: float = parse_duration(str(limit)) / 1e9
    except ValueError:
        return None
    status = job.get("status") or {}
    if status.get("workloadStartTime"):
        started = parse_time(status["workloadStartTime"])
    elif status.get("workloadRef"):
        return None
    elif group.get("startTime"):
        started = parse_time(group["startTime"])
    else:
        return None
    return seconds - (now() - started).total_seconds()


def _pods_active(state: WorkflowState, job: Obj) -> bool:
    namespace = job["metadata"]["namespace"]
    return bool(
        any(
            p["metadata"].get("namespace") == namespace
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            for p in state.caches.pods.by_index(indexes.POD_JOB_INDEX, job["metadata"]["name"])
        )
    )


def _job_scoped_refs(state: WorkflowState, group: dict[str, Any]) -> list[dict[str, Any]]:
    iteration = state.orchestration.get("currentIteration", 1)
    return [
        r
        for r in state.dependency_refs
        if r.get("scope") == "job" and r.get("groupName") == group["name"] and r.get("iteration") == iteration
    ]


async def _clean_group_dependencies(state: WorkflowState, group: dict[str, Any]) -> None:
    refs = _job_scoped_refs(state, group)
    if not refs:
        return
    keep = await delete_refs(state, refs)
    state.dependency_refs = [r for r in state.dependency_refs if r not in refs or r in keep]


async def _complete_group(state: WorkflowState, group: dict[str, Any], job: Obj) -> bool:
    """Record a terminal group; False while its pods still drain (the group stays Running)."""
    failed = any(
        condition_true(job, t)
        for t in (ConditionType.FAILED, ConditionType.HARDWARE_FAILED, ConditionType.VALIDATION_FAILED)
    )
    status = job.get("status") or {}
    if failed:
        ref = status.get("workloadRef")
        if ref:
            await delete_if_present(
                state.ctx.client, resources.TrainJob, ref["name"], ref.get("namespace") or state.namespace
            )
        if _pods_active(state, job):
            return False
    group["completionTime"] = timestamp()
    if status.get("failedNodes"):
        await record_failed(state, status["failedNodes"])
    timed_out = any(
        c.get("type") == ConditionType.FAILED and c.get("reason") == WorkflowReason.JOB_TIMED_OUT
        for c in status.get("conditions") or ()
    )
    execution = ((state.spec.get("orchestration") or {}).get("execution")) or {}
    limit = int(execution.get("retryFailedGroups") or 0)
    if failed and not timed_out and int(group.get("retries") or 0) < limit:
        await delete_if_present(state.ctx.client, resources.Job, job["metadata"]["name"], state.namespace)
        await _clean_group_dependencies(state, group)
        group.update(phase="Pending", retries=int(group.get("retries") or 0) + 1)
        for key in ("jobRef", "startTime", "completionTime"):
            group.pop(key, None)
        return True
    await _clean_group_dependencies(state, group)
    group["phase"] = "Failed" if failed else "Succeeded"
    return True


async def follow(state: WorkflowState) -> Result:
    jobs = state.caches.jobs
    next_look = Default.REQUEUE_SECONDS
    for group in state.groups:
        if group.get("phase") != "Running" or not group.get("jobRef"):
            continue
        job = jobs.get(state.namespace, group["jobRef"]["name"])
        if job is None or job["metadata"].get("deletionTimestamp") or _terminal(job):
            # Decisions are taken on the live object: a cache miss is no proof of deletion, and
            # a retried group's cache may still hold the previous attempt's Job of the same name.
            job = await get_live(state.ctx.client, resources.Job, group["jobRef"]["name"], state.namespace)
        if job is not None and job["metadata"].get("deletionTimestamp") and _pods_active(state, job):
            continue
        if job is None or job["metadata"].get("deletionTimestamp"):
            await _clean_group_dependencies(state, group)
            group.update(phase="Failed", completionTime=timestamp())
            group.pop("jobRef", None)
            continue
        if not _terminal(job):
            left = _time_left(state, job, group)
            if left is None or left > 0:
                next_look = min(next_look, left + 0.1) if left is not None else next_look
                continue
            job = (
                await state.ctx.status.set_exclusive(
                    resources.Job,
                    job,
                    ConditionType.FAILED,
                    WorkflowReason.JOB_TIMED_OUT,
                    "Job exceeded timeoutPerJob",
                    unless_terminal=True,
                )
                or job
            )
            await state.ctx.recorder.warning(job, WorkflowReason.JOB_TIMED_OUT, "Job exceeded timeoutPerJob")
        await _complete_group(state, group, job)
    await state.record(ConditionType.IN_PROGRESS, WorkflowReason.JOB_RUNNING, _running_message(state))
    return Result(requeue_after=next_look)


# -- iterations and the verdict ---------------------------------------------------------------


async def iteration_complete(state: WorkflowState) -> Result | None:
    orchestration = state.orchestration
    completed = int(orchestration.get("completedIterations") or 0) + 1
    orchestration["completedIterations"] = completed
    total = iterations(state)
    if completed < total:
        history = orchestration.setdefault("iterationHistory", [])
        history.append(
            {
                "iteration": int(orchestration.get("currentIteration") or completed),
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
                    for g in state.groups
                ],
            }
        )
        for group in state.groups:
            if group.get("jobRef"):
                await delete_if_present(
                    state.ctx.client, resources.Job, group["jobRef"]["name"], state.namespace
                )
            group.update(phase="Pending", retries=0)
            for key in ("jobRef", "startTime", "completionTime"):
                group.pop(key, None)
        orchestration["currentIteration"] = completed + 1
        await state.record(
            ConditionType.IN_PROGRESS,
            WorkflowReason.ITERATION_COMPLETED,
            f"Iteration {completed}/{total} completed, starting next",
        )
        return Result(requeue_after=Default.REQUEUE_IMMEDIATE_SECONDS)
    await _final_status(state)
    return None


async def _final_status(state: WorkflowState) -> None:
    total = iterations(state)
    history = state.orchestration.get("iterationHistory") or []
    failed_groups = sum(1 for it in history for g in it.get("groups") or () if g.get("phase") == "Failed")
    failed_groups += sum(1 for g in state.groups if g.get("phase") == "Failed")
    await record_succeeded(
        state, [n for g in state.groups if g.get("phase") == "Succeeded" for n in g.get("nodes") or ()]
    )
    if failed_groups == 0:
        await state.record(
            ConditionType.SUCCEEDED,
            WorkflowReason.JOB_COMPLETED,
            f"All {total} iterations completed successfully",
        )
        return
    jobs = [
        state.caches.jobs.get(state.namespace, g["jobRef"]["name"])
        for g in state.groups
        if g.get("phase") == "Failed" and g.get("jobRef")
    ]
    hardware = any(j is not None and condition_true(j, ConditionType.HARDWARE_FAILED) for j in jobs)
    validation = any(j is not None and condition_true(j, ConditionType.VALIDATION_FAILED) for j in jobs)
    reason = (
        WorkflowReason.JOB_HARDWARE_FAILED
        if hardware
        else WorkflowReason.JOB_VALIDATION_FAILED
        if validation
        else WorkflowReason.ITERATIONS_FAILED
    )
    message = f"{failed_groups} groups failed across {total} iterations"
    if hardware:
        message += "; hardware failures occurred on one or more nodes"

    def extra(status: dict[str, Any]) -> None:
        state.apply(status)
        if validation:
            conditions = [Condition.model_validate(c) for c in status.get("conditions") or ()]
            updated = set_condition(
                conditions,
                ConditionType.VALIDATION_FAILED,
                "True",
                WorkflowReason.JOB_VALIDATION_FAILED,
                "One or more Jobs failed performance threshold validation",
                state.workflow["metadata"].get("generation"),
                now(),
            )
            status["conditions"] = [c.to_dict() for c in updated]

    await state.record(ConditionType.FAILED, reason, message, extra=extra)
