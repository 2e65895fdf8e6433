"""What an nccl-tests log says around its tables: the sweep, the ranks, the footers, the test
name, failures. Each function reads one line (already split into tokens where that helps) and
returns None when the line is not of its kind. Plain string checks only: linear in the line.

The lines, as ``src/common.cu``/``src/util.cu`` of NVIDIA/nccl-tests (and rccl-tests) print them:

* ``# nThread 1 nGpus 8 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 ...``
  (NCCL 1.x: the same without ``#``); ``# Reducing maxBytes to N due to memory limitation``
* ``#  Rank  0 Group  0 Pid  1234 on host device  0 [0000:0f:00] NVIDIA H100``, older
  ``#   Rank  0 Pid  1234 on host device ...`` and ``#   Rank  0 on host device ...``; NCCL
  1.x's own tests: ``#   Rank  0 uses device  0 [0x0a] GeForce GTX TITAN X`` (no host)
* ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 272.909`` (NCCL 1.x without ``#``;
  ``272.909 OK`` or ``FAILED`` when ``NCCL_TESTS_MIN_BW`` set a floor)
* ``# Collective test starting: all_reduce_perf`` (2.17+); otherwise the command line
* ``host: Test NCCL failure common.cu:1204 '...'``, `` .. host pid 1: Test failure common.cu:915``;
  Open MPI's own ``PRTE has lost communication with a remote daemon.`` (``ORTE`` before Open
  MPI 5). A launcher's ``ssh: connect to host ...`` is not one: a wrapper may try again
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nvcre.measure.nccl.cells import count_value, is_count, number

OUT_OF_BOUNDS = "Out of bounds values"
AVG_BUS_BANDWIDTH = "Avg bus bandwidth"
FAILURE_LINE_CHARS = 300
#: Substrings that make a line a failure line, whatever else it says.
FAILURE_MARKERS = (
    "Test NCCL failure",
    "Test CUDA failure",
    "Test failure",
    "Test timeout",
    "NCCL failure",
    "Cuda failure",
    "CUDA failure",
    "unhandled cuda error",
    "unhandled system error",
    "exited on signal",
    "exited with non-zero status",
    "the job has been aborted",
    "srun: error:",
    "Segmentation fault",
    "lost communication with a remote daemon",
)
_FAILURE_WORDS = ("failure", "error", "exited", "aborted", "timeout", "Segmentation", "WARN", "lost")
"""One of these is in every failure marker and warning phrase: a quick first test."""
#: An ``NCCL WARN`` (or nccl-tests' closing ``# error:``) line is a failure when its message says
#: one of these (lower case); other warnings (``Could not find a path for pattern 4, falling back
#: to simple order``...) are NCCL adapting, not failing.
_WARNING_FAILURE_WORDS = ("fail", "error", "timeout", "timed out", "abort", "closed by")
_LAUNCHERS = ("mpirun", "mpiexec", "srun", "orterun", "prterun")
_PROCESS_FLAGS = ("-np", "-n", "--np", "--ntasks")


@dataclass(frozen=True)
class Sweep:
    """The message sizes a run sweeps, from its ``# nThread`` line (and ``Reducing maxBytes``)."""

    min_bytes: int
    max_bytes: int
    step: int
    factor: bool  #: ``step`` multiplies (``2(factor)``), else it adds bytes
    threads: int
    gpus: int

    def reduced(self, max_bytes: int) -> Sweep:
        """nccl-tests' memory limit: ``maxBytes`` lowered, ``minBytes`` with it if above."""
        return Sweep(
            min(self.min_bytes, max_bytes), max_bytes, self.step, self.factor, self.threads, self.gpus
        )

    def last_sizes(self) -> tuple[int, int | None] | None:
        """(last size of the sweep, the one before it or None), or None when the sweep has no end
        nccl-tests would reach (a factor from 0 never grows)."""
        if self.max_bytes < self.min_bytes:
            return None
        if self.factor and self.step > 1:
            if self.min_bytes == 0:
                return None
            size, before = self.min_bytes, None
            while size * self.step <= self.max_bytes:
                size, before = size * self.step, size
            return size, before
        if self.step <= 0:
            return self.min_bytes, None
        last = self.min_bytes + (self.max_bytes - self.min_bytes) // self.step * self.step
        return last, (last - self.step if last - self.step >= self.min_bytes else None)


def _after(tokens: Sequence[str], key: str) -> str | None:
    try:
        return tokens[tokens.index(key) + 1]
    except (ValueError, IndexError):
        return None


def sweep(tokens: Sequence[str]) -> Sweep | None:
    """A ``nThread ... minBytes ... maxBytes ... step: N(factor|bytes)`` line."""
    values = [_after(tokens, key) for key in ("nThread", "nGpus", "minBytes", "maxBytes")]
    step = _after(tokens, "step:")
    if step is None or not all(v is not None and is_count(v) for v in values):
        return None
    amount, _, kind = step.partition("(")
    if not is_count(amount) or kind not in ("factor)", "bytes)"):
        return None
    threads, gpus, low, high = (int(v) for v in values if v is not None)
    return Sweep(low, high, int(amount), kind == "factor)", threads, gpus)


def reduced_max(tokens: Sequence[str]) -> int | None:
    """``# Reducing maxBytes to N due to memory limitation``."""
    if "Reducing" not in tokens:
        return None
    value = _after(tokens, "to")
    return (
        int(value)
        if value is not None and _after(tokens, "Reducing") == "maxBytes" and is_count(value)
        else None
    )


