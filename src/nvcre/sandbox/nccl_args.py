"""The nccl-tests command line: which collective a run asks for, and with which flags.

:func:`parse_command` reads an argv as the nccl-tests binary (and an ``mpirun`` before it)
reads it; an argv the binary would refuse raises :class:`CommandError` with its message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from nvcre.sandbox.model import parse_size

TYPES: dict[str, int] = {
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
            if field_name == "datatype" and value not in TYPES:
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


__all__ = [
    "COLLECTIVES",
    "DEFAULT_SLOTS_ENV",
    "TYPES",
    "Collective",
    "CommandError",
    "NcclTest",
    "parse_command",
]
