"""Node health of a running Job (spec/measurements.md 5.1) and which Node changes matter (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import ConditionType, FailedNodeReason, FailureCause
from nvcre.cel import CELError
from nvcre.conditions import condition_true
from nvcre.health.nodes import HARDWARE_FAILURE_MESSAGE, monitored_nodes, unhealthy_nodes
from nvcre.objects import Obj, StatusChange

NodeLookup = Callable[[str], Obj | None]


@dataclass(frozen=True)
class HardwareFailure:
    """Set ``HardwareFailed=True`` with ``message``, ``change`` merging the failing nodes."""

    message: str
    change: StatusChange
    first: bool
    """The condition flips to True now (the Warning event is emitted once)."""


def invalid_expression_message(error: CELError) -> str:
    """The Warning event of an unusable expression: why, and that the nodes go unjudged."""
    return f"nodeHealthMonitor.cel.expression: {error.error}; node health is not monitored"


@dataclass(frozen=True)
class HealthCheck:
    update: HardwareFailure | None
    errors: dict[str, str]
    """Nodes the expression failed on (logged; they count as healthy)."""


def nodes_to_check(pods: list[Obj], node: NodeLookup) -> list[Obj]:
    """The Node objects of the Job's Running and Pending pods (those the monitor judges)."""
    return [n for n in (node(name) for name in monitored_nodes(pods)) if n is not None]


def check(job: Obj, nodes: list[Obj]) -> HealthCheck:
    """Evaluate the Job's CEL monitor on ``nodes`` (:func:`nodes_to_check`).

    Raises ``CELError`` when the expression is unusable (it does not compile, is not boolean or
    exceeds its evaluation budget): the caller reports it as ``InvalidNodeHealthExpression``,
    and no condition changes.
    """
    expression = job["spec"]["nodeHealthMonitor"]["cel"]["expression"]
    verdict = unhealthy_nodes(expression, nodes)
    reason = FailedNodeReason.HARDWARE_FAILURE_DETECTED
    known = {(e["name"], e["reason"]) for e in (job.get("status") or {}).get("failedNodes") or ()}
    if all((name, reason) in known for name in verdict.failing):
        return HealthCheck(None, verdict.errors)
    every = sorted({n for n, r in known if r == reason} | set(verdict.failing))
    failing = verdict.failing

    def change(status: dict[str, Any]) -> None:
        status["failedNodes"] = failednodes.merge(
            status.get("failedNodes") or [],
            failednodes.entries(failing, FailureCause.HARDWARE_FAILURE_DETECTED, HARDWARE_FAILURE_MESSAGE),
        )

    message = f"Hardware failure detected on node(s): [{' '.join(every)}]"
    first = not condition_true(job, ConditionType.HARDWARE_FAILED)
    return HealthCheck(HardwareFailure(message, change, first), verdict.errors)


def _conditions(node: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """A node's conditions as the monitor judges them: without heartbeat or transition times."""
    return sorted(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
        for c in (node.get("status") or {}).get("conditions") or ()
    )


def node_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """A Node event may change a Job's health or scheduling verdict (spec 8.7): a new node, or
    changed labels, taints, cordon or conditions. A kubelet heartbeat changes none of them."""
    if old is None:
        return True
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    return (
        (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels")
        or old_spec.get("taints") != new_spec.get("taints")
        or bool(old_spec.get("unschedulable")) != bool(new_spec.get("unschedulable"))
        or _conditions(old) != _conditions(new)
    )
