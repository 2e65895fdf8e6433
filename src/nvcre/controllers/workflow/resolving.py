"""A Workflow's spec with its overrides resolved, computed once per change of what it depends on.

Every pass after partitioning needs the resolved spec (the Job template, the dependencies, the
execution and isolation settings an override may bring); its passes are many (each Job, pod and
status event wakes the Workflow) and what the resolution reads changes rarely. So the controller
keeps the last resolution of each Workflow with a :class:`ResolveKey` of what it read, and
resolves again only when the key differs.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.controllers.workflow.partitioning import resolve
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.objects import ObjectKey
from nvcre.render.workflow import ResolvedWorkflow


@dataclass(frozen=True)
class ResolveKey:
    """Everything a pass's resolution reads, so equal keys resolve to equal specs.

    * ``uid``, ``generation``: the Workflow (its spec and overrides; a new Workflow of the same
      name has another uid). Its metadata and status do not reach the spec: the namespace is the
      object's key, and the platform and architecture are read from the status below.
    * ``platform``, ``architecture``: the detection the partitioning pass stored in
      ``status.orchestration`` (a pass after it resolves with these, not with a new detection).
    * ``nodes``: for each of the groups' nodes the node cache holds (a node gone from the cache
      drops out of the resolution, and so out of the key), its name, its labels and its
      ``spec.providerID``: all that detection reads from a node. The labels matter: the
      architecture vote (``nvidia.com/gpu.product``) decides which nodes count, and the topology
      label of those decides ``domainCount``, which an override's ``when`` may test. A node's
      status (heartbeats, conditions, allocatable) and its resourceVersion are left out on
      purpose: they change every few minutes on a real node and never change the resolution,
      so keying on them would resolve again on nearly every pass of a large fleet.

    Keys are compared, never hashed; ``nodes`` holds copies of the labels, so an informer that
    updated a node's dict in place still shows as a change.
    """

    uid: str
    generation: int | None
    platform: str | None
    architecture: str | None
    nodes: tuple[tuple[str, dict[str, str], str], ...]

    @classmethod
    def of(cls, state: WorkflowState, nodes: Sequence[Mapping[str, Any]]) -> ResolveKey:
        meta = state.workflow["metadata"]
        orchestration = state.orchestration
        return cls(
            uid=str(meta.get("uid", "")),
            generation=meta.get("generation"),
            platform=orchestration.get("detectedPlatform"),
            architecture=orchestration.get("detectedGPUArchitecture"),
            nodes=tuple(
                (
                    str((node.get("metadata") or {}).get("name") or ""),
                    dict((node.get("metadata") or {}).get("labels") or {}),
                    str((node.get("spec") or {}).get("providerID") or ""),
                )
                for node in nodes
            ),
        )


class ResolvedSpecs:
    """The last resolution of each Workflow (by namespace and name) with its key.

    :meth:`get` resolves (``partitioning.resolve`` with the stored detection) only when the key
    changed, and hands each pass its own copy of the Workflow, so a pass that changed what it
    was given could not change the next one's. A resolution that fails is not kept (the
    Workflow fails with it). :meth:`forget` drops a Workflow that ended or went away."""

    MAX = 10_000

    def __init__(self) -> None:
        self._entries: dict[ObjectKey, tuple[ResolveKey, ResolvedWorkflow]] = {}

    def get(self, state: WorkflowState, nodes: list[dict[str, Any]]) -> ResolvedWorkflow:
        name = ObjectKey(state.namespace, state.name)
        key = ResolveKey.of(state, nodes)
        entry = self._entries.get(name)
        if entry is not None and entry[0] == key:
            resolved = entry[1]
        else:
            resolved = resolve(state, nodes, cached=True)
            if len(self._entries) >= self.MAX:
                self._entries.clear()
            self._entries[name] = (key, resolved)
        return dataclasses.replace(resolved, workflow=copy.deepcopy(resolved.workflow))

    def forget(self, name: ObjectKey) -> None:
        self._entries.pop(name, None)

    def __len__(self) -> int:
        return len(self._entries)
