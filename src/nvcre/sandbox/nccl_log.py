"""What nccl-tests, NCCL and mpirun print for a simulated group, line by line.

Two nccl-tests layouts, each as its source prints it:

- ``current``: nccl-tests 2.17.8 (``src/util.cu``: ``# nccl-tests version`` and ``# Collective
  test starting`` lines, one table for every collective with ``redop`` and ``root`` columns,
  ``#wrong`` as ``%6g``, ``# Collective test concluded``), with NCCL 2.29.2;
- ``nccl-2.4``: nccl-tests as resynced with NCCL 2.4 (2019, commit cbe7f65): no version lines,
  ``#   Rank .. Pid .. [0x04]`` device lines, each collective's own columns (``redop`` and ``root``
  only where it has them), a float ``error`` column (``%5.0le``, the largest difference from the
  expected values), fixed-decimal times, and no ``Collective test concluded`` line. alltoall is
  as added in 2020 and sendrecv, gather and scatter as added in 2021 (a type column 8 wide).

Every line carries its origin: the MPI process rank that printed it (0 for the table, which the
first process prints), or ``None`` for what the launcher (mpirun) prints itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from nvcre.sandbox.model import NodeModel, unit
from nvcre.sandbox.nccl_args import NcclTest

NCCL_TESTS_VERSION = "2.17.8"
NCCL_VERSION = "2.29.2+cuda13.1"
NCCL_CODE = 22902
LEGACY_NCCL_VERSION = "2.4.8+cuda10.1"
CUDA_DRIVER_VERSION = 13010
#: Exit code of an nccl-tests rank after an NCCL error (``testNcclError``), as mpirun passes it on.
NCCL_ERROR_EXIT = 3
#: Exit code of nccl-tests 2.17 when a result was wrong (``testNumResults``); 2.4 exits 1.
WRONG_RESULTS_EXIT = 7

Line = tuple[str, int | None]  #: text, the process rank that printed it (None: mpirun)


@dataclass(frozen=True)
class Member:
    """One host of the group: the name it prints (the pod's hostname) and its node's model."""

    host: str
    node: NodeModel


def ip(seed: int, host: str) -> str:
    n = int(unit(seed, "ip", host) * 2**16)
    return f"10.1.{n >> 8}.{n & 255 or 1}"


def pid(seed: int, host: str, proc: int) -> int:
    return 100 + int(unit(seed, "pid", host) * 9000) + proc


def _format(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: 2 decimals if they fit, then 1, then 0, then exponent."""
    for spec in (".2f", ".1f", ".0f"):
        text = f"{value:{width}{spec}}"
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def _legacy_time(value: float) -> str:
    """nccl-tests 2.4's time column: no decimals above 10 ms, one above 100 us, else two."""
    return f"{value:7.0f}" if value > 10000.0 else f"{value:7.1f}" if value > 100.0 else f"{value:7.2f}"


@dataclass(frozen=True)
class Columns:
    """A collective's table columns as a layout prints them."""

    type_width: int
    redop: bool
    root: bool
    title_blanks: int  #: how many blank columns the ``out-of-place`` title line starts with


class Layout(Protocol):
    name: str

    def preamble(self, test: NcclTest) -> list[str]: ...
    def device(self, rank: int, pid_: int, host: str, dev: int, pci: str, gpu: str) -> str: ...
    def table_header(self, test: NcclTest) -> list[str]: ...
    def row(self, test: NcclTest, cells: RowCells) -> str: ...
    def footer(self, test: NcclTest, errors: int, avg_busbw: float) -> list[str]: ...


@dataclass(frozen=True)
class RowCells:
    """One table row's numbers: per place (out-of-place, in-place) time, algbw, busbw, and the
    wrong elements (nccl-tests 2.17) or the largest difference (2.4) where the result is checked."""

    size: int
    count: int
    time_us: tuple[float, float]
    algbw: tuple[float, float]
    busbw: tuple[float, float]
    wrong: tuple[int, int]


def _summary(errors: int, avg_busbw: float) -> list[str]:
    """``writeResultFooter``'s summary, the same in every layout (no ``NCCL_TESTS_MIN_BW`` check)."""
    return [
        f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}",
        f"# Avg bus bandwidth    : {avg_busbw:g} ",
        "#",
    ]


