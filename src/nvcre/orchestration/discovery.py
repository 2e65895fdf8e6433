"""Which nodes a target selects (spec/controllers.md 4.4), as a pure filter over Node objects.

The shell lists Nodes with the target's ``nodeSelector`` as a server-side label selector (see
``label_selector``) and passes them here; the controller and ``--dry-run`` renders share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.common import TargetSpec
from nvcre.api.v1alpha1.constants import NodeLabel


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def label_selector(target: TargetSpec | None) -> dict[str, str]:
    """The exact-match labels to list Nodes with (empty: all nodes)."""
    return dict(target.node_selector or {}) if target is not None else {}


def _expression_matches(labels: Mapping[str, str], expression: Mapping[str, Any]) -> bool:
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def _taint_matches(node: Mapping[str, Any], selector: Any) -> bool:
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") != selector.key:
            continue
        if selector.value and taint.get("value") != selector.value:
            continue
        if selector.effect and taint.get("effect") != selector.effect:
            continue
        return True
    return False


@dataclass(frozen=True)
class DiscoveredNodes:
    nodes: list[Mapping[str, Any]]
    """Schedulable GPU nodes of the target, sorted by name."""
    cordoned: list[str]
    """Names of GPU nodes the target matched but that are cordoned (sorted)."""


def filter_target_nodes(nodes: Iterable[Mapping[str, Any]], target: TargetSpec | None) -> DiscoveredNodes:
    """Apply the target to nodes already listed by its ``nodeSelector``.

    Keep nodes matching every ``matchExpressions`` entry (In, NotIn, Exists, DoesNotExist; any
    other operator excludes), then only ``nodeNames`` when given, then nodes carrying every
    ``taintSelectors`` taint; drop cordoned nodes (reported when they are GPU nodes) unless a
    taint selector opts ``node.kubernetes.io/unschedulable`` in; keep GPU nodes only.
    """
    selector = label_selector(target)
    expressions: Sequence[Mapping[str, Any]] = (target.match_expressions or []) if target else []
    names = set(target.node_names or []) if target else set()
    taints = (target.taint_selectors or []) if target else []
    keep_cordoned = any(t.key == NodeLabel.UNSCHEDULABLE_TAINT for t in taints)
    kept: list[Mapping[str, Any]] = []
    cordoned: list[str] = []
    for node in nodes:
        labels = _labels(node)
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        if not all(_expression_matches(labels, e) for e in expressions):
            continue
        if names and _name(node) not in names:
            continue
        if not all(_taint_matches(node, t) for t in taints):
            continue
        gpu = labels.get(NodeLabel.GPU_PRESENT) == "true"
        if (node.get("spec") or {}).get("unschedulable") is True and not keep_cordoned:
            if gpu:
                cordoned.append(_name(node))
            continue
        if gpu:
            kept.append(node)
    kept.sort(key=lambda n: _name(n).encode())
    return DiscoveredNodes(kept, sorted(cordoned, key=str.encode))
