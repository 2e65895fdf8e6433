"""The WorkloadRun controller: build the run's one Workflow, then only mirror it (spec §3).

A reconcile reads the run live. A terminal run (Succeeded or Failed) keeps its outcome.
Without ``status.workflowRef`` the run's target nodes are discovered from the node cache and
``nvcre.render.workloadrun.build_workflow`` (the render ``nvcrectl workloadrun render`` uses)
turns the run into its Workflow, created under the run's name with a controller owner
reference. Every render error is ``Failed``/``BuildFailed``. Once the ref is recorded the
controller never builds again: it copies the Workflow's outcome, detection and node-result refs,
and once the run has ended only its Workflow's ``ResourcesReleased``.
"""

from __future__ import annotations

import copy
from typing import Any

from lightkube import ApiError
from pydantic import ValidationError

from nvcre import resources
from nvcre.api.v1alpha1.constants import (
    GROUP,
    ConditionType,
    Default,
    EventReason,
    Kind,
    Reason,
    WorkflowReason,
    WorkloadRunReason,
)
from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.conditions import condition_of, condition_true, is_terminal
from nvcre.controllers import indexes
from nvcre.controllers.children import (
    HolderTerminating,
    NameTaken,
    cached_or_live,
    create_controlled,
    get_live,
)
from nvcre.controllers.context import REQUEUE, Context
from nvcre.controllers.releases import write_release
from nvcre.controllers.resourceslices import gpu_inventory
from nvcre.controllers.status import conditions_of
from nvcre.controllers.verdict_writes import set_validation
from nvcre.decide import limits, provenance, release, scheduling
from nvcre.decide.certification import RECORDED_FIELDS
from nvcre.objects import Obj, ObjectKey, StatusChange
from nvcre.orchestration.discovery import discover
from nvcre.platform.dra import GPUInventory
from nvcre.render.workloadrun import BuildError, WorkloadRunRender, build_workflow
from nvcre.runtime.controller import Controller, Result, owned_by
from nvcre.runtime.errors import is_invalid


def mirrored_fields(workflow: Obj) -> dict[str, Any]:
    """What a WorkloadRun copies from its Workflow's status (only the fields that are set): the
    detection, and what a Certification's category copies (the node-result refs, the provenance)."""
    status = workflow.get("status") or {}
    orchestration = status.get("orchestration") or {}
    out: dict[str, Any] = {}
    if orchestration.get("detectedPlatform"):
        out["detectedPlatform"] = orchestration["detectedPlatform"]
    if orchestration.get("detectedGPUArchitecture"):
        out["detectedGPUArchitecture"] = orchestration["detectedGPUArchitecture"]
    for key in RECORDED_FIELDS:
        if status.get(key):
            out[key] = copy.deepcopy(status[key])
    return out


def outcome(workflow: Obj) -> tuple[str, str, str] | None:
    """The run's terminal condition (type, reason, message) for a terminal Workflow."""
    if condition_true(workflow, ConditionType.SUCCEEDED):
        return (
            ConditionType.SUCCEEDED,
            WorkloadRunReason.WORKFLOW_SUCCEEDED,
            "Workflow completed successfully",
        )
    if condition_true(workflow, ConditionType.FAILED):
        failed = condition_of(workflow, ConditionType.FAILED) or {}
        reason = (
            WorkloadRunReason.WORKFLOW_VALIDATION_FAILED
            if failed.get("reason") == WorkflowReason.JOB_VALIDATION_FAILED
            else WorkloadRunReason.WORKFLOW_FAILED
        )
        return ConditionType.FAILED, reason, str(failed.get("message") or "")
    return None


