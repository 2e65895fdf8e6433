"""The sandbox's state directory: one record of what runs, a pid file per component.

Everything a sandbox starts runs in a process group of its own (its own session), recorded here
by pid; ``down`` signals each recorded group, so a crashed supervisor or a killed component
leaves nothing behind once ``down`` ran. The listening TCP ports of the components are recorded
too, read from ``/proc`` when the sandbox is ready.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nvcre.sandbox.fault_state import FaultState, decode, encode
from nvcre.testing.processes import alive, signal_group

RECORD = "sandbox.json"
#: The faults in force (:mod:`nvcre.sandbox.fault_state`), and the generation of them the runner
#: last applied (:func:`applied_path`).
FAULTS = "faults.json"
SUPERVISOR = "supervisor"
#: TCP state LISTEN in /proc/net/tcp.
_LISTEN = "0A"


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/nvcre/sandbox`` (default ``~/.local/state/nvcre/sandbox``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "nvcre" / "sandbox"


@dataclass
class ComponentRecord:
    name: str
    pid: int
    log: str


@dataclass
class Record:
    """What ``up`` started; written by the supervisor, read by ``status`` and ``down``."""

    supervisor: int
    kubeconfig: str = ""
    platform: str = ""
    product: str = ""
    nodes: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    seed: int = 0
    log_style: str = ""
    speed: float = 1.0
    components: list[ComponentRecord] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    ready: bool = False
    startup_seconds: float = 0.0
    error: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        values = dict(data)
        values["components"] = [ComponentRecord(**c) for c in values.get("components") or ()]
        return cls(**values)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is alive."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def listening_ports(pids: Iterable[int]) -> list[int]:
    """The TCP ports the processes ``pids`` listen on (their sockets matched in /proc/net/tcp*)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return sorted({port for port, inode in listening_sockets() if inode in inodes})


def listening_sockets() -> list[tuple[int, str]]:
    """(port, socket inode) of every listening TCP socket of this machine."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == _LISTEN:
                out.append((int(fields[1].rsplit(":", 1)[1], 16), fields[9]))
    return out


def read_faults(path: Path) -> FaultState | None:
    """The fault state in ``path``; ``None`` when there is none (:class:`ValueError` when it
    does not decode)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return decode(text)


def _replace(path: Path, text: str) -> None:
    """Write ``path`` whole: a reader sees the old text or the new, never part of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_faults(path: Path, state: FaultState) -> None:
    _replace(path, encode(state))


def applied_path(faults: Path) -> Path:
    """Where the runner acknowledges the generation of ``faults`` it applied."""
    return faults.with_suffix(".applied")


def read_applied(faults: Path) -> int:
    """The generation of ``faults`` the runner last applied (0: none yet)."""
    try:
        return int(applied_path(faults).read_text())
    except (OSError, ValueError):
        return 0


def write_applied(faults: Path, generation: int) -> None:
    _replace(applied_path(faults), f"{generation}\n")


class StateDir:
    """One sandbox's directory: ``sandbox.json``, ``<component>.pid``, logs, the cluster's files."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def record_path(self) -> Path:
        return self.path / RECORD

    @property
    def cluster_dir(self) -> Path:
        return self.path / "cluster"

    @property
    def log_path(self) -> Path:
        return self.path / f"{SUPERVISOR}.log"

    @property
    def faults_path(self) -> Path:
        return self.path / FAULTS

    @contextlib.contextmanager
    def faults_lock(self) -> Iterator[None]:
        """Held while a command reads, changes and writes the faults (two at once lose none)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / f"{FAULTS}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def read(self) -> Record | None:
        try:
            return Record.from_dict(json.loads(self.record_path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def write(self, record: Record) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        _replace(self.record_path, json.dumps(asdict(record), indent=2))

    def write_pid(self, name: str, pid: int) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / f"{name}.pid").write_text(f"{pid}\n")

    def pids(self) -> dict[str, int]:
        """Every pid file: component name -> pid (each the leader of its own process group)."""
        out = {}
        for path in sorted(self.path.glob("*.pid")):
            try:
                out[path.stem] = int(path.read_text())
            except (OSError, ValueError):
                continue
        return out

    def running(self) -> bool:
        """A sandbox runs here when its supervisor is alive."""
        pid = self.pids().get(SUPERVISOR)
        return pid is not None and alive(pid)

    def stop(self, *, grace: float = 30.0) -> list[str]:
        """Stop the supervisor (which stops the components in order), then kill every recorded
        process group still alive; remove the directory. Returns the groups that had to be killed."""
        pids = self.pids()
        supervisor = pids.pop(SUPERVISOR, None)
        if supervisor is not None and signal_group(supervisor, signal.SIGTERM):
            deadline = time.monotonic() + grace
            while group_alive(supervisor) and time.monotonic() < deadline:
                time.sleep(0.1)
        killed = []
        for name, pgid in [*pids.items(), *([(SUPERVISOR, supervisor)] if supervisor else [])]:
            if group_alive(pgid):
                signal_group(pgid, signal.SIGKILL)
                killed.append(name)
        for pgid in [*pids.values(), *([supervisor] if supervisor else [])]:
            deadline = time.monotonic() + 10
            while group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(self.path, ignore_errors=True)
        return killed
