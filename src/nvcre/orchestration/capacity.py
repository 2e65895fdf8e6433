"""GPU capacity filtering and the messages that explain excluded nodes and shortfalls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.orchestration.discovery import name_of

GPU = NodeLabel.GPU_RESOURCE


def _quantity_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def requested_counts(*documents: Any) -> dict[str, int]:
    """The largest whole-number request of each resource under any ``requests``/``limits`` map in
    the documents (fractional quantities such as ``500m`` or ``2Gi`` are left out)."""
    best: dict[str, int] = {}

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in ("requests", "limits") and isinstance(value, Mapping):
                    for resource, quantity in value.items():
                        count = _quantity_int(quantity)
                        if count is not None:
                            best[str(resource)] = max(best.get(str(resource), 0), count)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for document in documents:
        walk(document)
    return best


def requested_gpus(*documents: Any) -> int:
    """The largest ``nvidia.com/gpu`` under any ``requests``/``limits`` map in the documents."""
    return requested_counts(*documents).get(GPU, 0)


def allocatable_gpus(node: Mapping[str, Any]) -> int | None:
    return _quantity_int((node.get("status", {}).get("allocatable") or {}).get(GPU))


@dataclass(frozen=True)
class CapacityFilter:
    kept: list[dict[str, Any]]
    excluded: list[tuple[str, int]]
    """(node, allocatable) of nodes with fewer GPUs than requested."""


def filter_capacity(nodes: Iterable[Mapping[str, Any]], request: int) -> CapacityFilter:
    """Drop nodes that report 0 < allocatable < request; a node reporting 0 or nothing stays
    (its device plugin may be restarting)."""
    kept: list[dict[str, Any]] = []
    excluded: list[tuple[str, int]] = []
    for node in nodes:
        count = allocatable_gpus(node)
        if request > 0 and count is not None and 0 < count < request:
            excluded.append((name_of(node), count))
        else:
            kept.append(dict(node))
    return CapacityFilter(kept, excluded)


def capacity_detail(excluded: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{name} has {count}" for name, count in excluded)


@dataclass(frozen=True)
class Exclusions:
    cordoned: list[str]
    architecture: list[str]
    primary_architecture: str
    capacity: list[tuple[str, int]]
    request: int

    @property
    def nodes(self) -> list[str]:
        return self.cordoned + self.architecture + [name for name, _ in self.capacity]

    @property
    def reason(self) -> str:
        clauses = []
        if self.cordoned:
            clauses.append(
                f"{len(self.cordoned)} node(s) matched the target but were unschedulable (cordoned): "
                + ", ".join(self.cordoned)
            )
        if self.architecture:
            clauses.append(
                f"target set has more than one GPU architecture; certified {self.primary_architecture} only"
            )
        if self.capacity:
            clauses.append(
                f"{len(self.capacity)} node(s) matched the target but have insufficient GPU capacity, "
                f"the workload requests {self.request} nvidia.com/gpu per node: {capacity_detail(self.capacity)}"
            )
        return ". ".join(clauses)

    def not_enough_nodes(self, need: int, found: int) -> str:
        message = f"Not enough schedulable nodes: need {need}, found {found}"
        causes, remedies = [], []
        if self.architecture:
            causes.append(
                f"{len(self.architecture)} node(s) matched the target but were excluded for not being "
                f"GPU architecture {self.primary_architecture}: {', '.join(self.architecture)}"
            )
            remedies.append("narrow the target to one architecture")
        if self.capacity:
            causes.append(
                f"{len(self.capacity)} node(s) matched the target but were excluded for having fewer than "
                f"the {self.request} allocatable nvidia.com/gpu the workload requests per node: "
                f"{capacity_detail(self.capacity)}"
            )
            remedies.append("lower gpusPerNode")
        if causes:
            message += (
                ". " + ". ".join(causes) + f". Set nodesPerJob to {found}, or " + ", or ".join(remedies)
            )
        return message


def no_capacity_message(request: int, excluded: Iterable[tuple[str, int]]) -> str:
    best = max((count for _, count in excluded), default=0)
    return (
        f"No node can supply the {request} nvidia.com/gpu the workload requests per node; "
        f"best available is {best}"
    )
