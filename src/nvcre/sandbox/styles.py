"""How the simulated launcher's log looks: the prefixes real launchers put before each line, and
the nccl-tests table layout.

A fleet-wide option (``--log-style``, comma-separated), each part as real logs show it (the
corpus in ``../shared/corpus/nccl``):

- ``mpi``: Open MPI's ``--tag-output``: ``[1,R]<stdout>:`` (or ``<stderr>``) before each line
  process R prints; what mpirun prints itself (its abort banner) has no tag;
- ``skypilot``: a SkyPilot task on its head node: ``(head, rank=0, pid=P) `` before every line,
  then Open MPI's tags (SkyPilot runs ``mpirun`` with ``--tag-output``);
- ``pdsh``: ``HOST: `` before every line, the head host pdsh ran the launcher on;
- ``srun``: Slurm's ``--label``: ``R: `` before each line task R prints (the number right-aligned
  to the widest task id);
- ``timestamps``: an RFC 3339 UTC time with nanoseconds before every line, as ``kubectl logs
  --timestamps`` writes a log that is then logged again;
- ``nccl-2.4``: nccl-tests' older table layout (see :mod:`.nccl_log`).

At most one of ``mpi``, ``skypilot``, ``pdsh`` and ``srun``; ``timestamps`` goes before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from nvcre.sandbox.model import unit
from nvcre.sandbox.nccl_log import LAYOUTS

PREFIXES = ("mpi", "skypilot", "pdsh", "srun")


class LogStyleError(ValueError):
    """A ``--log-style`` that does not parse; the message names the part that is wrong."""


@dataclass(frozen=True)
class LogStyle:
    prefix: str | None = None  #: one of :data:`PREFIXES`
    timestamps: bool = False
    layout: str = "current"  #: a name of :data:`~nvcre.sandbox.nccl_log.LAYOUTS`

    def __str__(self) -> str:
        parts = [*(["timestamps"] if self.timestamps else []), *([self.prefix] if self.prefix else [])]
        return ",".join([*parts, *([self.layout] if self.layout != "current" else [])]) or "plain"


PLAIN = LogStyle()
"""The default: no prefixes, today's nccl-tests layout."""


def parse_log_style(spec: str) -> LogStyle:
    """``spec`` (``srun``, ``timestamps,mpi``, ``pdsh,nccl-2.4``...) as a :class:`LogStyle`;
    ``plain`` or an empty spec is the default."""
    prefix: str | None = None
    timestamps = False
    layout = "current"
    for part in (p.strip() for p in spec.split(",")):
        if part in ("", "plain"):
            continue
        if part in PREFIXES:
            if prefix is not None:
                raise LogStyleError(f"log style {spec!r}: {prefix!r} and {part!r} are both launcher prefixes")
            prefix = part
        elif part == "timestamps":
            timestamps = True
        elif part in LAYOUTS and part != "current":
            layout = part
        else:
            known = ", ".join([*PREFIXES, "timestamps", *(n for n in LAYOUTS if n != "current")])
            raise LogStyleError(f"log style {spec!r}: unknown part {part!r}; known: {known}")
    return LogStyle(prefix, timestamps, layout)


def prefixer(
    style: LogStyle, *, head: str, procs: int, seed: int, started_at: datetime, speed: float = 1.0
) -> Callable[[float, str, int | None], str]:
    """What goes before a line printed ``offset_s`` simulated seconds after the start (``speed``
    of them a wall-clock second) on ``stream`` by process ``origin`` (``None``: by the launcher
    itself), for a group of ``procs`` processes whose launcher runs on host ``head``."""
    task_pid = 1000 + int(unit(seed, "task-pid", head) * 8000)
    width = len(str(max(procs - 1, 0)))

    def prefix(offset_s: float, stream: str, origin: int | None) -> str:
        tag = "" if origin is None else f"[1,{origin}]<{stream}>:"
        text = {
            None: "",
            "mpi": tag,
            "skypilot": f"(head, rank=0, pid={task_pid}) {tag}",
            "pdsh": f"{head}: ",
            "srun": "" if origin is None else f"{origin:>{width}}: ",
        }[style.prefix]
        if style.timestamps:
            seconds = offset_s / speed
            when = (started_at + timedelta(seconds=seconds)).astimezone(UTC)
            nanos = round(seconds * 1e9) % 1000
            text = f"{when.strftime('%Y-%m-%dT%H:%M:%S')}.{when.microsecond:06d}{nanos:03d}Z {text}"
        return text

    return prefix


__all__ = ["PLAIN", "PREFIXES", "LogStyle", "LogStyleError", "parse_log_style", "prefixer"]