def rank_line(tokens: Sequence[str]) -> tuple[int, str | None] | None:
    """(rank, host) of a ``Rank N ... on HOST device ...`` line of the device list; (rank, None)
    of NCCL 1.x's ``Rank N uses device M``, which names no host."""
    if "Rank" not in tokens or "device" not in tokens:
        return None
    at = tokens.index("Rank")
    rank = tokens[at + 1] if at + 1 < len(tokens) else ""
    if not is_count(rank):
        return None
    after = tuple(tokens[at + 2 : at + 5])
    if len(after) == 3 and after[:2] == ("uses", "device") and is_count(after[2]):
        return int(rank), None
    try:
        on = tokens.index("on", at + 2)
    except ValueError:
        return None
    if on + 2 >= len(tokens) or tokens[on + 2] != "device":
        return None
    return int(rank), tokens[on + 1]


def footer_text(line: str, phrase: str) -> list[str] | None:
    """The words after the colon of a footer line (``# Avg bus bandwidth    : 272.909``)."""
    at = line.find(phrase)
    if at < 0:
        return None
    _, colon, rest = line[at + len(phrase) :].partition(":")
    return rest.split() if colon else None


def out_of_bounds(line: str) -> tuple[int, str] | None:
    """(count, ``OK``/``FAILED``) of ``# Out of bounds values : N OK|FAILED``."""
    words = footer_text(line, OUT_OF_BOUNDS)
    if not words or len(words) < 2 or words[1] not in ("OK", "FAILED"):
        return None
    counted = count_value(words[0])
    return (counted, words[1]) if counted is not None else None


def avg_bus_bandwidth(line: str) -> tuple[str, bool] | None:
    """The number of ``# Avg bus bandwidth : X`` as printed (``%g``), and whether nccl-tests marked
    it ``FAILED`` (below 90% of ``NCCL_TESTS_MIN_BW``; it then exits with an error)."""
    words = footer_text(line, AVG_BUS_BANDWIDTH)
    if not words or number(words[0]) is None:
        return None
    return words[0], words[1:2] == ["FAILED"]


def collective_name(line: str) -> str | None:
    """``# Collective test starting: all_reduce_perf`` (or ``concluded``)."""
    for phrase in ("Collective test starting:", "Collective test concluded:"):
        at = line.find(phrase)
        if at >= 0:
            words = line[at + len(phrase) :].split()
            return words[0] if words and perf_binary(words[0]) else None
    return None


def perf_binary(token: str) -> str | None:
    """The nccl-tests/rccl-tests binary a token names (``./build/all_reduce_perf``,
    ``EXEC_CMD=/opt/nccl-tests/bin/all_gather_perf_mpi``): its base name."""
    base = token.rpartition("/")[2].rpartition("=")[2]
    stem = base.removesuffix("_mpi")
    if not stem.endswith("_perf") or len(stem) <= len("_perf"):
        return None
    if not all(c.islower() or c.isdecimal() or c == "_" for c in stem) or not stem[0].isalpha():
        return None
    return base


@dataclass(frozen=True)
class Command:
    """A command line running an nccl-tests binary: the binary and the ranks it asks for."""

    binary: str
    processes: int | None  #: the launcher's ``-np``/``-n``/``--ntasks``; 1 without a launcher
    threads: int
    gpus: int


def _flag(tokens: Sequence[str], names: Sequence[str]) -> int | None:
    for i, token in enumerate(tokens):
        name, equals, value = token.partition("=")
        if name in names:
            text = value if equals else (tokens[i + 1] if i + 1 < len(tokens) else "")
            if is_count(text):
                return int(text)
    return None


def command(tokens: Sequence[str]) -> Command | None:
    """The nccl-tests command line these tokens hold, if any (``mpirun -np 16 ... all_reduce_perf
    -g 1``, ``./build/sendrecv_perf -b 128M -g 8``)."""
    at = next((i for i, t in enumerate(tokens) if perf_binary(t)), None)
    if at is None:
        return None
    binary = perf_binary(tokens[at])
    assert binary is not None
    launcher, args = tokens[:at], tokens[at + 1 :]
    launched = any(t.rpartition("/")[2] in _LAUNCHERS for t in launcher)
    if launched:
        processes = _flag(launcher, _PROCESS_FLAGS)
    else:  # one process, unless this is the continuation line of a launcher's command
        processes = None if any(t.startswith("-") for t in launcher) else 1
    threads = _flag(args, ("-t", "--nthreads")) or 1
    gpus = _flag(args, ("-g", "--ngpus")) or 1
    return Command(binary, processes, threads, gpus)


def unwrapped(previous: Sequence[str], tokens: Sequence[str]) -> Sequence[str]:
    """A command line cut inside a word (a terminal's or its author's wrap): when the line before
    ends in a word cut after ``_`` (``... -np 16 ./build/all_``) and this one starts with the
    rest (``reduce_perf -b 8``), the two lines joined; else this line's tokens as they are."""
    if previous and tokens and previous[-1].endswith("_") and perf_binary(previous[-1] + tokens[0]):
        return [*previous[:-1], previous[-1] + tokens[0], *tokens[1:]]
    return tokens


def nccl_ranks(tokens: Sequence[str]) -> int | None:
    """``nranks N``/``nRanks N`` of an ``NCCL INFO`` line (a communicator's size)."""
    for key in ("nranks", "nRanks"):
        value = _after(tokens, key)
        if value is not None and is_count(value):
            return int(value)
    return None


def is_failure(line: str) -> bool:
    """An NCCL/CUDA/launcher failure line (see :data:`FAILURE_MARKERS`), or a failing warning."""
    if not any(word in line for word in _FAILURE_WORDS):
        return False
    if any(marker in line for marker in FAILURE_MARKERS):
        return True
    for phrase in ("NCCL WARN", "# error:"):
        at = line.find(phrase)
        if at >= 0:
            message = line[at + len(phrase) :].lower()
            return any(word in message for word in _WARNING_FAILURE_WORDS)
    return False
