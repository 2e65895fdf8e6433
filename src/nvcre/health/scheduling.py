"""Whether a workload's pods are stuck unschedulable (not merely gated), and why."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Blocked:
    pod: str
    message: str


def unschedulable(pods: Iterable[Mapping[str, Any]]) -> Blocked | None:
    """The first pod (by name) with ``PodScheduled=False`` and reason ``Unschedulable``.

    ``SchedulingGated`` pods are waiting on purpose (a queue admits them) and do not count.
    """
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        if (pod.get("status") or {}).get("phase") not in (None, "Pending"):
            continue
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
            ):
                return Blocked(str(pod["metadata"]["name"]), str(condition.get("message") or "Unschedulable"))
    return None


def failed_pod(pods: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """(pod, terminated container state) of the pod that failed, OOMKilled preferred."""
    candidates = []
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        for status in (pod.get("status") or {}).get("containerStatuses") or ():
            state = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get(
                "terminated"
            )
            if state and state.get("exitCode", 0) != 0:
                candidates.append((pod, {**state, "container": status.get("name")}))
    if not candidates:
        return None
    candidates.sort(key=lambda c: c[1].get("reason") != "OOMKilled")
    return candidates[0]
