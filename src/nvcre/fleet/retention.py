"""How long a NodeRecord outlives its Node (``nvcre-manager --node-record-retention``).

A record whose Node exists is never deleted, however old its results. A record whose Node is gone
is deleted once ``retention`` has passed since its newest result (every category; a record
without a result counts from its ``metadata.creationTimestamp``). ``0`` keeps every record
forever. The default, :data:`DEFAULT_RETENTION` (90 days), outlasts a node sent for repair or
replacement (an RMA) that comes back under its name, which finds its history where it left it,
and still lets the records of an autoscaled cloud fleet's nodes, gone for good, go
(docs/fleet-memory.md#retention).

Pure: the manager's shell (``controllers/noderecord_retention.py``) hands it the cached records,
the cached Nodes' names and its clock's time, and deletes what it returns.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre.api.v1alpha1.constants import Default
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.durations import format_duration, parse_duration
from nvcre.fleet.records import record_node

DEFAULT_RETENTION = timedelta(days=Default.NODE_RECORD_RETENTION_DAYS)
"""Records of nodes gone for 90 days after their newest result are deleted."""
DEFAULT_RETENTION_TEXT = f"{Default.NODE_RECORD_RETENTION_DAYS}d"
""":data:`DEFAULT_RETENTION` as the flag and the chart's value spell it."""
KEEP_FOREVER = timedelta(0)
"""A retention of ``0``: no record is ever deleted."""

_DAYS = re.compile(r"^(\d+)d$")


def parse_retention(text: str) -> timedelta:
    """A retention: whole days (``90d``) or a Go duration (``2160h``, ``36h30m``, ``1s``); ``0``
    keeps records forever. ``ValueError`` for anything else, a negative duration included."""
    value = text.strip()
    days = _DAYS.match(value)
    if days:
        return timedelta(days=int(days.group(1)))
    try:
        ns = parse_duration(value)
    except ValueError:
        raise ValueError(
            f"invalid retention {text!r}: want days (90d), a Go duration (2160h, 1s) or 0"
        ) from None
    if ns < 0:
        raise ValueError(f"invalid retention {text!r}: must not be negative")
    return timedelta(microseconds=ns // 1000)


def format_retention(retention: timedelta) -> str:
    """``retention`` as the flag takes it: ``90d`` in whole days, else Go's ``36h0m0s``, ``1s``; ``0``."""
    if retention <= KEEP_FOREVER:
        return "0"
    if retention % timedelta(days=1) == timedelta(0):
        return f"{retention.days}d"
    return format_duration(retention // timedelta(microseconds=1) * 1000)


@dataclass(frozen=True)
class Expired:
    """A record to delete, and why."""

    name: str
    """The record's name."""
    node: str
    """The Node it is of (``spec.nodeName``)."""
    uid: str
    resource_version: str
    """The version decided on: the delete's preconditions, so a record written since is kept."""
    since: datetime
    """Its newest result's time, else its creation."""
    expired_at: datetime
    reason: str


@dataclass(frozen=True)
class Sweep:
    """What one pass over the records decides."""

    expired: tuple[Expired, ...]
    """The records to delete now, by name."""
    next_expiry: datetime | None
    """The earliest time a kept record of a Node that is gone expires; None when none will
    (every kept record's Node exists, or records are kept forever)."""


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(str(value or ""))
    except ValueError:
        return None


def newest_result(record: Mapping[str, Any]) -> datetime | None:
    """The time of the record's newest result, every category (None without a readable one)."""
    times = (
        _time(result.get("time"))
        for history in (record.get("status") or {}).get("categories") or ()
        for result in history.get("results") or ()
    )
    return max((t for t in times if t is not None), default=None)


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sweep(
    records: Iterable[Mapping[str, Any]],
    nodes: Container[str],
    now: datetime,
    retention: timedelta,
) -> Sweep:
    """The records to delete at ``now``: those whose Node is not in ``nodes`` and whose newest
    result (without one, their creation) is at least ``retention`` old. A retention of ``0`` (or
    less) deletes nothing; a record whose time cannot be read is kept."""
    if retention <= KEEP_FOREVER:
        return Sweep((), None)
    expired: list[Expired] = []
    upcoming: list[datetime] = []
    for record in records:
        node = record_node(record)
        if not node or node in nodes:
            continue
        meta = record.get("metadata") or {}
        since = newest_result(record)
        if since is not None:
            basis = f"its newest result was {_stamp(since)}"
        else:
            since = _time(meta.get("creationTimestamp"))
            if since is None:
                continue
            basis = f"the record, without a result, was created {_stamp(since)}"
        expires = since + retention
        if expires > now:
            upcoming.append(expires)
            continue
        reason = (
            f"Node {node} is gone and {basis}, at least the retention "
            f"({format_retention(retention)}) ago: expired {_stamp(expires)}"
        )
        expired.append(
            Expired(
                name=str(meta.get("name") or node),
                node=node,
                uid=str(meta.get("uid") or ""),
                resource_version=str(meta.get("resourceVersion") or ""),
                since=since,
                expired_at=expires,
                reason=reason,
            )
        )
    expired.sort(key=lambda e: e.name)
    return Sweep(tuple(expired), min(upcoming, default=None))


__all__ = [
    "DEFAULT_RETENTION",
    "DEFAULT_RETENTION_TEXT",
    "KEEP_FOREVER",
    "Expired",
    "Sweep",
    "format_retention",
    "newest_result",
    "parse_retention",
    "sweep",
]
