"""Proof that nvcre never modifies a node: watch every Node for a whole test session.

NVCRE reports bad nodes; it never cordons, labels, taints or otherwise writes a Node. The
API server records every writer of an object in ``metadata.managedFields`` (for updates and
patches as well as server-side apply), under the writer's field manager, and the manager's
client writes as ``nvcre-manager``. :class:`NodeGuard` lists and then watches Nodes from the
start of the session and records every version of every Node that names that manager, plus
every change of ``spec`` or labels (with the managers that wrote it) for the report.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Node

from nvcre.testing.history import follow

MANAGER_FIELD_MANAGER = "nvcre-manager"
"""The field manager of nvcre-manager's client (``nvcre.manager.main.client_for``)."""

PROBE_LABEL = "nvcre.test/node-guard-probe"
"""Nodes with this label are the guard's own self-test: their writes are not violations."""


def managers(node: dict[str, Any]) -> set[str]:
    return {str(m.get("manager")) for m in node.get("metadata", {}).get("managedFields") or ()}


def shape(node: dict[str, Any]) -> tuple[Any, Any]:
    """What nvcre must never change: the node's spec and labels."""
    return node.get("spec") or {}, node.get("metadata", {}).get("labels") or {}


@dataclass
class NodeGuard:
    client_factory: Callable[[], Client]
    forbidden: str = MANAGER_FIELD_MANAGER
    ignore_probes: bool = True
    first: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Node name -> (resourceVersion, spec and labels) when first seen."""
    changes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    observed: int = 0
    _last: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ready: threading.Event = field(default_factory=threading.Event)

    def observe(self, event: str, node: dict[str, Any]) -> None:
        meta = node.get("metadata", {})
        name = str(meta.get("name"))
        with self._lock:
            self.observed += 1
            self.first.setdefault(name, (str(meta.get("resourceVersion")), shape(node)))
            probe = self.ignore_probes and PROBE_LABEL in (meta.get("labels") or {})
            if self.forbidden in managers(node) and not probe:
                entry = f"{event} {name}@{meta.get('resourceVersion')}: written by {self.forbidden}"
                if entry not in self.violations:
                    self.violations.append(entry)
            previous = self._last.get(name)
            if previous is not None and previous != shape(node) and event != "DELETED":
                self.changes.append(f"{name}@{meta.get('resourceVersion')} by {sorted(managers(node))}")
            self._last[name] = shape(node)

    def start(self) -> NodeGuard:
        self._thread = threading.Thread(
            target=follow,
            args=(self.client_factory, Node, self.observe, self._stop, self._ready),
            name="node-guard",
            daemon=True,
        )
        self._thread.start()
        self._ready.wait(timeout=30)
        return self

    def sweep(self) -> None:
        """Look at every Node as it is now, in case the watch missed an event."""
        with contextlib.closing(self.client_factory()) as client:
            for node in client.list(Node):
                self.observe("SWEPT", node.to_dict())

    def stop(self) -> None:
        self._stop.set()
