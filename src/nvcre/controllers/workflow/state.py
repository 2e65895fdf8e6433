"""One reconcile's view of a Workflow and the status it will write."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import Default, EventReason, EventType
from nvcre.controllers.context import Context
from nvcre.decide import provenance
from nvcre.objects import Obj
from nvcre.runtime.informer import Informer


class JustCreated:
    """The Jobs this manager created a moment ago, until their first watch event: a cache miss
    for one of those is the cache lagging behind our own create (the event brings the Workflow
    back), not a sign that it is gone, so it costs no read. Past ``ttl`` seconds, or after a
    restart (nothing remembered), a miss is read live as before."""

    MAX = 50_000

    def __init__(self, ttl: float = Default.REQUEUE_SECONDS) -> None:
        self.ttl = ttl
        self._at: dict[tuple[str, str], float] = {}

    def add(self, namespace: str, name: str) -> None:
        if len(self._at) >= self.MAX:
            self._at.clear()
        self._at[(namespace, name)] = time.monotonic()

    def lagging(self, namespace: str, name: str) -> bool:
        at = self._at.get((namespace, name))
        if at is not None and time.monotonic() - at > self.ttl:
            del self._at[(namespace, name)]
            return False
        return at is not None

    def seen(self, namespace: str, name: str) -> None:
        self._at.pop((namespace, name), None)


@dataclass
class Caches:
    jobs: Informer
    nodes: Informer
    pods: Informer
    records: Informer
    """NodeRecords: each node's baselines for the regression rule."""
    created: JustCreated = field(default_factory=JustCreated)


@dataclass
class WorkflowState:
    """The live Workflow plus the status changes this reconcile decided.

    Changes are collected here and written at the version the Workflow was read from; a 409
    raises :class:`~nvcre.runtime.writes.Conflict` and the whole decision is made again from the
    fresh object. Events decided on the way wait in ``events`` and are emitted once, after the
    write that records the decision succeeds (a conflict discards them with the decision).
    """

    ctx: Context
    caches: Caches
    workflow: Obj
    orchestration: dict[str, Any] = field(default_factory=dict)
    dependency_refs: list[dict[str, Any]] = field(default_factory=list)
    refs: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    """``status.provenance.images``: what the run's pods really ran."""

    @classmethod
    def of(cls, ctx: Context, caches: Caches, workflow: Obj) -> WorkflowState:
        status = workflow.get("status") or {}
        return cls(
            ctx,
            caches,
            workflow,
            copy.deepcopy(status.get("orchestration") or {}),
            copy.deepcopy(status.get("dependencyRefs") or []),
            images=copy.deepcopy((status.get("provenance") or {}).get("images") or []),
        )

    @property
    def name(self) -> str:
        return str(self.workflow["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.workflow["metadata"]["namespace"])

    @property
    def uid(self) -> str:
        return str(self.workflow["metadata"].get("uid", ""))

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.workflow["spec"]
        return spec

    @property
    def groups(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = self.orchestration.setdefault("groups", [])
        return groups

    @property
    def isolating(self) -> bool:
        """The groups of the status are an isolation round's."""
        return (self.orchestration.get("isolation") or {}).get("stage") == "Running"

    @property
    def iterations(self) -> int:
        return max(int((self.spec.get("orchestration") or {}).get("iterations") or 1), 1)

    def running_message(self) -> str:
        running = sum(1 for g in self.groups if g.get("phase") == "Running")
        current = self.orchestration.get("currentIteration", 1)
        diagnose = self.orchestration.get("diagnose")
        if diagnose:
            return f"Diagnose round {current} ({diagnose.get('stage')}): {running} groups running"
        if self.isolating:
            return f"Iteration {current}/{self.iterations}, isolation: {running} re-test groups running"
        return f"Iteration {current}/{self.iterations}: {running} groups running"

    def timestamp(self) -> str:
        """Now on the controllers' clock, as the Workflow status writes times."""
        return self.ctx.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")

    def observe_images(self, spec: dict[str, Any], jobs: list[Obj]) -> None:
        """Add the images ``jobs`` ran to the provenance, against what ``spec`` (the resolved spec
        their Jobs were rendered from) names; a new mismatch is a Warning."""
        ran = [i for job in jobs for i in (job.get("status") or {}).get("images") or ()]
        before, self.images = self.images, provenance.fold(self.images, provenance.rendered_images(spec), ran)
        for message in provenance.new_mismatches(before, self.images):
            self.emit(EventType.WARNING, EventReason.IMAGE_MISMATCH, message)

    def emit(self, type_: str, reason: str, message: str) -> None:
        """An event about the Workflow, emitted after this reconcile's next successful write."""
        self.events.append((type_, reason, message))

    async def _written(self, written: Obj | None) -> None:
        if written is None:
            return
        self.workflow = written
        events, self.events = self.events, []
        for type_, reason, message in events:
            await self.ctx.recorder.emit(written, type_, reason, message)

    def owner_reference(self, *, controller: bool) -> dict[str, Any]:
        ref = {
            "apiVersion": self.workflow["apiVersion"],
            "kind": self.workflow["kind"],
            "name": self.name,
            "uid": self.uid,
        }
        if controller:
            ref.update(controller=True, blockOwnerDeletion=True)
        return ref

    async def record(
        self,
        cond_type: str,
        reason: str,
        message: str,
        *,
        extra: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Write this reconcile's status with ``cond_type`` True, at the version it was read from."""
        written = await self.ctx.status.set_exclusive(
            resources.Workflow,
            self.workflow,
            cond_type,
            reason,
            message,
            extra=extra or self.apply,
            base=self.workflow,
        )
        await self._written(written)

    async def save(self) -> None:
        """Write this reconcile's status (no condition change), at the version it was read from."""
        written = await self.ctx.status.update(
            resources.Workflow, self.workflow, self.apply, base=self.workflow
        )
        await self._written(written)

    def apply(self, status: dict[str, Any]) -> None:
        """The status extras of this reconcile (used inside every status write)."""
        orchestration = copy.deepcopy(self.orchestration)
        for required in ("totalNodes", "nodesPerJob", "totalGroups"):
            # Required by the schema: a Workflow that fails before partitioning (no nodes, a bad
            # override) still writes them, as zeros, like the reference; else the write is a 422.
            orchestration.setdefault(required, 0)
        status["orchestration"] = orchestration
        if self.dependency_refs:
            status["dependencyRefs"] = copy.deepcopy(self.dependency_refs)
        else:
            status.pop("dependencyRefs", None)
        status["namespace"] = self.namespace
        status["provenance"] = provenance.status(self.spec, self.images)
        status.update(copy.deepcopy(self.refs))
