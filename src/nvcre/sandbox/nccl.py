"""nccl-tests output for a simulated group: the argv parser and the log generator.

The layout is nccl-tests 2.17 (``# nccl-tests version`` and ``# Collective test starting``
lines, ``#wrong`` columns 6 wide plus two spaces, a trailing space on the column headers),
field for field as its ``writeDeviceReport``/``writeResultHeader``/``writeBenchmarkLine*``
print them. Times follow an alpha-beta model: ``time = alpha + factor * size / busbw``, where
``busbw`` is the group's ceiling: the slowest member's NVLink on one node (or one NVLink
domain), else the slowest member's network and the worst link between two members.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from nvcre.sandbox.faults import Fault, factor, link_factor
from nvcre.sandbox.model import NVLINK_LATENCY_US, NodeModel, noise, unit

NCCL_TESTS_VERSION = "2.17.8"
NCCL_VERSION = "2.29.2+cuda13.1"
NCCL_CODE = 22902
#: Exit code of an nccl-tests rank after an NCCL error (``testNcclError``), as mpirun passes it on.
NCCL_ERROR_EXIT = 3

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
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


def parse_size(text: str) -> int:
    """``8``, ``16G``, ``512M``, ``1K`` as bytes (binary units, as nccl-tests reads them)."""
    unit_ = _UNITS.get(text[-1:].upper()) if text else None
    digits = text[:-1] if unit_ else text
    if not digits.isdigit():
        raise CommandError(f"invalid size {text!r}")
    return int(digits) * (unit_ or 1)


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
            values[field_name] = parse_size(value)
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
class Member:
    """One host of the group: the name it prints (the pod's hostname) and its node's model."""

    host: str
    node: NodeModel


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    time_us: tuple[float, float]  #: out-of-place, in-place
    algbw: tuple[float, float]
    busbw: tuple[float, float]
    at_s: float  #: when the row is printed, seconds since the start


@dataclass(frozen=True)
class Run:
    """A healthy run's lines before and after its table and its rows (with their times)."""

    head: list[tuple[float, str]]
    rows: list[Row]
    foot: list[str]
    end_s: float | None  #: ``None``: it cycles until killed (``-N 0``)
    first_collective_s: float


def _format(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: 2 decimals if they fit, then 1, then 0, then exponent."""
    for spec in (".2f", ".1f", ".0f"):
        text = f"{value:{width}{spec}}"
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def _g(value: float) -> str:
    """C's ``%g``."""
    return f"{value:g}"


def _sizes(test: NcclTest) -> list[int]:
    sizes, size = [], test.min_bytes
    while size <= test.max_bytes:
        sizes.append(size)
        following = size * test.step_factor if test.step_factor > 1 else size + test.step_bytes
        if following <= size:  # -b 0 with a factor, or a zero step: one row
            break
        size = following
    return sizes


def _ip(seed: int, host: str) -> str:
    n = int(unit(seed, "ip", host) * 2**16)
    return f"10.1.{n >> 8}.{n & 255 or 1}"


def _pid(seed: int, host: str, proc: int) -> int:
    return 100 + int(unit(seed, "pid", host) * 9000) + proc


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
    latency = next(iter(nodes.values())).fabric.latency_us * (1.0 + 0.15 * math.log2(len(nodes) / 2.0))
    return min(network * scale, nvlink), latency


def healthy_run(
    test: NcclTest, members: Sequence[Member], faults: Sequence[Fault], seed: int, horizon_s: float = 3600.0
) -> Run:
    """The run's lines and rows as if no event struck (bandwidth faults apply).

    ``-N 0`` (cycle until killed) prints cycles up to ``horizon_s`` and no footer.
    """
    nranks = len(members) * test.procs_per_host * test.nthreads * test.ngpus
    per_proc = test.nthreads * test.ngpus
    first = members[0]
    t = 0.6
    head: list[tuple[float, str]] = []

    def say(text: str, dt: float = 0.0) -> None:
        nonlocal t
        t += dt
        head.append((t, text))

    step = f"{test.step_factor}(factor)" if test.step_factor > 1 else f"{test.step_bytes}(bytes)"
    say(f"# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={NCCL_CODE} nccl-library={NCCL_CODE}")
    say(f"# Collective test starting: {test.binary}")
    say(
        f"# nThread {test.nthreads} nGpus {test.ngpus} minBytes {test.min_bytes} maxBytes {test.max_bytes} "
        f"step: {step} warmup iters: {test.warmup} iters: {test.iters} agg iters: {test.agg_iters} "
        f"validation: {test.check} graph: {test.graph}"
    )
    say("#")
    say("# Using devices")
    rank = 0
    for m in members:
        for proc in range(test.procs_per_host):
            pid = _pid(seed, m.host, proc)
            for i in range(per_proc):
                dev = proc * per_proc + i
                pci = m.node.gpu.pci_bus_ids[dev % len(m.node.gpu.pci_bus_ids)]
                say(
                    f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {m.host:>10s} device {dev:2d} [0000:{pci}:00] {m.node.gpu.device_name}"
                )
                rank += 1
    infos = _init_info(test, members, nranks, seed) if test.debug == "INFO" else []
    for line in infos:
        say(line, 0.002)
    max_bytes = test.max_bytes
    limit = (min(m.node.gpu.memory_bytes for m in members) - (1 << 30)) // (3 if test.check else 2)
    if max_bytes > limit:
        say("#")
        say(f"# Reducing maxBytes to {limit} due to memory limitation")
        max_bytes = limit
    say("#", 0.2)
    say(
        f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place                       in-place          "
    )
    say(
        f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s} "
    )
    say(
        f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s} "
    )
    if test.debug == "INFO":
        for line in _connect_info(members, test, seed):
            say(line, 0.001)
    first_collective = t
    t += 0.5
    typesize = _TYPES[test.datatype]
    busbw_factor = test.collective.factor(nranks)
    rows: list[Row] = []
    sizes = [s for s in _sizes(test) if s <= max_bytes]
    cycle = 0
    while sizes and (cycle < test.cycles or (test.cycles == 0 and t < horizon_s)):
        for size in sizes:
            count = size // typesize // (nranks if test.collective.per_rank_count else 1)
            nbytes = count * typesize * (nranks if test.collective.per_rank_count else 1)
            busbw, latency = group_bandwidth(members, faults, t)
            times: list[float] = []
            alg: list[float] = []
            bus: list[float] = []
            for place in ("out", "in"):
                if nranks == 1 or busbw_factor == 0.0:
                    base = 6.0 + nbytes / 1.2e6
                else:
                    base = latency + busbw_factor * nbytes / (busbw * 1e3)
                time_us = base * noise(0.03, seed, first.host, test.binary, size, cycle, place)
                algbw = nbytes / time_us / 1e3
                times.append(time_us)
                alg.append(algbw)
                bus.append(algbw * busbw_factor)
            t += (test.warmup + test.iters * test.agg_iters) * sum(times) * 1e-6 + 0.004
            rows.append(Row(nbytes, count, (times[0], times[1]), (alg[0], alg[1]), (bus[0], bus[1]), t))
        cycle += 1
    if test.cycles == 0:
        return Run(head, rows, [], None, first_collective)
    avg = sum(sum(r.busbw) for r in rows) / (2 * len(rows)) if rows else 0.0
    foot = [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {_g(avg)} ",
        "#",
        f"# Collective test concluded: {test.binary}",
        "#",
        "",
    ]
    return Run(head, rows, foot, t + 0.1, first_collective)


