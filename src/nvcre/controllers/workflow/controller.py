"""Wiring and the reconcile state machine of the Workflow controller."""

from __future__ import annotations

import logging
from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import GROUP, ConditionType, Default, Finalizer, Kind, Label, WorkflowReason
from nvcre.conditions import is_terminal
from nvcre.controllers import indexes
from nvcre.controllers.children import delete_if_present, get_live
from nvcre.controllers.context import Context
from nvcre.controllers.finalizers import ensure_finalizer, remove_finalizer
from nvcre.controllers.status import conditions_of
from nvcre.controllers.workflow.deadline import stop as deadline_stop
from nvcre.controllers.workflow.dependencies import (
    DependencyError,
    DependencyNotReady,
    create_dependency,
    delete_refs,
    owned_refs,
    release_volumes,
)
from nvcre.controllers.workflow.diagnosing import check_deadline, round_complete
from nvcre.controllers.workflow.finishing import iteration_complete
from nvcre.controllers.workflow.following import follow
from nvcre.controllers.workflow.launching import launch
from nvcre.controllers.workflow.partitioning import Failure, discover_and_partition
from nvcre.controllers.workflow.releasing import Releaser
from nvcre.controllers.workflow.resolving import ResolvedSpecs
from nvcre.controllers.workflow.state import Caches, WorkflowState
from nvcre.decide import limits
from nvcre.objects import Obj, ObjectKey
from nvcre.orchestration.dependencies import creation_order, job_scoped
from nvcre.runtime.controller import Controller, Result, owned_by, wake_by

log = logging.getLogger(__name__)

TERMINAL_GROUP_PHASES = ("Succeeded", "Failed")


