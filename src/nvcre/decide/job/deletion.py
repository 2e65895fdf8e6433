"""When a deleted Job may let go: its pods are gone, or the drain grace has passed (pure)."""

from __future__ import annotations

from datetime import datetime

from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType, Default
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import condition_of
from nvcre.objects import Obj

_ENDED = (ConditionType.FAILED, ConditionType.HARDWARE_FAILED, ConditionType.SUCCEEDED)


def active(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def drain_expired(job: Obj, now: datetime) -> bool:
    """The grace runs from the deletion or from the Job's end, whichever is later."""
    anchors = [parse_time(job["metadata"]["deletionTimestamp"])]
    for kind in _ENDED:
        condition = condition_of(job, kind)
        if condition is not None and condition.get("status") == ConditionStatus.TRUE:
            anchors.append(parse_time(condition["lastTransitionTime"]))
    return (now - max(anchors)).total_seconds() > Default.POD_DRAIN_GRACE_SECONDS


def may_release(job: Obj, pods: list[Obj], now: datetime) -> bool:
    return not any(active(p) for p in pods) or drain_expired(job, now)
