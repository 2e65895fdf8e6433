"""Toxiproxy between a client and kube-apiserver: latency, resets and dropped streams on demand.

``FaultProxy(control_plane, workdir, seed=...)`` runs ``toxiproxy-server`` on loopback and creates
one TCP proxy from a free port to kube-apiserver's. TLS passes through unchanged (the proxy never
terminates it), so a kubeconfig needs only its ``server`` moved to :attr:`FaultProxy.server`: the
serving certificate is valid for ``127.0.0.1``, which is also the proxy's address.

Toxics (``latency``, ``reset_peer``, ``limit_data``, ``timeout``...) act on every connection, open
or new, until removed; disabling the proxy closes every connection and refuses new ones.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from nvcre import yamlio
from nvcre.testing import binaries as bins
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.processes import Process, RunsAsProcess, free_port, wait_until

PROXY = "apiserver"


class FaultProxy(RunsAsProcess):
    """toxiproxy-server with one proxy, ``apiserver``, in front of the control plane."""

    def __init__(self, control_plane: ControlPlane, workdir: Path, *, seed: int) -> None:
        self.control_plane = control_plane
        self.workdir = workdir
        self.seed = seed  # toxiproxy's own randomness (toxicity, jitter) follows it too
        self.api_port = 0
        self.listen_port = 0
        self.process: Process | None = None
        self._toxics = 0

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.listen_port}"

    def start(self) -> FaultProxy:
        binary = bins.ensure([bins.TOXIPROXY]).path(bins.TOXIPROXY)
        self.api_port, self.listen_port = free_port(), free_port()
        argv = [str(binary), "-host=127.0.0.1", f"-port={self.api_port}", f"-seed={self.seed}"]
        self.process = Process("toxiproxy-server", argv, self.workdir / "toxiproxy.log").start()
        wait_until(
            lambda: bool(self._call("GET", "/version")),
            timeout=30,
            what="toxiproxy-server /version",
            process=self.process,
        )
        upstream = urlsplit(self.control_plane.server).netloc
        self._call(
            "POST",
            "/proxies",
            {"name": PROXY, "listen": f"127.0.0.1:{self.listen_port}", "upstream": upstream, "enabled": True},
        )
        return self

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = reply.read().decode()
        return json.loads(text) if text.strip().startswith(("{", "[")) else text

    def add_toxic(
        self,
        kind: str,
        attributes: Mapping[str, int],
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> str:
        """Add a toxic of type ``kind`` to the proxy; returns its name (for :meth:`remove_toxic`)."""
        self._toxics += 1
        name = f"{kind}-{self._toxics}"
        self._call(
            "POST",
            f"/proxies/{PROXY}/toxics",
            {
                "name": name,
                "type": kind,
                "stream": stream,
                "toxicity": toxicity,
                "attributes": dict(attributes),
            },
        )
        return name

    def remove_toxic(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{PROXY}/toxics/{name}")

    def set_enabled(self, enabled: bool) -> None:
        """Disabled, the proxy closes every open connection and refuses new ones."""
        self._call("POST", f"/proxies/{PROXY}", {"enabled": enabled})

    def reset(self) -> None:
        """Enable the proxy and remove every toxic."""
        self._call("POST", "/reset")

    def write_kubeconfig(self, source: Path, path: Path) -> Path:
        """Copy kubeconfig ``source`` to ``path`` with every cluster's server moved to the proxy."""
        config = yamlio.load(source.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.server
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path


__all__ = ["PROXY", "FaultProxy"]