class WorkflowController:
    def __init__(
        self,
        ctx: Context,
        *,
        workers: int = Default.MAX_CONCURRENT_RECONCILES,
        release_timeout: float = Default.RELEASE_TIMEOUT_SECONDS,
    ) -> None:
        self.ctx = ctx
        manager = ctx.manager
        self.workflows = manager.informer(resources.Workflow)
        pods = indexes.pods(manager)
        self.caches = Caches(
            jobs=manager.informer(resources.Job),
            nodes=indexes.nodes(manager),
            pods=pods,
            records=manager.informer(resources.NodeRecord),
        )
        self.resolved = ResolvedSpecs()
        self.releaser = Releaser(ctx, self.caches.jobs, pods, release_timeout)
        self.caches.jobs.add_handler(self._job_seen)  # first: before its event wakes the Workflow
        self.controller = Controller("workflow", self.reconcile, workers=workers)
        self.controller.watch(self.workflows)
        self.controller.watch(self.caches.jobs, owned_by(Kind.WORKFLOW, GROUP))
        self.controller.watch(pods, self._pod_to_workflow)
        self.controller.watch(self.releaser.trainjobs, self._workload_gone)
        self.controller.watch(self.releaser.runtime_copies, self._workload_gone)
        manager.add(self.controller)

    def _job_seen(self, event: str, old: Obj | None, new: Obj) -> None:
        self.caches.created.seen(new["metadata"].get("namespace", ""), new["metadata"]["name"])

    def _pod_to_workflow(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        """A workload pod that ends or goes away may release a group held by the pod-drain barrier."""
        if event == "MODIFIED" and (old or {}).get("status", {}).get("phase") == new.get("status", {}).get(
            "phase"
        ):
            return []
        return self._by_job_label(new)

    def _workload_gone(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        """A TrainJob or runtime copy that goes may complete an ended Workflow's release."""
        return self._by_job_label(new) if event == "DELETED" else []

    def _by_job_label(self, obj: Obj) -> list[ObjectKey]:
        """The Workflow of the Job an object is labelled with."""
        namespace = obj["metadata"].get("namespace", "")
        job_name = (obj["metadata"].get("labels") or {}).get(Label.JOB)
        job = self.caches.jobs.get(namespace, job_name) if job_name else None
        workflow = ((job or {}).get("metadata", {}).get("labels") or {}).get(Label.WORKFLOW)
        return [ObjectKey(namespace, workflow)] if workflow else []

    async def reconcile(self, key: ObjectKey) -> Result | None:
        workflow = await get_live(self.ctx.client, resources.Workflow, key.name, key.namespace)
        if workflow is None:
            self.resolved.forget(key)
            return None
        state = WorkflowState.of(self.ctx, self.caches, workflow)
        if workflow["metadata"].get("deletionTimestamp"):
            self.resolved.forget(key)
            return await self._delete(state)
        if await ensure_finalizer(self.ctx.client, resources.Workflow, workflow, Finalizer.WORKFLOW):
            return None
        if is_terminal(conditions_of(workflow)):
            self.resolved.forget(key)
            return await self.releaser.release(workflow)
        deadline = limits.workflow_deadline(workflow)
        left = limits.seconds_left(deadline, self.ctx.clock.now())
        try:
            if left is not None and left <= 0:
                await deadline_stop(state)
                return None
            return wake_by(await self._step(state), left)
        except Failure as failure:
            await state.record(ConditionType.FAILED, failure.reason, failure.message)
            return None
        finally:
            if is_terminal(conditions_of(state.workflow)):
                self.resolved.forget(key)

    async def _step(self, state: WorkflowState) -> Result | None:
        if not state.orchestration.get("totalGroups"):
            return await discover_and_partition(state)
        nodes = [
            n
            for n in (self.caches.nodes.get("", name) for g in state.groups for name in g.get("nodes") or ())
            if n
        ]
        resolved = self.resolved.get(state, nodes)
        state.observe_images(resolved.spec, self._running_jobs(state))
        self._check_checkpoint(resolved.spec)
        try:
            await self._ensure_workflow_dependencies(state, resolved.spec)
        except DependencyNotReady:
            return Result(requeue_after=Default.REQUEUE_SECONDS)
        diagnosing = bool(state.orchestration.get("diagnose"))
        if diagnosing and await check_deadline(state, resolved.spec):
            return None
        phases = [g.get("phase") for g in state.groups]
        if "Running" in phases:
            return await follow(state)
        if all(p in TERMINAL_GROUP_PHASES for p in phases):
            if diagnosing:
                return await round_complete(state, resolved.spec)
            return await iteration_complete(state, resolved.spec)
        return await launch(state, resolved)

    def _running_jobs(self, state: WorkflowState) -> list[Obj]:
        """The cached Jobs of the running groups: the follow below judges from the same cache (or
        a fresher live read of a Job the cache shows ended), so what a Job ran is seen no later
        than its end."""
        refs = [g["jobRef"]["name"] for g in state.groups if g.get("phase") == "Running" and g.get("jobRef")]
        return [j for j in (self.caches.jobs.get(state.namespace, name) for name in refs) if j is not None]

    @staticmethod
    def _check_checkpoint(spec: dict[str, Any]) -> None:
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        checkpoint = job_spec.get("checkpoint")
        if not checkpoint:
            return
        pvc = checkpoint.get("pvcName")
        if not any(
            d.get("kind") == "PersistentVolumeClaim" and (d.get("metadata") or {}).get("name") == pvc
            for d in spec.get("dependencies") or ()
        ):
            raise Failure(
                WorkflowReason.CHECKPOINT_PVC_MISSING, f'Checkpoint requires PVC "{pvc}" in dependencies'
            )

    async def _ensure_workflow_dependencies(self, state: WorkflowState, spec: dict[str, Any]) -> None:
        dependencies = list(spec.get("dependencies") or ())
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        scoped = set(job_scoped(dependencies, job_spec))
        order = creation_order(dependencies, [i for i in range(len(dependencies)) if i not in scoped])
        done = sum(1 for r in state.dependency_refs if r.get("scope", "workflow") == "workflow")
        for index in order[done:]:
            try:
                ref = await create_dependency(
                    state, dependencies[index], owner=state.owner_reference(controller=False)
                )
            except DependencyError as error:
                raise Failure(error.reason, f"Failed to create dependency: {error}") from error
            state.dependency_refs.append({**ref, "scope": "workflow"})
            await state.save()

    async def _delete(self, state: WorkflowState) -> Result | None:
        finalizers = state.workflow["metadata"].get("finalizers") or ()
        if Finalizer.WORKFLOW not in finalizers:
            return None
        jobs = [
            j
            for j in self.caches.jobs.items(state.namespace)
            if (j["metadata"].get("labels") or {}).get(Label.WORKFLOW) == state.name
        ]
        refs = await owned_refs(state)
        if any(not j["metadata"].get("deletionTimestamp") for j in jobs):
            # the garbage collector takes the Jobs' claims with them: their volumes first
            await release_volumes(state, refs)
        live_jobs = []
        for job in jobs:
            live_jobs.append(job)
            if not job["metadata"].get("deletionTimestamp"):
                await delete_if_present(
                    self.ctx.client,
                    resources.Job,
                    job["metadata"]["name"],
                    state.namespace,
                    uid=job["metadata"].get("uid"),
                )
        if live_jobs:
            return Result(requeue_after=Default.REQUEUE_SECONDS)
        keep = await delete_refs(state, refs)
        if keep:
            state.dependency_refs = keep
            await state.save()
            return Result(requeue_after=5.0)
        await remove_finalizer(self.ctx.client, resources.Workflow, state.workflow, Finalizer.WORKFLOW)
        return None