def format_row(test: NcclTest, row: Row) -> str:
    """One table row, as ``writeBenchmarkLinePreamble`` + two ``writeBenchmarkLineBody``."""
    c = test.collective
    redop = test.op if c.redop else "none"
    root = test.root if c.rooted else -1
    line = f"{row.size:12d}  {row.count:12d}  {test.datatype:>8s}  {redop:>6s}  {root:6d}"
    for i, checked in enumerate((test.check != 0, test.check != 0 and c.in_place_checked)):
        body = f"  {_format(row.time_us[i], 7)}  {_format(row.algbw[i], 6)}  {_format(row.busbw[i], 6)}"
        line += body + (f"  {0:6d}" if checked else "    N/A")
    return line


def _prefix(host: str, seed: int, proc: int, dev: int) -> str:
    """``host:pid:tid [cudaDev]``, how NCCL starts its debug lines."""
    pid = _pid(seed, host, proc)
    return f"{host}:{pid}:{pid} [{dev}]"


def _init_info(test: NcclTest, members: Sequence[Member], nranks: int, seed: int) -> list[str]:
    """``NCCL_DEBUG=INFO`` start-up lines: version, bootstrap, network transport, init."""
    lines = []
    nodes = len({m.node.name for m in members})
    local = test.procs_per_host * test.nthreads * test.ngpus
    rank = 0
    for m in members:
        for dev in range(local):
            p = _prefix(m.host, seed, dev // (test.nthreads * test.ngpus), dev)
            if rank == 0:
                lines.append(f"{p} NCCL INFO NCCL version {NCCL_VERSION}")
            lines.append(f"{p} NCCL INFO Bootstrap: Using eth0:{_ip(seed, m.host)}<0>")
            fabric = m.node.fabric
            if fabric.name == "efa":
                lines.append(f"{p} NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.0")
                lines.append(f"{p} NCCL INFO NET/OFI Selected Provider is efa (found {m.node.gpus * 4} nics)")
            elif fabric.name in ("ib", "roce"):
                kind = "IB" if fabric.name == "ib" else "RoCE"
                nics = " ".join(f"[{i}]mlx5_{i}:1/{kind}" for i in range(m.node.gpus))
                lines.append(f"{p} NCCL INFO NET/IB : Using {nics} [RO]; OOB eth0:{_ip(seed, m.host)}<0>")
            elif fabric.name == "socket":
                lines.append(f"{p} NCCL INFO NET/Socket : Using [0]eth0:{_ip(seed, m.host)}<0>")
            lines.append(f"{p} NCCL INFO Using network {fabric.network}")
            lines.append(
                f"{p} NCCL INFO comm 0x{int(unit(seed, 'comm', m.host, dev) * 2**44):x} rank {rank} nRanks {nranks} "
                f"nNodes {nodes} localRanks {local} localRank {dev} MNNVL {int(m.node.nvlink_domain is not None and nodes > 1)}"
            )
            lines.append(
                f"{p} NCCL INFO ncclCommInitRankConfig comm rank {rank} nranks {nranks} cudaDev {dev} - Init COMPLETE"
            )
            rank += 1
    return lines


def _connect_info(members: Sequence[Member], test: NcclTest, seed: int) -> list[str]:
    p = _prefix(members[0].host, seed, 0, 0)
    nodes = len({m.node.name for m in members})
    via = members[0].node.fabric.transport if nodes > 1 else "P2P/CUMEM"
    return [
        f"{p} NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via {via}",
        f"{p} NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via {via}",
        f"{p} NCCL INFO Connected all rings, use ring PXN 0 GDR {int(nodes > 1)}",
    ]


def error_lines(test: NcclTest, members: Sequence[Member], failing: str, seed: int) -> list[str]:
    """What the launcher prints when ``failing`` (a host of ``members``) hits a network error."""
    host = next(m for m in members if m.host == failing)
    peer = next((m for m in members if m.host != failing), host)
    pid = _pid(seed, failing, 0)
    p = _prefix(failing, seed, 0, 0)
    if host.node.fabric.name == "efa":
        warn = (
            f"NET/OFI Request 0x7f3a{int(unit(seed, 'req', failing) * 2**24):06x} completed with error. "
            f"RC: 21. Error: 12 (Connection reset by peer). Completed length: 0, Peer: {_ip(seed, peer.host)}"
        )
        where = "net.cc:1349"
    else:
        warn = (
            f"NET/IB : Got completion from peer {_ip(seed, peer.host)}<{40000 + int(unit(seed, 'port', peer.host) * 9999)}> "
            f"with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{_ip(seed, failing)} hca mlx5_0"
        )
        where = "transport/net_ib.cc:1696"
    lines = []
    if test.debug in ("INFO", "WARN"):
        lines += ["", f"{p} {where} NCCL WARN {warn}", f"{p} NCCL INFO transport/net.cc:1249 -> 6"]
    lines += [
        f"{failing}: Test NCCL failure common.cu:1204 'remote process exited or there was a network error / {warn}'",
        f" .. {failing} pid {pid}: Test failure common.cu:915",
    ]
    return lines


def mpirun_abort(members: Sequence[Member], failing: str, test: NcclTest, seed: int) -> list[str]:
    """The banner Open MPI's mpirun prints on stderr when a rank exits non-zero."""
    return [
        "--------------------------------------------------------------------------",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "--------------------------------------------------------------------------",
        "--------------------------------------------------------------------------",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        f"  Process name: [[{int(unit(seed, 'job') * 60000) + 1000},1],{_rank_of(members, failing, test)}]",
        f"  Exit code:    {NCCL_ERROR_EXIT}",
        "--------------------------------------------------------------------------",
    ]


def _rank_of(members: Sequence[Member], host: str, test: NcclTest) -> int:
    index = next(i for i, m in enumerate(members) if m.host == host)
    return index * test.procs_per_host


__all__ = [
    "COLLECTIVES",
    "NCCL_ERROR_EXIT",
    "NCCL_TESTS_VERSION",
    "Collective",
    "CommandError",
    "Member",
    "NcclTest",
    "Row",
    "Run",
    "error_lines",
    "format_row",
    "group_bandwidth",
    "healthy_run",
    "mpirun_abort",
    "parse_command",
    "parse_size",
]