class WorkloadRunController:
    def __init__(
        self,
        ctx: Context,
        *,
        workers: int = Default.MAX_CONCURRENT_RECONCILES,
        max_nodes_per_run: int = Default.MAX_NODES_PER_RUN,
    ) -> None:
        self.ctx = ctx
        self.max_nodes_per_run = max_nodes_per_run
        manager = ctx.manager
        self.runs = manager.informer(resources.WorkloadRun)
        self.workflows = manager.informer(resources.Workflow)
        self.nodes = indexes.nodes(manager)
        self.controller = Controller("workloadrun", self.reconcile, workers=workers)
        self.controller.watch(self.runs)
        self.controller.watch(self.workflows, owned_by(Kind.WORKLOAD_RUN, GROUP))
        manager.add(self.controller)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        run = await get_live(self.ctx.client, resources.WorkloadRun, key.name, key.namespace)
        if run is None:
            return None
        if is_terminal(conditions_of(run)):
            await self._mirror_release(run)
            return None
        if ((run.get("status") or {}).get("workflowRef") or {}).get("name"):
            return await self._mirror(run)
        return await self._build(run)

    # -- writes -------------------------------------------------------------------------------

    async def _write_state(
        self, run: Obj, cond_type: str, reason: str, message: str, extra: StatusChange | None = None
    ) -> Obj | None:
        """Make ``cond_type`` the run's one True state (the others ``Superseded``), with ``extra``
        in the same write; never over a state that has ended."""
        return await self.ctx.status.set_exclusive(
            resources.WorkloadRun,
            run,
            cond_type,
            reason,
            message,
            extra=extra,
            inactive_reason=Reason.SUPERSEDED,
            unless_terminal=True,
        )

    async def _fail(self, run: Obj, reason: str, message: str) -> None:
        try:
            await self._write_state(run, ConditionType.FAILED, reason, message)
        except ApiError as error:
            if reason == WorkloadRunReason.BUILD_FAILED:
                await self.ctx.recorder.warning(
                    run, EventReason.BUILD_FAILED_STATUS_UPDATE_FAILED, f"{message}: {error}"
                )
            raise

    # -- first pass: build and create ---------------------------------------------------------

    def _render(self, run: Obj, dra: GPUInventory) -> tuple[WorkloadRunRender, int]:
        """The run's Workflow, and how many nodes its target resolves to (``dra``: the GPUs of
        nodes without GPU labels)."""
        model = WorkloadRun.model_validate(run)
        target = model.spec.target.to_dict() if model.spec.target else None
        # Best effort: with no matching node the Workflow is still created and fails with
        # NodeDiscoveryError, which the run then mirrors (the reference behaves the same).
        nodes = discover(self.nodes.items(), target, dra).nodes
        return build_workflow(model, nodes, resolve=False, gpu_products=dra.products), len(nodes)

    async def _build(self, run: Obj) -> Result | None:
        name = run["metadata"]["name"]
        namespace = run["metadata"]["namespace"]
        deadline = limits.deadline_of(run)
        if limits.passed(deadline, self.ctx.clock.now()):
            await self._fail(run, WorkloadRunReason.DEADLINE_EXCEEDED, limits.deadline_message(run))
            return None
        try:
            render, count = self._render(run, await gpu_inventory(self.ctx.client))
        except (BuildError, ValidationError, ValueError) as error:
            await self._fail(run, WorkloadRunReason.BUILD_FAILED, f"workloadrun {name}: {error}")
            return None
        limit = limits.node_limit(run["spec"], self.max_nodes_per_run)
        refusal = limits.too_many_nodes(count, limit)
        if refusal is not None:
            await self._fail(run, WorkloadRunReason.TOO_MANY_NODES, refusal)
            return None
        body = limits.with_promises(render.workflow, deadline, limit)
        try:
            created = await create_controlled(self.ctx.client, resources.Workflow, body, run)
        except HolderTerminating:
            return Result(requeue_after=1.0)
        except NameTaken:
            await self._fail(
                run,
                WorkloadRunReason.WORKFLOW_NAME_COLLISION,
                f'Workflow "{name}" already exists in namespace "{namespace}" and is not controlled by '
                f'WorkloadRun "{name}"; refusing to adopt it',
            )
            return None
        except ApiError as error:
            message = f"Failed to create Workflow {name}: {error.status.message or error}"
            await self.ctx.recorder.warning(run, EventReason.WORKFLOW_CREATION_ERROR, message)
            if is_invalid(error):
                # Rejected by the API server: retrying the same object cannot succeed.
                await self._fail(run, WorkloadRunReason.WORKFLOW_FAILED, message)
                return None
            raise
        workflow_name = created.obj["metadata"]["name"]

        def record(status: dict[str, Any]) -> None:
            status["workflowRef"] = {"name": workflow_name, "namespace": namespace}
            status["resolvedGpusPerNode"] = render.gpus_per_node

        written = await self._write_state(
            run,
            ConditionType.IN_PROGRESS,
            WorkloadRunReason.WORKFLOW_CREATED,
            f"Workflow {workflow_name} created",
            record,
        )
        if written is not None and not created.adopted:
            for event in render.events:
                await self.ctx.recorder.emit(run, event.type, event.reason, event.message)
        return REQUEUE

    # -- afterwards: mirror -------------------------------------------------------------------

    async def _workflow(self, namespace: str, name: str) -> Obj | None:
        return await cached_or_live(self.workflows, self.ctx.client, resources.Workflow, name, namespace)

    async def _mirror_release(self, run: Obj) -> None:
        """An ended run's ``ResourcesReleased`` is its Workflow's (released when it ended before
        it made one; unproven when its Workflow is gone, which only a live read may say)."""
        if release.proven(run):
            return
        ref = (run.get("status") or {}).get("workflowRef") or {}
        workflows: dict[str, Obj | None] = {}
        if ref.get("name"):
            namespace = ref.get("namespace") or run["metadata"]["namespace"]
            workflows[ref["name"]] = await self._workflow(namespace, ref["name"])
        decided = release.combine(workflows)
        if decided is not None:
            await write_release(self.ctx, resources.WorkloadRun, run, decided)

    async def _mirror(self, run: Obj) -> Result | None:
        ref = run["status"]["workflowRef"]
        namespace = ref.get("namespace") or run["metadata"]["namespace"]
        workflow = await self._workflow(namespace, ref["name"])
        if workflow is None:
            await self._write_state(
                run, ConditionType.FAILED, WorkloadRunReason.WORKFLOW_DELETED, "Workflow was deleted"
            )
            return None
        fields = mirrored_fields(workflow)

        def mirror(status: dict[str, Any]) -> None:
            status.update(fields)

        if condition_true(workflow, ConditionType.VALIDATION_FAILED):
            validation = condition_of(workflow, ConditionType.VALIDATION_FAILED) or {}
            message = str(validation.get("message") or "")

            def failed_validation(status: dict[str, Any]) -> None:
                mirror(status)
                set_validation(
                    status, run, True, WorkloadRunReason.THRESHOLD_VIOLATION, message, at=self.ctx.clock.now()
                )

            await self.ctx.status.update(resources.WorkloadRun, run, failed_validation)
        terminal = outcome(workflow)
        if limits.ended_by_deadline(workflow):
            terminal = (
                ConditionType.FAILED,
                WorkloadRunReason.DEADLINE_EXCEEDED,
                limits.deadline_message(run),
            )
        if terminal is not None:
            await self._announce(run, await self._write_state(run, *terminal, mirror))
            return None
        written = await self._write_state(
            run, ConditionType.IN_PROGRESS, *scheduling.run_in_progress(run, workflow), mirror
        )
        await self._announce(run, written)
        return REQUEUE

    async def _announce(self, run: Obj, written: Obj | None) -> None:
        """A Warning for each image mismatch the write copied that ``run`` (as read) did not have."""
        if written is None:
            return
        recorded = (
            (run.get("status") or {}).get("provenance"),
            (written.get("status") or {}).get("provenance"),
        )
        for message in provenance.recorded_mismatches(*recorded):
            await self.ctx.recorder.warning(written, EventReason.IMAGE_MISMATCH, message)
