"""The CEL node health monitor: which nodes under a Job look broken. It only reads nodes."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.limits import HEALTH_EXPRESSION_MAX_STEPS
from nvcre.cel import CELError, compile_expression

HARDWARE_FAILURE_MESSAGE = "Hardware failure detected by node health check"
EXPRESSION_FAULTS = frozenset({"compile", "type", "budget"})
"""``CELError`` kinds that are the expression's fault, whatever the node."""


_DEFAULTS: tuple[tuple[str, str, Any], ...] = (
    ("metadata", "labels", {}),
    ("metadata", "annotations", {}),
    ("spec", "taints", []),
    ("spec", "unschedulable", False),
    ("status", "conditions", []),
    ("status", "addresses", []),
    ("status", "capacity", {}),
    ("status", "allocatable", {}),
)
"""Fields an expression may use on any node (spec/measurements.md 5.1): absent ones are filled in."""


def with_defaults(node: Mapping[str, Any]) -> dict[str, Any]:
    """The node as the expression sees it: a copy with every field of ``_DEFAULTS`` present."""
    out = copy.deepcopy(dict(node))
    for section, name, default in _DEFAULTS:
        part = out.get(section)
        if not isinstance(part, dict):
            part = out[section] = {}
        if part.get(name) is None:
            part[name] = copy.deepcopy(default)
    return out


def monitored_nodes(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The nodes the monitor looks at: those of the Job's pods that are Running or Pending."""
    return sorted(
        {
            str(pod["spec"]["nodeName"])
            for pod in pods
            if (pod.get("spec") or {}).get("nodeName")
            and (pod.get("status") or {}).get("phase") in ("Running", "Pending")
        }
    )


@dataclass(frozen=True)
class HealthVerdict:
    failing: list[str]
    """Names of the nodes for which the expression is true, sorted."""
    errors: dict[str, str]
    """Nodes the expression could not be evaluated on, with why; they count as healthy."""


def unhealthy_nodes(expression: str, nodes: Iterable[Mapping[str, Any]]) -> HealthVerdict:
    """Evaluate ``expression`` (over variable ``node``, with defaults) on every node.

    A node on which the expression fails anyway (a field outside the defaults, a missing key) is
    counted healthy and its error returned for the caller to log: the monitor reports hardware
    it sees failing, never its own errors. Raises ``CELError`` when the expression itself is
    unusable: it does not compile, returns something other than a bool, or exceeds its
    evaluation budget (then no further node is evaluated).
    """
    program = compile_expression(expression)
    failing, errors = [], {}
    for node in nodes:
        name = str(node.get("metadata", {}).get("name"))
        try:
            if program.evaluate_bool({"node": with_defaults(node)}, steps=HEALTH_EXPRESSION_MAX_STEPS):
                failing.append(name)
        except CELError as error:
            if error.kind in EXPRESSION_FAULTS:
                raise
            errors[name] = str(error)
    return HealthVerdict(sorted(failing), errors)
