"""Partitioning nodes into groups (simple with overflow, topology packing, strict domains)."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


class PartitionError(ValueError):
    pass


@dataclass(frozen=True)
class Group:
    name: str
    nodes: tuple[str, ...]
    domains: tuple[str, ...] = ()
    overflow: bool = False
    domain_node_counts: Mapping[str, int] = field(default_factory=dict)


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
    domain_of: dict[str, str] = {}
    for name in names:
        value = labels[name].get(topology_key, "")
        if not value:
            raise PartitionError(f'node "{name}" missing topology label "{topology_key}"')
        domain_of[name] = value
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
    domains: dict[str, list[str]] = {}
    for name in names:
        domains.setdefault(domain_of[name], []).append(name)
    return domains


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
    unassigned = {d: deque(domains[d]) for d in by_size}
    # The open domains, fullest first (ties by name), as a heap: each group takes the first
    # ``max_domains`` of that order without sorting every domain again (100,000 nodes).
    fullest = [(-len(unassigned[d]), d) for d in by_size]
    heapq.heapify(fullest)
    remaining = len(names)
    groups: list[Group] = []
    while remaining >= npj:
        top = [heapq.heappop(fullest)[1] for _ in range(min(max_domains, len(fullest)))]
        if sum(len(unassigned[d]) for d in top) < npj:
            break
        taken: list[str] = []
        for domain in top:
            while unassigned[domain] and len(taken) < npj:
                taken.append(unassigned[domain].popleft())
            if unassigned[domain]:
                heapq.heappush(fullest, (-len(unassigned[domain]), domain))
        remaining -= len(taken)
        groups.append(_group(f"group-{len(groups)}", taken, domain_of))
    untested = [n for d in by_size for n in unassigned[d]]
    if not untested:
        return groups
    if not groups:
        return [_group("group-0", untested, domain_of)]
    assigned = {n for g in groups for n in g.nodes}
    pools = {
        d: (deque(n for n in domains[d] if n not in assigned), deque(n for n in domains[d] if n in assigned))
        for d in domains
    }

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
