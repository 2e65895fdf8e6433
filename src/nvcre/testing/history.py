"""Every version of the objects a test watches, in the order the API server wrote them.

A negative ("the overflow group never starts while group-1 runs") is proven on the whole history
instead of by one look after a sleep: a watch delivers every version written after it starts, so
an invariant that holds on each recorded version held all along. :func:`follow` is the
list-then-watch loop shared with :mod:`nvcre.testing.nodeguard`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.core.client import FieldSelector

Observer = Callable[[str, dict[str, Any]], None]
"""Called as ``observe(event, obj)``: event LISTED, ADDED, MODIFIED or DELETED, obj a plain dict."""


def follow(
    client_factory: Callable[[], Client],
    resource: Any,
    observe: Observer,
    stop: threading.Event,
    ready: threading.Event,
    *,
    namespace: str | None = None,
    name: str | None = None,
) -> None:
    """List, then watch from the list's resourceVersion, until ``stop``; list again when the
    watch breaks (an expired resourceVersion, a closed connection). ``ready`` is set after the
    first list. With ``name``, only the object of that name."""
    fields: FieldSelector | None = {"metadata.name": name} if name else None
    while not stop.is_set():
        try:
            with contextlib.closing(client_factory()) as client:
                listing = client.list(resource, namespace=namespace, fields=fields)
                for obj in listing:
                    observe("LISTED", obj.to_dict())
                ready.set()
                for event, obj in client.watch(
                    resource, namespace=namespace, fields=fields, resource_version=listing.resourceVersion
                ):
                    observe(event, obj.to_dict())
                    if stop.is_set():
                        return
        except Exception:
            time.sleep(0.2)  # back off before listing again


@dataclass
class History:
    """The versions of one named object, recorded from :meth:`start` until :meth:`stop`."""

    client_factory: Callable[[], Client]
    resource: Any
    name: str
    namespace: str | None = None
    _versions: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)

    def _observe(self, event: str, obj: dict[str, Any]) -> None:
        with self._lock:
            version = obj.get("metadata", {}).get("resourceVersion")
            if not self._versions or self._versions[-1].get("metadata", {}).get("resourceVersion") != version:
                self._versions.append(obj)

    def start(self) -> History:
        thread = threading.Thread(
            target=follow,
            args=(self.client_factory, self.resource, self._observe, self._stop, self._ready),
            kwargs={"namespace": self.namespace, "name": self.name},
            name=f"history-{self.name}",
            daemon=True,
        )
        thread.start()
        if not self._ready.wait(timeout=30):
            raise AssertionError(f"the watch of {self.name} did not start")
        return self

    def stop(self) -> None:
        self._stop.set()

    def __enter__(self) -> History:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def versions(self) -> list[dict[str, Any]]:
        """Every version recorded so far, oldest first."""
        with self._lock:
            return list(self._versions)


Recorder = Callable[..., History]
"""The ``history`` fixture: ``history(resource, name, namespace)`` starts a :class:`History`."""
