"""Child processes of the control plane: start with a log file, stop for sure, free ports."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

_PR_SET_PDEATHSIG = 1


_LOWEST_PORT = 10000
_handed_out: set[int] = set()
_CLAIMS = Path(os.environ.get("TMPDIR") or "/tmp") / f"nvcre-ports-{os.getuid()}"
"""One file per port a live process of this user holds (its pid inside): test processes that
run side by side (pytest workers, a sandbox) never hand out the same port."""


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now, below the kernel's ephemeral range.

    A port the kernel hands out for ``bind(0)`` lies in the range it also draws every outgoing
    connection's local port from: until the server is listening, a client's connection may take
    that port (the server then fails with "address already in use"), or a client polling the
    server may connect to itself, send a TLS hello to itself and fail with a decode error. A port
    below that range is never used by an outgoing connection. Each port is handed out once among
    the live processes of this user (a claim file, see :data:`_CLAIMS`), so two servers started
    together, by one process or by two, never get the same one.
    """
    low, _ = _ephemeral_range()
    candidates = list(range(_LOWEST_PORT, low))
    random.shuffle(candidates)
    for port in candidates:
        if port in _handed_out or not _claim(port):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a range too narrow to draw from
        sock.bind((host, 0))
        found: int = sock.getsockname()[1]
        return found


def _claim(port: int) -> bool:
    """Claim ``port`` for this process; False when a live process holds it. The claim of a
    process that has exited is taken over (claims are not cleaned up: a pid file costs nothing).
    One claim at a time among all processes (a lock on the folder)."""
    _CLAIMS.mkdir(mode=0o700, exist_ok=True)
    path = _CLAIMS / str(port)
    with open(_CLAIMS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            holder = int(path.read_text() or "0")
        except (OSError, ValueError):
            holder = 0
        if holder and holder != os.getpid() and alive(holder):
            return False
        path.write_text(str(os.getpid()))
        return True


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask the kernel to SIGTERM the child when its parent dies (Linux only).

    The kernel tracks the parent *thread*, so this is only requested for children started from
    the main thread; a child started from a worker thread would otherwise die with that thread.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of the log at ``path``, ``(no log)`` when it cannot be read."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Process:
    """One binary running in its own session, output appended to ``log_path``."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(self.argv) + "\n").encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # Ctrl-C reaches only the Python parent, which stops us in order
                preexec_fn=_die_with_parent
                if threading.current_thread() is threading.main_thread()
                else None,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the process group, wait up to ``grace`` seconds, then SIGKILL it; reap the child.

        The child leads its own session, so its group holds whatever it started (a shell's
        children, a server's workers): they get the signals too, and the group is SIGKILLed at the
        end even when the leader exited on SIGTERM, so nothing it spawned outlives it.
        """
        popen = self._popen
        if popen is None:
            return
        if popen.poll() is None:
            signal_group(popen.pid, signal.SIGTERM)
            try:
                popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                signal_group(popen.pid, signal.SIGKILL)
                popen.wait(timeout=10)
        signal_group(popen.pid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL the process group and reap the child: a crash, no shutdown path runs."""
        popen = self._popen
        if popen is not None and popen.poll() is None:
            signal_group(popen.pid, signal.SIGKILL)
            popen.wait(timeout=10)

    def restart(self, *, kill: bool = False) -> Process:
        """Stop the process (SIGTERM, or SIGKILL with ``kill``) and start the same command again."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()


class RunsAsProcess:
    """Something that runs as one :class:`Process`, ``None`` until it starts: stopping it stops
    that process, and it is running while that process is."""

    process: Process | None = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running()


def signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to process group ``pgid``; False when the group no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a reused id owned by someone else: not ours
        return False
    return True


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    """True when a GET of ``url`` answers 200 (a health or readiness endpoint)."""
    with urllib.request.urlopen(url, timeout=2, context=context) as response:
        return bool(response.status == 200)


class StartupError(RuntimeError):
    """A component did not come up; the message carries the tail of its log."""


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    process: Process | None = None,
    interval: float = 0.05,
) -> None:
    """Poll ``check`` until it is true; fail early if ``process`` exits; include its log on failure."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        if process is not None and not process.running():
            raise StartupError(
                f"{process.name} exited with code {process.returncode()} while waiting for {what}; "
                f"last log lines ({process.log_path}):\n{process.log_tail()}"
            )
        try:
            if check():
                return
            last_error = None
        except Exception as error:
            last_error = error
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            log = f"; last log lines ({process.log_path}):\n{process.log_tail()}" if process else ""
            raise StartupError(f"timed out after {timeout:.0f}s waiting for {what}{detail}{log}")
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


class Service:
    """Something started and stopped as one, also as a context manager: a start that fails
    part-way stops what it had started before the error propagates."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError
