"""nccl-tests on a simulated group: the run model.

Times follow an alpha-beta model: ``time = alpha + factor * size / busbw``, where ``busbw`` is
the group's ceiling: the slowest member's NVLink on one node (or one NVLink domain), else the
slowest member's network and the worst link between two members. A node whose NCCL fell back to
sockets (``tcp-fallback``) brings its group down to socket bandwidth; a node that corrupts data
(``corrupt``) makes the checked results wrong. What the run prints is :mod:`.nccl_log`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nvcre.sandbox.faults import Fault, factor, fallback_fabric, link_factor, wrong_elements
from nvcre.sandbox.model import NVLINK_LATENCY_US, NodeModel, expected_busbw, fell_back, noise, on_fabric
from nvcre.sandbox.nccl_args import TYPES, NcclTest
from nvcre.sandbox.nccl_log import (
    LAYOUTS,
    Layout,
    Line,
    Member,
    Ranks,
    RowCells,
    connect_info,
    destroy_info,
    init_info,
    pid,
)


@dataclass(frozen=True)
class Run:
    """A healthy run: its lines before and after the table, its rows (with their times), and how
    many checked results were wrong (nccl-tests' ``Out of bounds values``)."""

    ranks: Ranks
    head: list[tuple[float, Line]]
    rows: list[tuple[float, RowCells]]
    foot: list[Line]
    end_s: float | None  #: ``None``: it cycles until killed (``-N 0``)
    first_collective_s: float
    errors: int = 0


def _sizes(test: NcclTest) -> list[int]:
    sizes, size = [], test.min_bytes
    while size <= test.max_bytes:
        sizes.append(size)
        following = size * test.step_factor if test.step_factor > 1 else size + test.step_bytes
        if following <= size:  # -b 0 with a factor, or a zero step: one row
            break
        size = following
    return sizes


def group_bandwidth(
    members: Sequence[Member], faults: Sequence[Fault], at_s: float, collective: str = "all_reduce"
) -> tuple[float, float]:
    """(busbw ceiling GB/s, latency us) of ``members`` in ``collective`` ``at_s`` seconds into the
    run: the expected-performance table's figure for a healthy group of their shape (else the
    nodes' own figures), times the worst fault on the NVLink or network it crosses."""
    nodes = {m.node.name: m.node for m in members}
    healthy = expected_busbw(list(nodes.values()), collective)
    nvlink_factor = min(factor(faults, name, "nvlink", at_s) for name in nodes)
    nvlink_domains = {n.nvlink_domain for n in nodes.values()}
    sides = [(n.name, n.domain) for n in nodes.values()]
    links = link_factor(faults, sides, at_s)
    if len(nodes) == 1 or (len(nvlink_domains) == 1 and None not in nvlink_domains):
        own = min(n.nvlink_busbw if len(nodes) == 1 else n.mnnvl_busbw for n in nodes.values())
        latency = NVLINK_LATENCY_US * (1.0 + 0.25 * math.log2(len(nodes)))
        return (healthy or own) * nvlink_factor * links, latency
    nvlink = min(max(n.nvlink_busbw, n.mnnvl_busbw) for n in nodes.values())
    network_factor = min(factor(faults, name, "network", at_s) for name in nodes)
    if healthy is not None and not any(fell_back(n) for n in nodes.values()):
        # a published figure may pass one node's NVLink (NCCL's tree over two nodes): a slow
        # NVLink still caps it
        ceiling = min(healthy * network_factor * links, max(healthy, nvlink) * nvlink_factor)
        return ceiling, _network_latency(nodes)
    nvlink *= nvlink_factor
    network = (
        min(n.network_busbw * factor(faults, name, "network", at_s) for name, n in nodes.items()) * links
    )
    scale = max(0.8, 1.0 - 0.03 * math.log2(len(nodes) / 2.0))
    return min(network * scale, nvlink), _network_latency(nodes)


def _network_latency(nodes: Mapping[str, NodeModel]) -> float:
    """Small-message time of a group over the network: the slowest fabric's, 15% more a doubling."""
    fabric_latency = max(n.fabric.latency_us for n in nodes.values())
    return fabric_latency * (1.0 + 0.15 * math.log2(len(nodes) / 2.0))


def fallen_back(members: Sequence[Member], faults: Sequence[Fault]) -> list[Member]:
    """``members`` with each node whose NCCL fell back to another fabric (``tcp-fallback``) on it."""
    out = []
    for m in members:
        fabric = fallback_fabric(faults, m.node.name, 0.0)
        out.append(m if fabric is None else Member(m.host, on_fabric(m.node, fabric)))
    return out


def _corrupted(test: NcclTest, ranks: Ranks, bad: set[str], per_rank: int, count: int) -> tuple[int, int]:
    """(wrong elements nccl-tests reports, processes that count the result wrong) when the GPUs of
    the hosts ``bad`` corrupt ``per_rank`` elements of a result of ``count`` elements.

    A reduction or gather to every rank carries the bad data to all of them; a rooted reduce or
    gather to the root only; broadcast, scatter and sendrecv to the bad hosts' own ranks."""
    name = test.collective.name
    local = test.procs_per_host * test.nthreads * test.ngpus
    if name in ("all_reduce", "all_gather", "reduce_scatter", "alltoall"):
        ranks_hit, procs_hit = ranks.nranks, len(ranks.hosts) * test.procs_per_host
    elif name in ("reduce", "gather"):
        ranks_hit, procs_hit = 1, 1
    else:
        ranks_hit, procs_hit = local * len(bad), test.procs_per_host * len(bad)
    return min(per_rank, max(count, 1)) * ranks_hit, procs_hit


def healthy_run(
    test: NcclTest,
    members: Sequence[Member],
    faults: Sequence[Fault],
    seed: int,
    horizon_s: float = 3600.0,
    *,
    layout: str = "current",
) -> Run:
    """The run's lines and rows as if no event struck (bandwidth, fallback and data faults apply).

    ``-N 0`` (cycle until killed) prints cycles up to ``horizon_s`` and no footer. ``layout`` is
    a name of :data:`~nvcre.sandbox.nccl_log.LAYOUTS`.
    """
    style: Layout = LAYOUTS[layout]
    legacy = layout != "current"
    members = fallen_back(members, faults)
    ranks = Ranks(members, test.procs_per_host, test.nthreads * test.ngpus)
    nranks = ranks.nranks
    first = members[0]
    info = test.debug == "INFO"
    t = 0.6
    head: list[tuple[float, Line]] = []

    def say(line: Line, dt: float = 0.0) -> None:
        nonlocal t
        t += dt
        head.append((t, line))

    for text in style.preamble(test):
        say((text, 0))
    for rank, _, m, dev in ranks.each():
        pci = m.node.gpu.pci_bus_ids[dev % len(m.node.gpu.pci_bus_ids)]
        p = pid(seed, m.host, dev // ranks.gpus_per_proc)
        say((style.device(rank, p, m.host, dev, pci, m.node.gpu.device_name), 0))
    nodes = {m.node.name: m.node for m in members}
    if info:
        mnnvl = len(nodes) > 1 and all(n.nvlink_domain is not None for n in nodes.values())
        for line in init_info(ranks, seed, legacy=legacy, mnnvl=mnnvl):
            say(line, 0.002)
    max_bytes = test.max_bytes
    limit = (min(m.node.gpu.memory_bytes for m in members) - (1 << 30)) // (3 if test.check else 2)
    if max_bytes > limit:
        if not legacy:
            say(("#", 0))
            say((f"# Reducing maxBytes to {limit} due to memory limitation", 0))
        max_bytes = limit
    for k, text in enumerate(style.table_header(test)):
        say((text, 0), 0.2 if k == 0 else 0.0)
    if info:
        worst = min(nodes.values(), key=lambda n: n.network_busbw).fabric
        for line in connect_info(ranks, seed, worst.transport if len(nodes) > 1 else "P2P/CUMEM"):
            say(line, 0.001)
    first_collective = t
    t += 0.5
    typesize = TYPES[test.datatype]
    busbw_factor = test.collective.factor(nranks)
    checked = (test.check != 0, test.check != 0 and test.collective.in_place_checked)
    rows: list[tuple[float, RowCells]] = []
    errors = 0
    sizes = [s for s in _sizes(test) if s <= max_bytes]
    cycle = 0
    while sizes and (cycle < test.cycles or (test.cycles == 0 and t < horizon_s)):
        for size in sizes:
            count = size // typesize // (nranks if test.collective.per_rank_count else 1)
            nbytes = count * typesize * (nranks if test.collective.per_rank_count else 1)
            busbw, latency = group_bandwidth(members, faults, t, test.collective.name)
            bad = {m.host: n for m in members if (n := wrong_elements(faults, m.node.name, t))}
            times: list[float] = []
            alg: list[float] = []
            bus: list[float] = []
            wrong: list[int] = []
            for k, place in enumerate(("out", "in")):
                if nranks == 1 or busbw_factor == 0.0:
                    base = 6.0 + nbytes / 1.2e6
                else:
                    base = latency + busbw_factor * nbytes / (busbw * 1e3)
                time_us = base * noise(0.03, seed, first.host, test.binary, size, cycle, place)
                algbw = nbytes / time_us / 1e3
                times.append(time_us)
                alg.append(algbw)
                bus.append(algbw * busbw_factor)
                elements, processes = (0, 0)
                if bad and checked[k]:
                    elements, processes = _corrupted(test, ranks, set(bad), max(bad.values()), count)
                wrong.append(elements)
                errors += processes
            t += (test.warmup + test.iters * test.agg_iters) * sum(times) * 1e-6 + 0.004
            cells = RowCells(
                nbytes, count, (times[0], times[1]), (alg[0], alg[1]), (bus[0], bus[1]), (wrong[0], wrong[1])
            )
            rows.append((t, cells))
        cycle += 1
    if test.cycles == 0:
        return Run(ranks, head, rows, [], None, first_collective, errors)
    avg = sum(sum(r.busbw) for _, r in rows) / (2 * len(rows)) if rows else 0.0
    foot = destroy_info(ranks, seed) if info else []
    foot += [(text, 0) for text in style.footer(test, errors, avg)]
    return Run(ranks, head, rows, foot, t + 0.1, first_collective, errors)


__all__ = [
    "Member",
    "Run",
    "fallen_back",
    "group_bandwidth",
    "healthy_run",
]
