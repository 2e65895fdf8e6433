"""nccl-tests for a simulated group: the argv parser and the run model.

Times follow an alpha-beta model: ``time = alpha + factor * size / busbw``, where ``busbw`` is
the group's ceiling: the slowest member's NVLink on one node (or one NVLink domain), else the
slowest member's network and the worst link between two members. A node whose NCCL fell back to
sockets (``tcp-fallback``) brings its group down to socket bandwidth; a node that corrupts data
(``corrupt``) makes the checked results wrong. What the run prints is :mod:`.nccl_log`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from nvcre.sandbox.faults import Fault, factor, fallback_fabric, link_factor, wrong_elements
from nvcre.sandbox.model import NVLINK_LATENCY_US, noise, on_fabric, parse_size
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

_TYPES = {
    "int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8, "bfloat16": 2,
    "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip
_TYPE_NAMES = {"char": "int8", "int": "int32", "float16": "half", "float32": "float", "float64": "double"}


@dataclass(frozen=True)
class Collective:
    """One nccl-tests collective: its busbw factor (PERFORMANCE.md) and table conventions."""

    name: str
    redop: bool  #: prints the reduction op (else ``none``)
    rooted: bool  #: prints the root (else -1)
    per_rank_count: bool  #: ``count`` is per rank (size = count * type * nranks)
    in_place_checked: bool  #: in-place ``#wrong`` is a number (else N/A)

    def factor(self, nranks: int) -> float:
        if nranks <= 1:
            return 0.0 if self.name != "sendrecv" else 1.0
        if self.name == "all_reduce":
            return 2.0 * (nranks - 1) / nranks
        if self.name in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
            return (nranks - 1) / nranks
        return 1.0


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective("all_reduce", True, False, False, True),
        Collective("all_gather", False, False, True, True),
        Collective("reduce_scatter", True, False, True, True),
        Collective("alltoall", False, False, True, False),
        Collective("broadcast", False, True, False, True),
        Collective("reduce", True, True, False, True),
        Collective("sendrecv", True, False, False, False),
        Collective("gather", False, True, True, False),
        Collective("scatter", False, True, True, False),
    )
}


class CommandError(ValueError):
    """An nccl-tests argv the real binary would reject (unknown flag, bad value)."""


@dataclass(frozen=True)
class NcclTest:
    """An nccl-tests invocation as parsed from a pod's command line."""

    binary: str  #: as run, e.g. ``all_reduce_perf_mpi``
    collective: Collective
    nthreads: int = 1
    ngpus: int = 1
    min_bytes: int = 32 << 20
    max_bytes: int = 32 << 20
    step_bytes: int = 1 << 20
    step_factor: int = 1
    iters: int = 20
    agg_iters: int = 1
    warmup: int = 1
    cycles: int = 1
    check: int = 1
    op: str = "sum"
    datatype: str = "float"
    root: int = 0
    graph: int = 0
    procs_per_host: int = 1  #: from mpirun ``-N``/``--npernode`` (1 without mpirun)
    mpirun: bool = False  #: launched by mpirun (which prints its abort banner on failure)
    env: Mapping[str, str] = field(default_factory=dict)  #: ``mpirun -x NAME=VALUE`` settings

    @property
    def debug(self) -> str:
        return self.env.get("NCCL_DEBUG", "").upper()


_FLAGS = {
    "-t": "nthreads", "--nthreads": "nthreads", "-g": "ngpus", "--ngpus": "ngpus",
    "-b": "min_bytes", "--minbytes": "min_bytes", "-e": "max_bytes", "--maxbytes": "max_bytes",
    "-i": "step_bytes", "--stepbytes": "step_bytes", "-f": "step_factor", "--stepfactor": "step_factor",
    "-n": "iters", "--iters": "iters", "-m": "agg_iters", "--agg_iters": "agg_iters",
    "-w": "warmup", "--warmup_iters": "warmup", "-N": "cycles", "--run_cycles": "cycles",
    "-c": "check", "--check": "check", "-o": "op", "--op": "op", "-d": "datatype", "--datatype": "datatype",
    "-r": "root", "--root": "root", "-G": "graph", "--cudagraph": "graph",
}  # fmt: skip
#: Flags nccl-tests accepts that do not change the simulated output.
_IGNORED = {
    "-p", "--parallel_init", "-z", "--blocking", "-y", "--stream_null", "-T", "--timeout",
    "-C", "--report_cputime", "-a", "--average", "-R", "--local_register", "-S", "--report_timestamps",
    "-M", "--memory", "-J", "--output_file", "-u", "--cumask",
}  # fmt: skip
_MPIRUN_PPN = {"-N", "--npernode", "-npernode"}
_MAP_BY = {"--map-by", "-map-by"}
#: Open MPI's default slots per host (Kubeflow Trainer's MPI policy sets it to numProcPerNode):
#: mpirun without ``-N`` starts that many ranks on each host of its hostfile.
DEFAULT_SLOTS_ENV = "OMPI_MCA_orte_set_default_slots"


