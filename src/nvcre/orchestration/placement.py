"""Where a group's pods may run: node affinity (Pinned or Unpinned) and tolerations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nvcre.api.v1alpha1.constants import NodeLabel

HOSTNAME = NodeLabel.HOSTNAME


class PlacementError(ValueError):
    pass


def check_placement(placement: str | None, *, diagnose: bool, strict_domain: bool) -> None:
    if placement != "Unpinned":
        return
    if diagnose:
        raise PlacementError(
            "orchestration.placement: Unpinned is incompatible with orchestration.diagnose: "
            "diagnose runs many screening jobs, Unpinned runs exactly one job; drop one of the two"
        )
    if strict_domain:
        raise PlacementError(
            "orchestration.placement: Unpinned is incompatible with orchestration.topology.strictDomain: "
            "strictDomain runs one job per domain, Unpinned runs exactly one job; drop one of the two"
        )


def _dedupe(requirements: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for requirement in requirements:
        if requirement not in seen:
            seen.append(requirement)
    return seen


def node_affinity(
    target: Mapping[str, Any] | None,
    *,
    group_nodes: Sequence[str] | None,
    products: Iterable[str],
) -> dict[str, Any] | None:
    """The required node affinity of a group's pods, or None when nothing constrains them.

    Pinned (``group_nodes`` given): hostname In the group's nodes. Both modes: every target
    nodeSelector entry as ``key In [value]`` (keys sorted), the target's matchExpressions, and
    the discovered GPU products — all ANDed in one term. Unpinned with ``nodeNames``: hostname
    In those names.
    """
    target = target or {}
    requirements: list[dict[str, Any]] = []
    if group_nodes is not None:
        requirements.append({"key": HOSTNAME, "operator": "In", "values": list(group_nodes)})
    elif target.get("nodeNames"):
        requirements.append({"key": HOSTNAME, "operator": "In", "values": list(target["nodeNames"])})
    for key, value in sorted((target.get("nodeSelector") or {}).items()):
        requirements.append({"key": key, "operator": "In", "values": [value]})
    requirements.extend(dict(e) for e in target.get("matchExpressions") or ())
    distinct = sorted({p for p in products if p})
    if distinct:
        requirements.append({"key": NodeLabel.GPU_PRODUCT, "operator": "In", "values": distinct})
    requirements = _dedupe(requirements)
    if not requirements:
        return None
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": requirements}]
            }
        }
    }


def tolerations(target: Mapping[str, Any] | None, *, has_launcher: bool) -> list[dict[str, Any]]:
    """One toleration per taint selector; MPI without selectors tolerates everything."""
    selectors = (target or {}).get("taintSelectors") or ()
    if selectors:
        result = []
        for selector in selectors:
            toleration: dict[str, Any] = {"key": selector["key"]}
            if selector.get("value"):
                toleration.update(operator="Equal", value=selector["value"])
            else:
                toleration["operator"] = "Exists"
            if selector.get("effect"):
                toleration["effect"] = selector["effect"]
            result.append(toleration)
        return result
    return [{"operator": "Exists"}] if has_launcher else []
