"""Partitioning nodes into groups (simple with overflow, topology packing, strict domains), and
the groups of a Workflow's run as its status records them."""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from nvcre.orchestration.capacity import Exclusions
from nvcre.orchestration.discovery import labels_of, name_of
from nvcre.workload import trainjob


class PartitionError(ValueError):
    """The nodes cannot be grouped: the Workflow fails with ``PartitionError`` and this message."""


class Group(NamedTuple):
    """One group of nodes. A tuple rather than a frozen dataclass: 100,000 nodes make ~12,500
    groups, and a tuple is built several times faster."""

    name: str
    nodes: tuple[str, ...]
    domains: tuple[str, ...] = ()
    overflow: bool = False
    domain_node_counts: Mapping[str, int] = MappingProxyType({})


def partition(
    nodes: Mapping[str, Mapping[str, str]] | Sequence[str],
    nodes_per_job: int,
    topology_key: str | None = None,
    strict_domain: bool = False,
) -> list[Group]:
    """Groups of ``nodes_per_job`` nodes; ``nodes`` maps name -> labels (labels needed with a key)."""
    if nodes_per_job < 1:
        raise PartitionError(f"nodesPerJob must be >= 1, got {nodes_per_job}")
    labels: Mapping[str, Mapping[str, str]] = nodes if isinstance(nodes, Mapping) else {n: {} for n in nodes}
    names = sorted(labels)
    if not names:
        raise PartitionError("no nodes provided")
    if not topology_key:
        return _simple(names, nodes_per_job)
    domain_of = {name: labels[name].get(topology_key, "") for name in names}
    if not all(domain_of.values()):
        missing = next(name for name, value in domain_of.items() if not value)
        raise PartitionError(f'node "{missing}" missing topology label "{topology_key}"')
    return _topology(names, domain_of, nodes_per_job, strict_domain)


def _simple(names: list[str], npj: int) -> list[Group]:
    full, rest = divmod(len(names), npj)
    if full == 0:
        return [Group("group-0", tuple(names))]
    groups = [Group(f"group-{i}", tuple(names[i * npj : (i + 1) * npj])) for i in range(full)]
    if rest:
        leftovers = names[full * npj :]
        reused = list(groups[-1].nodes[rest:]) if npj - rest else []
        groups.append(Group(f"group-{full}-overflow", tuple(sorted(reused + leftovers)), overflow=True))
    return groups


def _domains(names: list[str], domain_of: Mapping[str, str]) -> dict[str, list[str]]:
    domains: defaultdict[str, list[str]] = defaultdict(list)
    for name in names:
        domains[domain_of[name]].append(name)
    return dict(domains)