def _collective_of(word: str) -> tuple[str, Collective] | None:
    base = word.rsplit("/", 1)[-1]
    stem = base.removesuffix("_mpi")
    if stem.endswith("_perf") and stem[: -len("_perf")] in COLLECTIVES:
        return base, COLLECTIVES[stem[: -len("_perf")]]
    return None


def parse_command(command: Sequence[str], env: Mapping[str, str] | None = None) -> NcclTest | None:
    """The nccl-tests run in the argv ``command`` (``None`` if it runs no nccl-tests binary), run
    directly or under a launcher (``timeout``, ``env``, ``mpirun``...). ``env`` is the environment
    it starts in (mpirun's default slots per host come from it)."""
    words = list(command)
    at = next((i for i, w in enumerate(words) if _collective_of(w)), None)
    if at is None:
        return None
    found = _collective_of(words[at])
    assert found is not None
    binary, collective = found
    flags: dict[str, str] = {}
    ppn: int | None = None
    launcher = words[:at]
    for i, w in enumerate(launcher):
        nxt = launcher[i + 1] if i + 1 < len(launcher) else ""
        if w == "-x" and "=" in nxt:
            name, _, value = nxt.partition("=")
            flags[name] = value
        elif w in _MPIRUN_PPN and nxt.isdigit() and any(x.endswith("mpirun") for x in launcher[:i]):
            ppn = int(nxt)
        elif w in _MAP_BY and nxt.startswith("ppr:") and nxt.split(":")[1].isdigit():
            ppn = int(nxt.split(":")[1])
    values: dict[str, int | str] = {}
    args = words[at + 1 :]
    i = 0
    while i < len(args):
        flag = args[i]
        field_name = _FLAGS.get(flag)
        if field_name is None and flag not in _IGNORED:
            raise CommandError(f"{binary}: invalid option -- '{flag.lstrip('-')}'")
        if i + 1 >= len(args):
            raise CommandError(f"{binary}: option requires an argument -- '{flag.lstrip('-')}'")
        value = args[i + 1]
        i += 2
        if field_name is None:
            continue
        if field_name in ("min_bytes", "max_bytes", "step_bytes"):
            try:
                values[field_name] = parse_size(value)
            except ValueError as err:
                raise CommandError(str(err)) from None
        elif field_name in ("op", "datatype"):
            if field_name == "datatype" and value not in _TYPES:
                raise CommandError(f"{binary}: invalid type {value!r}")
            values[field_name] = _TYPE_NAMES.get(value, value)
        else:
            if not value.lstrip("-").isdigit():
                raise CommandError(f"{binary}: invalid value {value!r} for {flag}")
            values[field_name] = int(value)
    mpirun = any(x.endswith("mpirun") for x in launcher)
    slots = (env or {}).get(DEFAULT_SLOTS_ENV, "")
    if ppn is None:
        ppn = int(slots) if mpirun and slots.isdigit() and int(slots) > 0 else 1
    test = NcclTest(binary=binary, collective=collective, procs_per_host=ppn, mpirun=mpirun, env=flags)
    return replace(test, **values)  # type: ignore[arg-type]


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


def group_bandwidth(members: Sequence[Member], faults: Sequence[Fault], at_s: float) -> tuple[float, float]:
    """(busbw ceiling GB/s, latency us) of ``members`` ``at_s`` seconds into the run."""
    nodes = {m.node.name: m.node for m in members}
    nvlink = min(n.nvlink_busbw * factor(faults, name, "nvlink", at_s) for name, n in nodes.items())
    nvlink_domains = {n.nvlink_domain for n in nodes.values()}
    sides = [(n.name, n.domain) for n in nodes.values()]
    links = link_factor(faults, sides, at_s)
    if len(nodes) == 1 or (len(nvlink_domains) == 1 and None not in nvlink_domains):
        return nvlink * links, NVLINK_LATENCY_US * (1.0 + 0.25 * math.log2(len(nodes)))
    network = (
        min(n.network_busbw * factor(faults, name, "network", at_s) for name, n in nodes.items()) * links
    )
    scale = max(0.8, 1.0 - 0.03 * math.log2(len(nodes) / 2.0))
    fabric_latency = max(n.fabric.latency_us for n in nodes.values())  # the slowest fabric's
    latency = fabric_latency * (1.0 + 0.15 * math.log2(len(nodes) / 2.0))
    return min(network * scale, nvlink), latency


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
    typesize = _TYPES[test.datatype]
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
            busbw, latency = group_bandwidth(members, faults, t)
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
    "COLLECTIVES",
    "Collective",
    "CommandError",
    "Member",
    "NcclTest",
    "Run",
    "fallen_back",
    "group_bandwidth",
    "healthy_run",
    "parse_command",
]