def _step(test: NcclTest) -> str:
    return f"{test.step_factor}(factor)" if test.step_factor > 1 else f"{test.step_bytes}(bytes)"


def _checked(test: NcclTest) -> tuple[bool, bool]:
    return test.check != 0, test.check != 0 and test.collective.in_place_checked


class Current:
    """nccl-tests 2.17.8."""

    name = "current"

    def preamble(self, test: NcclTest) -> list[str]:
        return [
            f"# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={NCCL_CODE} nccl-library={NCCL_CODE}",
            f"# Collective test starting: {test.binary}",
            f"# nThread {test.nthreads} nGpus {test.ngpus} minBytes {test.min_bytes} maxBytes {test.max_bytes} "
            f"step: {_step(test)} warmup iters: {test.warmup} iters: {test.iters} agg iters: {test.agg_iters} "
            f"validation: {test.check} graph: {test.graph}",
            "#",
            "# Using devices",
        ]

    def device(self, rank: int, pid_: int, host: str, dev: int, pci: str, gpu: str) -> str:
        return (
            f"#  Rank {rank:2d} Group  0 Pid {pid_:6d} on {host:>10s} device {dev:2d} [0000:{pci}:00] {gpu}"
        )

    def table_header(self, test: NcclTest) -> list[str]:
        blank = ""
        return [
            "#",
            f"# {blank:>10s}  {blank:>12s}  {blank:>8s}  {blank:>6s}  {blank:>6s}           out-of-place                       in-place          ",
            f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s} ",
            f"# {'(B)':>10s}  {'(elements)':>12s}  {blank:>8s}  {blank:>6s}  {blank:>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {blank:>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {blank:>6s} ",
        ]

    def row(self, test: NcclTest, cells: RowCells) -> str:
        """``writeBenchmarkLinePreamble`` + two ``writeBenchmarkLineBody``."""
        redop = test.op if test.collective.redop else "none"
        root = test.root if test.collective.rooted else -1
        line = f"{cells.size:12d}  {cells.count:12d}  {test.datatype:>8s}  {redop:>6s}  {root:6d}"
        for i, checked in enumerate(_checked(test)):
            line += f"  {_format(cells.time_us[i], 7)}  {_format(cells.algbw[i], 6)}  {_format(cells.busbw[i], 6)}"
            line += f"  {float(cells.wrong[i]):6g}" if checked else "    N/A"
        return line

    def footer(self, test: NcclTest, errors: int, avg_busbw: float) -> list[str]:
        return [*_summary(errors, avg_busbw), f"# Collective test concluded: {test.binary}", "#", ""]


#: nccl-tests 2.4's columns per collective (``print_header`` of each test's source).
_LEGACY_COLUMNS: dict[str, Columns] = {
    "all_reduce": Columns(6, redop=True, root=False, title_blanks=4),
    "all_gather": Columns(6, redop=False, root=False, title_blanks=3),
    "broadcast": Columns(6, redop=False, root=True, title_blanks=4),
    "reduce": Columns(6, redop=True, root=True, title_blanks=4),
    "reduce_scatter": Columns(6, redop=True, root=False, title_blanks=4),
    "alltoall": Columns(6, redop=True, root=False, title_blanks=4),
    "sendrecv": Columns(8, redop=False, root=False, title_blanks=3),
    "gather": Columns(8, redop=False, root=True, title_blanks=4),
    "scatter": Columns(8, redop=False, root=True, title_blanks=4),
}


