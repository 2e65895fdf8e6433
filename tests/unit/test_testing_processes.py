"""Child processes of the control plane: stopping for sure, failing early with the log."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nvcre.testing import processes
from nvcre.testing.processes import Process, StartupError, free_port, wait_until


def test_free_ports_lie_below_the_ephemeral_range_and_are_handed_out_once() -> None:
    """No outgoing connection can take a port below the kernel's ephemeral range before the
    server binds it, nor can a client polling the port connect to itself."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert all(1024 <= port < low for port in ports), ports
    assert len(set(ports)) == len(ports), "a port handed out twice"


def test_a_port_another_live_process_claimed_is_not_handed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two test processes side by side (pytest workers) never get the same port; the claim of
    a process that has exited is taken over."""
    base = three_free_ports()
    monkeypatch.setattr(processes, "_CLAIMS", tmp_path)
    monkeypatch.setattr(processes, "_handed_out", set())
    monkeypatch.setattr(processes, "_LOWEST_PORT", base)
    monkeypatch.setattr(processes, "_ephemeral_range", lambda: (base + 3, 60999))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for port in (base, base + 1):
            (tmp_path / str(port)).write_text(str(other.pid))
        assert free_port() == base + 2
        assert (tmp_path / str(base + 2)).read_text() == str(os.getpid())
    finally:
        other.kill()
        other.wait()
    assert {free_port(), free_port()} == {base, base + 1}, "the claims of a process gone are taken over"


def three_free_ports() -> int:
    """The first of three consecutive ports from 20000 that nothing listens on now (a server of
    another test run may hold any fixed one)."""
    for base in range(20000, 30000, 3):
        try:
            for port in range(base, base + 3):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no three consecutive free ports from 20000 to 30000")


def test_stop_escalates_to_kill_when_term_is_ignored(tmp_path: Path) -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('st' + 'arted', flush=True); time.sleep(60)"
    )
    process = Process("stubborn", [sys.executable, "-c", script], tmp_path / "log").start()
    wait_until(lambda: "started" in process.log_tail(), timeout=10, what="child up", process=process)
    process.stop(grace=0.2)
    assert not process.running()
    assert process.returncode() == -9


def test_wait_until_fails_early_with_the_log_when_the_process_exits(tmp_path: Path) -> None:
    script = "import sys; print('bind: address already in use'); sys.exit(3)"
    process = Process("etcd", [sys.executable, "-c", script], tmp_path / "etcd.log").start()
    with pytest.raises(StartupError, match=r"(?s)etcd exited with code 3 .*address already in use"):
        wait_until(lambda: False, timeout=30, what="etcd /health", process=process)


def test_wait_until_timeout_names_what_and_last_error(tmp_path: Path) -> None:
    def failing() -> bool:
        raise ConnectionRefusedError("nope")

    with pytest.raises(StartupError, match=r"waiting for apiserver /readyz \(last error: nope\)"):
        wait_until(failing, timeout=0.1, what="apiserver /readyz")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_stop_ends_what_the_child_started(tmp_path: Path) -> None:
    """A shell's background child is in the shell's group: stopping the shell stops it too."""
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 600 & echo $! > {pid_file}; wait"
    process = Process("shell", ["sh", "-c", script], tmp_path / "log").start()
    wait_until(lambda: pid_file.read_text().strip() != "", timeout=10, what="grandchild", process=process)
    grandchild = int(pid_file.read_text())
    process.stop(grace=2)
    wait_until(lambda: not _alive(grandchild), timeout=10, what=f"grandchild {grandchild} gone")
