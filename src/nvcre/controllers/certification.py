"""The Certification controller: one Workflow per category, strictly one at a time (spec §2).

Each reconcile reads the Certification live and takes one step:

* deleting: delete the Workflows it controls, wait until they are gone, release the finalizer;
* terminal: only the stale-failure check (a category marked Failed whose Workflow still runs)
  and ``ResourcesReleased``, combined from its Workflows';
* otherwise: start the first Pending category (``nvcre.catalog.render_category`` renders its
  Workflow from the node cache; no matching node yet means ``WaitingForNodes`` for up to five
  minutes), follow the InProgress one, or, when every category is done, decide the outcome.

What each step decides is :mod:`nvcre.decide.certification`'s and, for the run's limits,
:mod:`nvcre.decide.limits`': a category whose target resolves to more nodes than the run may take
fails it ``TooManyNodes`` before its Workflow exists; past ``spec.deadline`` no category starts
and the run ends ``DeadlineExceeded`` (each Workflow carries the deadline and stops itself). This
shell reads, creates the Workflow and writes the status. Workflows of finished categories stay
until the Certification is deleted, for the report.
"""

from __future__ import annotations

import copy
from typing import Any

from lightkube import ApiError
from lightkube.resources.core_v1 import ConfigMap
from pydantic import ValidationError

from nvcre import resources
from nvcre.api.v1alpha1.certification import Certification
from nvcre.api.v1alpha1.constants import (
    GROUP,
    CertificationReason,
    ConditionStatus,
    ConditionType,
    Default,
    EventReason,
    Finalizer,
    Kind,
    Label,
)
from nvcre.catalog import BuildError, CategoryNotFound, NoNodesMatch, render_category
from nvcre.catalog.options import name_clash
from nvcre.conditions import condition_of, is_terminal, set_in_status
from nvcre.controllers import indexes
from nvcre.controllers.children import (
    HolderTerminating,
    NameTaken,
    cached_or_live,
    controlled_by,
    create_controlled,
    delete_if_present,
    get_live,
)
from nvcre.controllers.context import IMMEDIATE, REQUEUE, Context
from nvcre.controllers.finalizers import ensure_finalizer, remove_finalizer
from nvcre.controllers.releases import write_release
from nvcre.controllers.resourceslices import gpu_inventory
from nvcre.controllers.status import conditions_of
from nvcre.controllers.tcpxo import installer_pods
from nvcre.decide import certification as sequencing
from nvcre.decide import limits, provenance, release
from nvcre.objects import Obj, ObjectKey
from nvcre.orchestration.discovery import discover
from nvcre.orchestration.result_configmaps import failed_entries
from nvcre.runtime.controller import Controller, Result, owned_by, wake_by
from nvcre.runtime.errors import is_invalid

DELETE_POLL = Result(requeue_after=2.0)