class Legacy:
    """nccl-tests resynced with NCCL 2.4 (its ``error`` column era)."""

    name = "nccl-2.4"

    def preamble(self, test: NcclTest) -> list[str]:
        return [
            f"# nThread {test.nthreads} nGpus {test.ngpus} minBytes {test.min_bytes} maxBytes {test.max_bytes} "
            f"step: {_step(test)} warmup iters: {test.warmup} iters: {test.iters} validation: {test.check} ",
            "#",
            "# Using devices",
        ]

    def device(self, rank: int, pid_: int, host: str, dev: int, pci: str, gpu: str) -> str:
        return f"#   Rank {rank:2d} Pid {pid_:6d} on {host:>10s} device {dev:2d} [0x{pci}] {gpu}"

    def table_header(self, test: NcclTest) -> list[str]:
        c = _LEGACY_COLUMNS[test.collective.name]
        extra = [*(["redop"] if c.redop else []), *(["root"] if c.root else [])]

        def line(first: Sequence[str], rest: Sequence[str]) -> str:
            cells = [f"{first[0]:>10s}", f"{first[1]:>12s}", f"{first[2]:>{c.type_width}s}"]
            cells += [f"{x:>6s}" for x in first[3:]]
            widths = (7, 6, 6, 5, 7, 6, 6, 5)
            return "# " + "  ".join(cells + [f"{x:>{w}s}" for x, w in zip(rest, widths, strict=True)])

        title_cells = [
            f"{'':>10s}",
            f"{'':>12s}",
            f"{'':>{c.type_width}s}",
            *[f"{'':>6s}"] * (c.title_blanks - 3),
        ]
        return [
            "#",
            "# "
            + "  ".join(title_cells)
            + "            out-of-place                       in-place          ",
            line(["size", "count", "type", *extra], ["time", "algbw", "busbw", "error"] * 2),
            line(["(B)", "(elements)", "", *[""] * len(extra)], ["(us)", "(GB/s)", "(GB/s)", ""] * 2),
        ]

    def row(self, test: NcclTest, cells: RowCells) -> str:
        c = _LEGACY_COLUMNS[test.collective.name]
        line = f"{cells.size:12d}  {cells.count:12d}  {test.datatype:>{c.type_width}s}"
        if c.redop:
            line += f"  {test.op if test.collective.name != 'alltoall' else '':>6s}"
        if c.root:
            line += f"  {test.root:6d}"
        for i, checked in enumerate(_checked(test)):
            line += f"  {_legacy_time(cells.time_us[i])}  {cells.algbw[i]:6.2f}  {cells.busbw[i]:6.2f}"
            line += f"  {1.0 if cells.wrong[i] else 0.0:5.0e}" if checked else "    N/A"
        return line

    def footer(self, test: NcclTest, errors: int, avg_busbw: float) -> list[str]:
        return _summary(errors, avg_busbw)


LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (Current(), Legacy())}


# --- NCCL's debug lines ----------------------------------------------------------------------


def _prefix(host: str, seed: int, proc: int, dev: int) -> str:
    """``host:pid:tid [cudaDev]``, how NCCL starts its debug lines."""
    p = pid(seed, host, proc)
    return f"{host}:{p}:{p} [{dev}]"


def _comm(seed: int, host: str, dev: int) -> str:
    return f"0x{0x555555000000 + int(unit(seed, 'comm', host, dev) * 2**24) * 16:x}"


def _bus_id(pci: str) -> str:
    """NCCL's ``busId`` of PCI bus ``pci`` (device 0): the id's hex digits, leading zeros gone."""
    return f"{int(pci, 16):x}000" if int(pci, 16) else "0"


@dataclass(frozen=True)
class Ranks:
    """How the group's ranks sit on its hosts: processes per host, GPUs per process."""

    hosts: Sequence[Member]
    procs_per_host: int
    gpus_per_proc: int

    @property
    def nranks(self) -> int:
        return len(self.hosts) * self.procs_per_host * self.gpus_per_proc

    def each(self) -> list[tuple[int, int, Member, int]]:
        """(rank, process rank, host, device) for every rank in order."""
        out = []
        per_host = self.procs_per_host * self.gpus_per_proc
        for h, host in enumerate(self.hosts):
            for dev in range(per_host):
                proc = h * self.procs_per_host + dev // self.gpus_per_proc
                out.append((h * per_host + dev, proc, host, dev))
        return out


def _local_proc(ranks: Ranks, dev: int) -> int:
    return dev // ranks.gpus_per_proc


