"""The NodeRecords' per-node gauges on the manager's ``/metrics`` (``nvcre_node_*``).

The samples are the rules of ``nvcre.fleet.metrics``; this shell keeps each cached record's
samples, already in Prometheus' text format, up to date from the NodeRecord informer's events (one
record's version is formatted once, not at every scrape: ``prometheus_client`` formats every
sample at every scrape, seconds of the event loop at 16,384 nodes) and serves them through
:func:`nvcre.runtime.probes.add_exposition`. They come from the records, not from the writes this
process made: a restarted manager, or a new leader, exports the same values once its cache has
synced. A standby caches nothing and exports no node series (each family's HELP and TYPE only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from nvcre.fleet.metrics import (
    FAILURES,
    FAMILIES,
    Family,
    NodeSeries,
    exported,
    failures_since,
    node_series,
    window_start,
)
from nvcre.objects import Obj
from nvcre.runtime import probes
from nvcre.runtime.clock import Clock, SystemClock
from nvcre.runtime.informer import EventHandler

_INDEX = {family: i for i, family in enumerate(FAMILIES)}


class Source(Protocol):
    """What is read of the NodeRecord informer."""

    def add_handler(self, handler: EventHandler) -> None: ...

    def items(self, namespace: str | None = None) -> list[Obj]: ...


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(family: Family, labels: Iterable[str], value: float) -> str:
    pairs = ",".join(f'{name}="{_escape(v)}"' for name, v in zip(family.labels, labels, strict=True))
    return f"{family.name}{{{pairs}}} {float(value)!r}\n"  # finite: number() refuses the rest


def _header(family: Family) -> bytes:
    text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {family.name} {text}\n# TYPE {family.name} gauge\n".encode()


@dataclass(frozen=True)
class _Node:
    """One node's lines, by family (:data:`FAILURES`' formatted at each scrape)."""

    lines: tuple[bytes, ...]
    failures: tuple[float, ...]
    failures_prefix: bytes
    """:data:`FAILURES`' line up to its value."""
    exported: bool


def _formatted(series: NodeSeries) -> _Node:
    lines: list[list[str]] = [[] for _ in FAMILIES]
    for family, labels, value in series.samples:
        lines[_INDEX[family]].append(_line(family, labels, value))
    return _Node(
        tuple("".join(ls).encode() for ls in lines),
        series.failures,
        _line(FAILURES, (series.node,), 0).rpartition(" ")[0].encode() + b" ",
        exported(series),
    )


class NodeRecordMetrics:
    """The ``nvcre_node_*`` families of the records a :class:`Source` caches."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._nodes: dict[str, _Node] = {}
        self._source: Source | None = None

    def watch(self, source: Source, clock: Clock | None = None) -> None:
        """Export the records ``source`` caches (from now on, instead of any before)."""
        self._source = source
        self.clock = clock or self.clock
        self._nodes = {}

        def on_event(event: str, old: Obj | None, new: Obj) -> None:
            if self._source is source:
                self.observe(event, new)

        source.add_handler(on_event)
        for record in source.items():
            self.observe("ADDED", record)

    def observe(self, event: str, record: Mapping[str, Any]) -> None:
        """An informer event of ``record`` (ADDED, MODIFIED or DELETED)."""
        name = str((record.get("metadata") or {}).get("name") or "")
        if event == "DELETED":
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = _formatted(node_series(record))

    def render(self, now: datetime | None = None) -> bytes:
        """Every family, HELP and TYPE first, then each node's samples (by record name)."""
        nodes = [n for _, n in sorted(self._nodes.items()) if n.exported]
        since = window_start(now or self.clock.now())
        parts: list[bytes] = []
        for i, family in enumerate(FAMILIES):
            parts.append(_header(family))
            if family is FAILURES:
                parts += [b"%s%d\n" % (n.failures_prefix, failures_since(n.failures, since)) for n in nodes]
            else:
                parts += [n.lines[i] for n in nodes]
        return b"".join(parts)


NODE_RECORDS = NodeRecordMetrics()
"""The manager's NodeRecord families, served on ``/metrics``."""
probes.add_exposition(NODE_RECORDS.render)


def watch(source: Source, clock: Clock | None = None) -> None:
    """Export the NodeRecords ``source`` (the manager's informer) caches on ``/metrics``."""
    NODE_RECORDS.watch(source, clock)


__all__ = ["NODE_RECORDS", "NodeRecordMetrics", "Source", "watch"]
