"""How far an nccl-tests run has got, and when it has stopped getting further (pure).

nccl-tests prints one table row per message size as that size finishes. A healthy sweep's rows
come at a pace its own rows announce: the time between the last two rows, scaled by how much
larger the next size is (``-f 2`` doubles it, and a bandwidth-bound row's time grows with its
size). A run that prints no row for :data:`STALL_ROW_MULTIPLE` times that, and at least
:data:`STALL_MIN_SECONDS`, has stopped making progress (a hung collective, a GPU lost to an XID,
a peer gone): its Job fails ``WorkloadStalled`` long before ``timeoutPerJob``. Before its first
row a run has :data:`STARTUP_STALL_SECONDS` (MPI bootstrap and NCCL initialisation included).

The evidence is a read: ``status.progress.readTime`` is when the measurement last read the log
successfully, so a log that cannot be read never counts as a silent one.

It also counts complete sweeps (``-N`` cycles print the sizes again from the smallest: a row no
larger than the one before starts a new sweep, so the one before is complete) and keeps the peak
bus bandwidth of the last :data:`PEAKS_KEPT`, which the early verdict
(:mod:`nvcre.measure.early`) reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nvcre.api.v1alpha1.meta import format_time, parse_time

STALL_ROW_MULTIPLE = 10
"""A run is stalled after this many times the expected time of its next row without one."""
STALL_MIN_SECONDS = 120.0
"""... and never before this long without a row (small sizes come in milliseconds)."""
STARTUP_STALL_SECONDS = 600.0
"""The longest a run may take from its workload starting to its first row."""
PEAKS_KEPT = 2
"""Complete sweeps whose peak bus bandwidth the status keeps."""


@dataclass(frozen=True)
class Row:
    """One table row as it was logged: the kubelet time of its line, its message size and its
    out-of-place bus bandwidth (GB/s)."""

    at: datetime
    size: int
    bus_bw: float = 0.0


def advance(progress: Mapping[str, Any] | None, rows: Sequence[Row], read_at: datetime) -> dict[str, Any]:
    """``status.progress`` after a successful read at ``read_at`` that found ``rows`` (new, in
    log order): the newest row, the expected time of the next one, the sweeps, and ``readTime``."""
    out = dict(progress or {})
    last_at = _time(out.get("lastRowTime"))
    last_size = int(out.get("lastRowBytes") or 0)
    expected = _number(out.get("expectedRowSec"))
    sweeps = int(out.get("sweeps") or 0)
    peaks = list(out.get("sweepPeaksGBps") or ())
    peak = _number(out.get("sweepPeakGBps"))
    for row in rows:
        if last_at is not None:
            gap = max((row.at - last_at).total_seconds(), 0.0)
            growth = row.size / last_size if last_size and row.size > last_size else 1.0
            expected = gap * growth
            if row.size <= last_size and peak is not None:  # a new sweep: the one before is complete
                sweeps += 1
                peaks = [*peaks, f"{peak:.2f}"][-PEAKS_KEPT:]
                peak = None
        peak = row.bus_bw if peak is None else max(peak, row.bus_bw)
        last_at, last_size = row.at, row.size
    if rows:
        out["sweepPeakGBps"] = f"{peak:.2f}"
        if sweeps:
            out["sweeps"], out["sweepPeaksGBps"] = sweeps, peaks
        out["rows"] = int(out.get("rows") or 0) + len(rows)
        out["lastRowTime"] = _precise(rows[-1].at)
        out["lastRowBytes"] = last_size
        if expected is not None:
            out["expectedRowSec"] = f"{expected:.3f}"
    out["readTime"] = format_time(read_at)
    return out


def stalled(progress: Mapping[str, Any] | None, started: datetime, slack: float) -> str | None:
    """Why the run counts as stalled at its last read, or None. ``started``: when its workload
    started running; ``slack``: allowance for the sampling (one sample interval)."""
    progress = progress or {}
    read_at = _time(progress.get("readTime"))
    if read_at is None:
        return None
    last_at = _time(progress.get("lastRowTime"))
    if last_at is None:
        limit = STARTUP_STALL_SECONDS + slack
        waited = (read_at - started).total_seconds()
        if waited <= limit:
            return None
        return f"Workload stalled: no nccl-tests result row within {limit:.0f}s of the workload starting"
    expected = _number(progress.get("expectedRowSec")) or 0.0
    limit = max(STALL_MIN_SECONDS, STALL_ROW_MULTIPLE * expected) + slack
    silent = (read_at - max(last_at, started)).total_seconds()
    if silent <= limit:
        return None
    size = int(progress.get("lastRowBytes") or 0)
    return (
        f"Workload stalled: no nccl-tests result row for {silent:.0f}s after the {size}-byte row "
        f"at {format_time(last_at)} (limit {limit:.0f}s: {STALL_ROW_MULTIPLE} times the "
        f"{expected:.1f}s its next row should take, at least {STALL_MIN_SECONDS:.0f}s, plus "
        f"{slack:.0f}s for sampling)"
    )


def _precise(moment: datetime) -> str:
    """RFC 3339 with microseconds: row gaps are often well under a second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time(text: Any) -> datetime | None:
    try:
        return parse_time(str(text)) if text else None
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
