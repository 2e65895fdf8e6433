"""Run ``nvcre-manager`` as a real process against a test control plane (kill it, restart it)."""

from __future__ import annotations

import os
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from nvcre.testing.certs import MANAGER_USER
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.processes import Process, free_port, wait_until

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class ManagerProcess:
    """One manager replica. ``start`` waits until its caches are synced (``/readyz``)."""

    def __init__(
        self,
        control_plane: ControlPlane,
        workdir: Path,
        *,
        name: str = "manager",
        leader_elect: bool = False,
        lease_namespace: str = "default",
        kubeconfig: Path | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        """``kubeconfig`` defaults to a cluster-admin one of the manager's own user
        (:data:`~nvcre.testing.certs.MANAGER_USER`); pass another to run with less rights.
        With ``leader_elect`` the replica's identity is ``name`` and its Lease (the default id)
        lives in ``lease_namespace``; ``extra_args`` come last, so they override any flag."""
        self.control_plane = control_plane
        self.name = name
        self.kubeconfig = kubeconfig or control_plane.write_kubeconfig(
            workdir / f"{name}.kubeconfig", MANAGER_USER
        )
        self.log_path = workdir / f"{name}.log"
        self.leader_elect = leader_elect
        self.lease_namespace = lease_namespace
        self.extra_args = extra_args
        self.probe_port = 0
        self.process: Process | None = None

    def argv(self) -> list[str]:
        self.probe_port = free_port()
        argv = [
            sys.executable,
            "-m",
            "nvcre.manager",
            f"--kubeconfig={self.kubeconfig}",
            "--log-format=text",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
        ]
        if self.leader_elect:
            argv += [
                "--leader-elect",
                f"--leader-election-namespace={self.lease_namespace}",
                f"--leader-election-identity={self.name}",
                "--lease-duration=4",
                "--renew-deadline=3",
                "--retry-period=0.5",
            ]
        return argv + list(self.extra_args)

    def _get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}{path}", timeout=2) as reply:
            return str(reply.read().decode())

    def start(self, *, wait_ready: bool = True, timeout: float = 60.0) -> ManagerProcess:
        env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
        self.process = Process(self.name, self.argv(), self.log_path, env=env).start()
        wait_until(
            lambda: self._get("/healthz") == "ok",
            timeout=timeout,
            what=f"{self.name} /healthz",
            process=self.process,
        )
        if wait_ready:
            wait_until(
                lambda: self._get("/readyz") == "ok",
                timeout=timeout,
                what=f"{self.name} /readyz",
                process=self.process,
            )
        return self

    def metrics(self) -> str:
        return self._get("/metrics")

    def metric(self, metric: str, /, **labels: str) -> float | None:
        """The value of one sample of ``/metrics`` (None when the series does not exist)."""
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.metrics()):
            for sample in family.samples:
                if sample.name == metric and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def running(self) -> bool:
        return self.process is not None and self.process.running()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def kill(self) -> None:
        """SIGKILL: no cleanup, no lease release — a crash."""
        if self.process is not None and self.process._popen is not None:
            self.process._popen.kill()
            self.process._popen.wait(timeout=10)

    def restart(self) -> ManagerProcess:
        self.stop()
        return self.start()

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def log_lines(self, containing: str) -> list[str]:
        """Every line of the whole log (all starts) that contains ``containing``."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if containing in line]


def running_manager(
    control_plane: ControlPlane, workdir: Path, *flags: str, name: str = "manager"
) -> Iterator[ManagerProcess]:
    """A manager replica ``name`` started with ``flags`` (its kubeconfig and log in ``workdir``),
    stopped once the caller is done with it: a fixture's ``yield from running_manager(...)``."""
    process = ManagerProcess(control_plane, workdir, name=name, extra_args=flags).start()
    yield process
    process.stop()