def _counts(nodes: list[str], domain_of: Mapping[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in nodes:
        counts[domain_of[node]] = counts.get(domain_of[node], 0) + 1
    return counts if len(counts) > 1 else {}


def _group(name: str, nodes: list[str], domain_of: Mapping[str, str], overflow: bool = False) -> Group:
    ordered = sorted(nodes)
    return Group(
        name,
        tuple(ordered),
        tuple(sorted({domain_of[n] for n in ordered})),
        overflow,
        _counts(ordered, domain_of),
    )


def _topology(names: list[str], domain_of: Mapping[str, str], npj: int, strict: bool) -> list[Group]:
    domains = _domains(names, domain_of)
    by_size = sorted(domains, key=lambda d: (-len(domains[d]), d))
    if strict:
        return [Group(f"group-{i}", tuple(domains[d]), (d,)) for i, d in enumerate(by_size)]
    max_domains = math.ceil(npj / len(domains[by_size[0]]))
    # Each domain's nodes are taken from the front: ``start[d]`` is the first one not yet taken.
    start = dict.fromkeys(by_size, 0)
    # The open domains, fullest first (ties by name), as a heap: each group takes the first
    # ``max_domains`` of that order without sorting every domain again (100,000 nodes).
    fullest = [(-len(domains[d]), d) for d in by_size]
    heapq.heapify(fullest)
    remaining = len(names)
    groups: list[Group] = []
    while remaining >= npj:
        top = [heapq.heappop(fullest)[1] for _ in range(min(max_domains, len(fullest)))]
        if sum(len(domains[d]) - start[d] for d in top) < npj:
            break
        taken: list[str] = []
        counts: dict[str, int] = {}
        for domain in top:
            first = start[domain]
            count = min(len(domains[domain]) - first, npj - len(taken))
            if count:
                taken.extend(domains[domain][first : first + count])
                counts[domain] = count
                start[domain] = first + count
            if start[domain] < len(domains[domain]):
                heapq.heappush(fullest, (start[domain] - len(domains[domain]), domain))
        remaining -= len(taken)
        name = f"group-{len(groups)}"
        if len(counts) == 1:  # one domain's nodes, in order already
            groups.append(Group(name, tuple(taken), tuple(counts)))
            continue
        # The counts in the order of the group's sorted nodes, as ``_counts`` gives them.
        spread = dict(sorted(counts.items(), key=lambda item: domains[item[0]][start[item[0]] - item[1]]))
        groups.append(Group(name, tuple(sorted(taken)), tuple(sorted(counts)), False, spread))
    untested = [n for d in by_size for n in domains[d][start[d] :]]
    if not untested:
        return groups
    if not groups:
        return [_group("group-0", untested, domain_of)]
    # A domain's taken nodes are its first ``start[d]``: the rest are untested, those reusable.
    pools = {d: (deque(domains[d][start[d] :]), deque(domains[d][: start[d]])) for d in domains}

    def key(domain: str) -> tuple[int, int, str]:
        """Most untested nodes first, then most nodes, then by name."""
        fresh, reusable = pools[domain]
        return -len(fresh), -(len(fresh) + len(reusable)), domain

    order = [key(d) for d in pools]
    heapq.heapify(order)
    untested_left = sum(len(fresh) for fresh, _ in pools.values())
    while untested_left:
        taken = []
        visited = []
        while order and len(taken) < npj:
            domain = heapq.heappop(order)[2]
            visited.append(domain)
            fresh, reusable = pools[domain]
            while len(taken) < npj and (fresh or reusable):
                if fresh:
                    untested_left -= 1
                taken.append(fresh.popleft() if fresh else reusable.popleft())
        for domain in visited:
            if any(pools[domain]):
                heapq.heappush(order, key(domain))
        groups.append(_group(f"group-{len(groups)}-overflow", taken, domain_of, overflow=True))
    return groups


def group_size(job_spec: Mapping[str, Any], available: int, exclusions: Exclusions) -> int:
    """The nodes each Job runs on, as its workload asks (all ``available`` ones when it asks for
    none)."""
    try:
        npj = trainjob.nodes_required(trainjob.trainjob_spec(job_spec))
    except trainjob.AdapterError as error:
        prefix = (
            "Failed to detect nodesPerJob"
            if "NumNodes" in str(error)
            else "Failed to determine workload adapter"
        )
        raise PartitionError(f"{prefix}: {error}") from error
    if npj < 1:
        npj = available
    if npj > available:
        raise PartitionError(exclusions.not_enough_nodes(npj, available))
    return npj


def run_groups(
    nodes: Sequence[Mapping[str, Any]], npj: int, placement: str, topology: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The run's groups as ``status.orchestration.groups`` records them: one node-less group when
    ``Unpinned`` (the scheduler places its Job), else the partition of ``nodes``."""
    if placement == "Unpinned":
        return [{"name": "group-0", "nodes": [], "phase": "Pending"}]
    try:
        parts = partition(
            {name_of(n): labels_of(n) for n in nodes},
            npj,
            topology.get("topologyKey"),
            bool(topology.get("strictDomain")),
        )
    except PartitionError as error:
        raise PartitionError(f"Failed to partition nodes: {error}") from error
    groups = []
    for part in parts:
        group: dict[str, Any] = {"name": part.name, "nodes": list(part.nodes), "phase": "Pending"}
        if part.domains and topology.get("topologyKey"):
            group["domains"] = list(part.domains)
        if part.overflow:
            group["overflow"] = True
        if part.domain_node_counts:
            group["domainNodeCounts"] = dict(part.domain_node_counts)
        groups.append(group)
    return groups