class CertificationController:
    def __init__(
        self,
        ctx: Context,
        *,
        workers: int = Default.MAX_CONCURRENT_RECONCILES,
        node_discovery_timeout: float = Default.NODE_DISCOVERY_TIMEOUT_SECONDS,
        max_nodes_per_run: int = Default.MAX_NODES_PER_RUN,
    ) -> None:
        self.ctx = ctx
        self.node_discovery_timeout = node_discovery_timeout
        self.max_nodes_per_run = max_nodes_per_run
        manager = ctx.manager
        self.certifications = manager.informer(resources.Certification)
        self.workflows = manager.informer(resources.Workflow)
        self.nodes = indexes.nodes(manager)
        self.controller = Controller("certification", self.reconcile, workers=workers)
        self.controller.watch(self.certifications)
        self.controller.watch(self.workflows, owned_by(Kind.CERTIFICATION, GROUP))
        self.controller.watch(self.nodes, self._node_to_waiting)
        manager.add(self.controller)

    def _node_to_waiting(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        """A node that appears or changes may end a wait for nodes: look again at once."""
        if old is not None and (old["metadata"].get("labels"), old.get("spec")) == (
            new["metadata"].get("labels"),
            new.get("spec"),
        ):
            return []
        keys = []
        for cert in self.certifications.items():
            in_progress = condition_of(cert, ConditionType.IN_PROGRESS) or {}
            if in_progress.get("reason") == CertificationReason.WAITING_FOR_NODES:
                keys.append(ObjectKey(cert["metadata"]["namespace"], cert["metadata"]["name"]))
        return keys

    async def reconcile(self, key: ObjectKey) -> Result | None:
        cert = await get_live(self.ctx.client, resources.Certification, key.name, key.namespace)
        if cert is None:
            return None
        if cert["metadata"].get("deletionTimestamp"):
            return await self._delete(cert)
        if await ensure_finalizer(self.ctx.client, resources.Certification, cert, Finalizer.CERTIFICATION):
            return None
        if is_terminal(conditions_of(cert)):
            recovered = await self._recover_stale_failure(cert)
            if recovered is None:
                await self._mirror_release(cert)
            return recovered
        statuses = copy.deepcopy((cert.get("status") or {}).get("categoryStatuses") or [])
        if not statuses:
            unknown = sequencing.unknown_category(cert)
            if unknown is not None:
                await self._write_state(
                    cert,
                    ConditionType.FAILED,
                    CertificationReason.CATEGORY_NOT_FOUND,
                    f"Unknown certification category: {unknown}",
                )
                return None
            clash = self._name_clash(cert)
            if clash is not None:
                await self._write_state(
                    cert, ConditionType.FAILED, CertificationReason.WORKFLOW_NAME_COLLISION, clash
                )
                return None
            statuses = sequencing.initial_statuses(cert)
        return await self._process(cert, statuses)

    @staticmethod
    def _name_clash(cert: Obj) -> str | None:
        """Why the Certification cannot run when two of its categories would run as one Workflow
        (refused before the first one runs, not when the second finds its name taken)."""
        spec = Certification.model_validate(cert).spec
        clash = name_clash(cert["metadata"]["name"], spec.categories)
        return None if clash is None else clash.message(spec.categories)

    # -- writes -------------------------------------------------------------------------------

    async def _write_state(
        self,
        cert: Obj,
        cond_type: str,
        reason: str,
        message: str,
        statuses: list[dict[str, Any]] | None = None,
        *,
        validation: str | None = None,
    ) -> Obj | None:
        """Make ``cond_type`` the Certification's one True state with ``statuses`` as its category
        statuses; ``validation``: also set ``ValidationFailed=True`` with this message (same write)."""
        fixed = copy.deepcopy(statuses)
        generation = cert["metadata"].get("generation")
        failed_nodes = None if fixed is None else await self._failed_nodes(cert, fixed)

        def extra(status: dict[str, Any]) -> None:
            if fixed is not None:
                status["categoryStatuses"] = copy.deepcopy(fixed)
                status.update(sequencing.summary(fixed, failed_nodes))
            if validation is not None:
                set_in_status(
                    status,
                    ConditionType.VALIDATION_FAILED,
                    ConditionStatus.TRUE,
                    CertificationReason.WORKFLOW_VALIDATION_FAILED,
                    validation,
                    generation,
                    self.ctx.clock.now(),
                )

        # At the version the decision was made from: if the Certification changed meanwhile the
        # write raises Conflict and the reconcile decides again from the fresh object.
        return await self.ctx.status.set_exclusive(
            resources.Certification, cert, cond_type, reason, message, extra=extra, base=cert
        )

    async def _failed_nodes(self, cert: Obj, statuses: list[dict[str, Any]]) -> set[str] | None:
        """The failed nodes of every category, each once, when two or more categories failed
        nodes (read from their failed-nodes ConfigMaps); None when the categories' counts add up
        to it already, or a ConfigMap is gone."""
        names: set[str] = set()
        refs = sequencing.failed_nodes_refs(statuses)
        for ref in refs:
            namespace = ref.get("namespace") or cert["metadata"]["namespace"]
            config_map = await get_live(self.ctx.client, ConfigMap, ref["name"], namespace)
            if config_map is None:
                return None
            names.update(str(entry["name"]) for entry in failed_entries(config_map))
        return names if refs else None

    # -- the state machine --------------------------------------------------------------------

    async def _process(self, cert: Obj, statuses: list[dict[str, Any]]) -> Result | None:
        index = sequencing.current(statuses)
        if index is None:
            validation = (
                await self._validation_failure(cert, statuses) if sequencing.any_failed(statuses) else None
            )
            outcome = sequencing.outcome(statuses, validation)
            if await self._stopped_by_deadline(cert, statuses):
                outcome = self._deadline_exceeded(cert)
            await self._write_state(cert, *outcome, statuses, validation=validation)
            return None
        if sequencing.following(statuses[index]):
            return await self._follow(cert, statuses, index)  # its Workflow keeps the deadline
        if limits.passed(limits.deadline_of(cert), self.ctx.clock.now()):
            await self._write_state(cert, *self._deadline_exceeded(cert), statuses)
            return None
        return await self._start(cert, statuses, index)

    @staticmethod
    def _deadline_exceeded(cert: Obj) -> sequencing.Transition:
        return sequencing.Transition(
            ConditionType.FAILED, CertificationReason.DEADLINE_EXCEEDED, limits.deadline_message(cert)
        )

    async def _stopped_by_deadline(self, cert: Obj, statuses: list[dict[str, Any]]) -> bool:
        """A failed category's Workflow was stopped by the deadline."""
        for _, namespace, name in sequencing.failed_workflows(cert, statuses):
            if limits.ended_by_deadline(await self._workflow(namespace, name)):
                return True
        return False

    async def _start(self, cert: Obj, statuses: list[dict[str, Any]], index: int) -> Result | None:
        entry = statuses[index]
        key = f"{entry['domain']}/{entry['variant']}"
        try:
            model = Certification.model_validate(cert)
            target = model.spec.target.to_dict() if model.spec.target else None
            dra = await gpu_inventory(self.ctx.client)
            found = discover(self.nodes.items(), target, dra)
            render = render_category(
                model,
                index,
                found.nodes,
                gpu_products=dra.products,
                tcpxo_installers=await installer_pods(self.ctx.client, found.nodes),
            )
        except CategoryNotFound:
            await self._write_state(
                cert,
                ConditionType.FAILED,
                CertificationReason.CATEGORY_NOT_FOUND,
                f"Unknown certification category: {key}",
                statuses,
            )
            return None
        except (BuildError, ValidationError, ValueError) as error:
            remaining = self.node_discovery_timeout - sequencing.age(cert, self.ctx.clock.now())
            if isinstance(error, NoNodesMatch) and remaining > 0:
                await self._write_state(
                    cert,
                    ConditionType.IN_PROGRESS,
                    CertificationReason.WAITING_FOR_NODES,
                    sequencing.waiting_message(cert["spec"].get("target"), remaining),
                    statuses,
                )
                return wake_by(
                    Result(requeue_after=min(Default.REQUEUE_SECONDS, remaining + 0.5)),
                    limits.seconds_left(limits.deadline_of(cert), self.ctx.clock.now()),
                )
            await self._write_state(
                cert,
                ConditionType.FAILED,
                CertificationReason.WORKFLOW_VALIDATION_FAILED,
                str(error),
                statuses,
            )
            return None
        limit = limits.node_limit(cert["spec"], self.max_nodes_per_run)
        refusal = limits.too_many_nodes(len(found.nodes), limit)
        if refusal is not None:
            await self._write_state(
                cert, ConditionType.FAILED, CertificationReason.TOO_MANY_NODES, refusal, statuses
            )
            return None
        name = render.name
        namespace = cert["metadata"]["namespace"]
        body = limits.with_promises(render.workflow, limits.deadline_of(cert), limit)
        try:
            created = await create_controlled(self.ctx.client, resources.Workflow, body, cert)
        except HolderTerminating:
            return Result(requeue_after=1.0)
        except NameTaken:
            await self._write_state(
                cert,
                ConditionType.FAILED,
                CertificationReason.WORKFLOW_NAME_COLLISION,
                f'Workflow "{name}" already exists in namespace "{namespace}" and is not controlled by '
                f'Certification "{cert["metadata"]["name"]}"; refusing to adopt it',
                statuses,
            )
            return None
        except ApiError as error:
            if not is_invalid(error):
                raise  # transient: retried with backoff, the Certification stays as it is
            message = f"Failed to create Workflow {name}: {error.status.message or error}"
            await self.ctx.recorder.warning(cert, EventReason.WORKFLOW_CREATION_ERROR, message)
            await self._write_state(
                cert, ConditionType.FAILED, CertificationReason.WORKFLOW_FAILED, message, statuses
            )
            return None
        statuses[index], transition = sequencing.started(
            statuses, index, created.obj["metadata"]["name"], namespace
        )
        written = await self._write_state(cert, *transition, statuses)
        if written is not None and not created.adopted:
            for event in render.events:
                await self.ctx.recorder.emit(cert, event.type, event.reason, event.message)
        return REQUEUE

    async def _validation_failure(self, cert: Obj, statuses: list[dict[str, Any]]) -> str | None:
        """The ``ValidationFailed`` message of the first failed category's Workflow that has one."""
        for entry, namespace, name in sequencing.failed_workflows(cert, statuses):
            validation = sequencing.validation_message(entry, await self._workflow(namespace, name))
            if validation is not None:
                return validation
        return None

    async def _workflow(self, namespace: str, name: str) -> Obj | None:
        return await cached_or_live(self.workflows, self.ctx.client, resources.Workflow, name, namespace)

    async def _follow(self, cert: Obj, statuses: list[dict[str, Any]], index: int) -> Result | None:
        ref = statuses[index]["workflowRef"]
        workflow = await self._workflow(ref.get("namespace") or cert["metadata"]["namespace"], ref["name"])
        followed = sequencing.follow(statuses[index], workflow)
        if followed.transition is None:
            return REQUEUE
        before, statuses[index] = statuses[index], followed.entry
        written = await self._write_state(cert, *followed.transition, statuses)
        if written is not None:
            for message in provenance.recorded_mismatches(
                before.get("provenance"), followed.entry.get("provenance")
            ):
                key = sequencing.category(followed.entry)
                await self.ctx.recorder.warning(
                    written, EventReason.IMAGE_MISMATCH, f"Category {key}: {message}"
                )
        return IMMEDIATE if followed.ended else REQUEUE

    # -- terminal: stale failures -------------------------------------------------------------

    async def _recover_stale_failure(self, cert: Obj) -> Result | None:
        statuses = sequencing.recovered(cert, self.workflows.get)
        if statuses is None:
            return None
        await self._write_state(
            cert,
            ConditionType.IN_PROGRESS,
            CertificationReason.WORKFLOW_RUNNING,
            "Recovered: Workflow still running",
            statuses,
        )
        return REQUEUE

    # -- terminal: resources released ---------------------------------------------------------

    async def _mirror_release(self, cert: Obj) -> None:
        """An ended Certification's ``ResourcesReleased`` combines its Workflows' (a Workflow the
        cache lacks is read live: only the API server may say it is gone)."""
        if release.proven(cert):
            return
        namespace = cert["metadata"]["namespace"]
        refs = [
            entry.get("workflowRef") or {}
            for entry in (cert.get("status") or {}).get("categoryStatuses") or ()
        ]
        decided = release.combine(
            {
                ref["name"]: await self._workflow(ref.get("namespace") or namespace, ref["name"])
                for ref in refs
                if ref.get("name")
            }
        )
        if decided is not None:
            await write_release(self.ctx, resources.Certification, cert, decided)

    # -- deletion -----------------------------------------------------------------------------

    def _owned_workflows(self, cert: Obj) -> set[tuple[str, str]]:
        namespace = cert["metadata"]["namespace"]
        names = {
            (namespace, w["metadata"]["name"])
            for w in self.workflows.items(namespace)
            if (w["metadata"].get("labels") or {}).get(Label.CERTIFICATION) == cert["metadata"]["name"]
            and controlled_by(w, cert)
        }
        for entry in (cert.get("status") or {}).get("categoryStatuses") or ():
            ref = entry.get("workflowRef") or {}
            if ref.get("name"):
                names.add((ref.get("namespace") or namespace, ref["name"]))
        return names

    async def _delete(self, cert: Obj) -> Result | None:
        if Finalizer.CERTIFICATION not in (cert["metadata"].get("finalizers") or ()):
            return None
        remaining = 0
        for namespace, name in sorted(self._owned_workflows(cert)):
            workflow = await get_live(self.ctx.client, resources.Workflow, name, namespace)
            if workflow is None or not controlled_by(workflow, cert):
                continue  # gone, or someone else's: never touched
            remaining += 1
            if workflow["metadata"].get("deletionTimestamp"):
                continue
            await delete_if_present(
                self.ctx.client, resources.Workflow, name, namespace, uid=workflow["metadata"]["uid"]
            )
        if remaining:
            return DELETE_POLL
        await remove_finalizer(self.ctx.client, resources.Certification, cert, Finalizer.CERTIFICATION)
        return None