def init_info(ranks: Ranks, seed: int, *, legacy: bool, mnnvl: bool) -> list[Line]:
    """``NCCL_DEBUG=INFO`` start-up lines of every rank: bootstrap, version (once a process), the
    network NCCL picked (a node that fell back to sockets says so), init start and end."""
    lines: list[Line] = []
    nodes = len({h.node.name for h in ranks.hosts})
    local = ranks.procs_per_host * ranks.gpus_per_proc
    comm_id = f"0x{int(unit(seed, 'commId') * 2**63):x}"
    for rank, proc, h, dev in ranks.each():
        p = _prefix(h.host, seed, _local_proc(ranks, dev), dev)
        pci = h.node.gpu.pci_bus_ids[dev % len(h.node.gpu.pci_bus_ids)]
        if dev % ranks.gpus_per_proc == 0:
            lines.append((f"{p} NCCL INFO Bootstrap: Using eth0:{ip(seed, h.host)}<0>", proc))
            if not legacy:
                lines.append((f"{p} NCCL INFO cudaDriverVersion {CUDA_DRIVER_VERSION}", proc))
            lines.append(
                (f"{p} NCCL INFO NCCL version {LEGACY_NCCL_VERSION if legacy else NCCL_VERSION}", proc)
            )
        fabric = h.node.fabric
        if fabric.name == "efa":
            lines.append((f"{p} NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.0", proc))
            lines.append(
                (f"{p} NCCL INFO NET/OFI Selected Provider is efa (found {h.node.gpus * 4} nics)", proc)
            )
        elif fabric.name in ("ib", "roce"):
            kind = "IB" if fabric.name == "ib" else "RoCE"
            nics = " ".join(f"[{i}]mlx5_{i}:1/{kind}" for i in range(h.node.gpus))
            lines.append((f"{p} NCCL INFO NET/IB : Using {nics} [RO]; OOB eth0:{ip(seed, h.host)}<0>", proc))
        elif fabric.name == "socket":
            lines.append((f"{p} NCCL INFO NET/IB : No device found.", proc))
            lines.append((f"{p} NCCL INFO NET/Socket : Using [0]eth0:{ip(seed, h.host)}<0>", proc))
        lines.append((f"{p} NCCL INFO Using network {fabric.network}", proc))
        comm = _comm(seed, h.host, dev)
        if legacy:  # NCCL 2.4: one line when the communicator is ready
            done = (
                f"comm {comm} rank {rank} nranks {ranks.nranks} cudaDev {dev} nvmlDev {dev} - Init COMPLETE"
            )
            lines.append((f"{p} NCCL INFO {done}", proc))
            continue
        ident = (
            f"ncclCommInitRankConfig comm {comm} rank {rank} nranks {ranks.nranks} cudaDev {dev} nvmlDev {dev} "
            f"busId {_bus_id(pci)} commId {comm_id}"
        )
        lines.append((f"{p} NCCL INFO [Rank {rank}] {ident} - Init START", proc))
        lines.append(
            (
                f"{p} NCCL INFO comm {comm} rank {rank} nRanks {ranks.nranks} nNodes {nodes} localRanks {local} "
                f"localRank {dev} MNNVL {int(mnnvl)}",
                proc,
            )
        )
        lines.append((f"{p} NCCL INFO {ident} - Init COMPLETE", proc))
    return lines


def connect_info(ranks: Ranks, seed: int, transport: str) -> list[Line]:
    """Rank 0's ring connections, printed once the first collective starts."""
    p = _prefix(ranks.hosts[0].host, seed, 0, 0)
    nodes = len({h.node.name for h in ranks.hosts})
    return [
        (f"{p} NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via {transport}", 0),
        (f"{p} NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via {transport}", 0),
        (
            f"{p} NCCL INFO Connected all rings, use ring PXN 0 GDR {int(nodes > 1 and 'Socket' not in transport)}",
            0,
        ),
    ]


def destroy_info(ranks: Ranks, seed: int) -> list[Line]:
    """Each rank's ``Destroy COMPLETE`` as the test frees its communicators, before the footer."""
    lines: list[Line] = []
    for rank, proc, h, dev in ranks.each():
        pci = h.node.gpu.pci_bus_ids[dev % len(h.node.gpu.pci_bus_ids)]
        p = _prefix(h.host, seed, _local_proc(ranks, dev), dev)
        lines.append(
            (
                f"{p} NCCL INFO comm {_comm(seed, h.host, dev)} rank {rank} nranks {ranks.nranks} cudaDev {dev} "
                f"busId {_bus_id(pci)} - Destroy COMPLETE",
                proc,
            )
        )
    return lines


