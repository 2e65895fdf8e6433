"""Where the goodput kind's next read of a pod starts (its cursor, ``sinceTime``) and when the pod's
container ended; the read itself is the measurement shell's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from nvcre.api.v1alpha1.meta import parse_time
from nvcre.measure.goodput import PendingSave
from nvcre.objects import Obj

MAX_LOOKBACK = timedelta(hours=6)
"""A read never starts further back than this (before ``now``, or the Job's end)."""


@dataclass(frozen=True)
class Cursor:
    """Where the last read of one pod ended (in memory: a restarted controller starts again
    from the persisted progress, see :func:`since`)."""

    pod_uid: str
    last_log: datetime | None
    pending_save: PendingSave | None


def pod_start(pod: Obj) -> datetime | None:
    text = (pod.get("status") or {}).get("startTime")
    try:
        return parse_time(text) if text else None
    except ValueError:
        return None


def since(
    pod: Obj, cursor: Cursor | None, last_step: datetime | None, interval: float, end: datetime
) -> datetime | None:
    """``sinceTime`` of the next read of ``pod`` (spec 3.5): one second before the last line this
    controller read from it; else ``interval`` before the last step logged (a restarted
    controller, the terminal read); else the pod's start. Never more than :data:`MAX_LOOKBACK`
    before ``end``."""
    start = pod_start(pod)
    uid = pod["metadata"].get("uid", "")
    if cursor is not None and cursor.pod_uid == uid and cursor.last_log is not None:
        moment: datetime | None = cursor.last_log - timedelta(seconds=1)
    elif last_step is not None:
        moment = last_step - timedelta(seconds=interval)
        if start is not None:
            moment = max(moment, start)
    else:
        moment = start
    oldest = end - MAX_LOOKBACK
    return max(moment, oldest) if moment is not None else oldest


def terminated_at(pod: Obj | None, container: str | None) -> datetime | None:
    """When the pod's container (or its first terminated one) ended, from the pod status."""
    if pod is None:
        return None
    for state in (pod.get("status") or {}).get("containerStatuses") or ():
        if container and state.get("name") != container:
            continue
        finished = ((state.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if finished:
            try:
                return parse_time(finished)
            except ValueError:
                return None
    return None
