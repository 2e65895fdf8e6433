"""One reconcile's view of a Workflow and the status it will write."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nvcre.controllers import resources
from nvcre.controllers.context import Context
from nvcre.controllers.status import now
from nvcre.runtime.informer import Informer
from nvcre.runtime.objects import Obj


@dataclass
class Caches:
    jobs: Informer
    nodes: Informer
    pods: Informer


@dataclass
class WorkflowState:
    """The live Workflow plus the status changes this reconcile decided.

    Changes are collected here and written once, inside the conflict-retry closure, so a 409
    re-applies exactly the same decision to the fresh object.
    """

    ctx: Context
    caches: Caches
    workflow: Obj
    orchestration: dict[str, Any] = field(default_factory=dict)
    dependency_refs: list[dict[str, Any]] = field(default_factory=list)
    refs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: Context, caches: Caches, workflow: Obj) -> WorkflowState:
        status = workflow.get("status") or {}
        return cls(
            ctx,
            caches,
            workflow,
            copy.deepcopy(status.get("orchestration") or {}),
            copy.deepcopy(status.get("dependencyRefs") or []),
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
        if written is not None:
            self.workflow = written

    async def save(self) -> None:
        """Write this reconcile's status (no condition change), at the version it was read from."""
        written = await self.ctx.status.update(
            resources.Workflow, self.workflow, self.apply, base=self.workflow
        )
        if written is not None:
            self.workflow = written

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
        status.update(copy.deepcopy(self.refs))


def timestamp() -> str:
    return now().strftime("%Y-%m-%dT%H:%M:%SZ")