# --- failures ----------------------------------------------------------------------------------


def error_lines(ranks: Ranks, failing: str, seed: int, *, debug: bool) -> list[Line]:
    """What the failing host's first process prints when it hits a network error."""
    index = next(i for i, h in enumerate(ranks.hosts) if h.host == failing)
    host = ranks.hosts[index]
    peer = next((h for h in ranks.hosts if h.host != failing), host)
    proc = index * ranks.procs_per_host
    p = _prefix(failing, seed, 0, 0)
    if host.node.fabric.name == "efa":
        warn = (
            f"NET/OFI Request 0x7f3a{int(unit(seed, 'req', failing) * 2**24):06x} completed with error. "
            f"RC: 21. Error: 12 (Connection reset by peer). Completed length: 0, Peer: {ip(seed, peer.host)}"
        )
        where = "net.cc:1349"
    else:
        warn = (
            f"NET/IB : Got completion from peer {ip(seed, peer.host)}<{40000 + int(unit(seed, 'port', peer.host) * 9999)}> "
            f"with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{ip(seed, failing)} hca mlx5_0"
        )
        where = "transport/net_ib.cc:1696"
    lines: list[Line] = []
    if debug:
        lines += [
            ("", proc),
            (f"{p} {where} NCCL WARN {warn}", proc),
            (f"{p} NCCL INFO transport/net.cc:1249 -> 6", proc),
        ]
    lines += [
        (
            f"{failing}: Test NCCL failure common.cu:1204 'remote process exited or there was a network error / {warn}'",
            proc,
        ),
        (f" .. {failing} pid {pid(seed, failing, 0)}: Test failure common.cu:915", proc),
    ]
    return lines


def wrong_results_lines(ranks: Ranks, seed: int) -> list[Line]:
    """nccl-tests 2.17 after a run with wrong results: every process returns ``testNumResults``
    from ``run()``, and ``main``'s ``TESTCHECK`` traces it."""
    lines: list[Line] = []
    for h, host in enumerate(ranks.hosts):
        for local in range(ranks.procs_per_host):
            proc = h * ranks.procs_per_host + local
            lines.append(
                (f" .. {host.host} pid {pid(seed, host.host, local)}: Test failure common.cu:1189", proc)
            )
    return lines


def ssh_warnings(ranks: Ranks) -> list[Line]:
    """What ssh prints as mpirun reaches each host for the first time (its known-hosts file is new
    in every launcher pod), as the CRE pod log of nccl-tests 2.17.8 shows."""
    return [
        (f"Warning: Permanently added '{h.host}' (ED25519) to the list of known hosts.", None)
        for h in ranks.hosts
    ]


def mpirun_abort(ranks: Ranks, failing_proc: int, exit_code: int, seed: int) -> list[Line]:
    """The banner Open MPI's mpirun prints on stderr when a rank exits non-zero."""
    return [
        (text, None)
        for text in (
            "--------------------------------------------------------------------------",
            "Primary job  terminated normally, but 1 process returned",
            "a non-zero exit code. Per user-direction, the job has been aborted.",
            "--------------------------------------------------------------------------",
            "--------------------------------------------------------------------------",
            "mpirun detected that one or more processes exited with non-zero status, thus causing",
            "the job to be terminated. The first process to do so was:",
            "",
            f"  Process name: [[{int(unit(seed, 'job') * 60000) + 1000},1],{failing_proc}]",
            f"  Exit code:    {exit_code}",
            "--------------------------------------------------------------------------",
        )
    ]


__all__ = [
    "LAYOUTS",
    "NCCL_ERROR_EXIT",
    "NCCL_TESTS_VERSION",
    "WRONG_RESULTS_EXIT",
    "Layout",
    "Line",
    "Member",
    "Ranks",
    "RowCells",
    "connect_info",
    "destroy_info",
    "error_lines",
    "init_info",
    "ip",
    "mpirun_abort",
    "pid",
    "ssh_warnings",
    "wrong_results_lines",
]
