"""The CEL node health monitor: which nodes under a Job look broken. It only reads nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nvcre.cel import CELError, compile_expression

HARDWARE_FAILURE_MESSAGE = "Hardware failure detected by node health check"


def unhealthy_nodes(expression: str, nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of the nodes for which ``expression`` (over variable ``node``) is true, sorted.

    A node on which the expression cannot be evaluated (a missing field, say) is not counted as
    unhealthy: the monitor reports hardware it can see failing, never its own errors.
    """
    program = compile_expression(expression)
    failing = []
    for node in nodes:
        try:
            if program.evaluate_bool({"node": dict(node)}):
                failing.append(str(node.get("metadata", {}).get("name")))
        except CELError:
            continue
    return sorted(failing)


def merge_failed_nodes(
    existing: Iterable[Mapping[str, Any]], names: Iterable[str], reason: str, message: str
) -> list[dict[str, Any]]:
    """Add ``(name, reason)`` entries without removing any; sorted by name then reason."""
    merged: dict[tuple[str, str], dict[str, Any]] = {
        (str(e["name"]), str(e["reason"])): dict(e) for e in existing
    }
    for name in names:
        merged.setdefault((name, reason), {"name": name, "reason": reason, "message": message})
    return [merged[k] for k in sorted(merged)]
