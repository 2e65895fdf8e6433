"""Target-node discovery: the filters of a Workflow's target, applied to plain Node dicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.platform.dra import GPUInventory

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

Node = Mapping[str, Any]


def name_of(node: Node) -> str:
    return str(node.get("metadata", {}).get("name", ""))


def labels_of(node: Node) -> dict[str, str]:
    return dict(node.get("metadata", {}).get("labels") or {})


def expression_holds(labels: Mapping[str, str], expression: Mapping[str, Any]) -> bool:
    """Whether ``labels`` satisfy one label-selector requirement (In, NotIn, Exists, DoesNotExist)."""
    key, operator = expression.get("key", ""), expression.get("operator", "")
    values = list(expression.get("values") or ())
    match operator:
        case "In":
            return key in labels and labels[key] in values
        case "NotIn":
            return key not in labels or labels[key] not in values
        case "Exists":
            return key in labels
        case "DoesNotExist":
            return key not in labels
    return False


def _carries(node: Node, selector: Mapping[str, Any]) -> bool:
    for taint in node.get("spec", {}).get("taints") or ():
        if taint.get("key") != selector.get("key"):
            continue
        if selector.get("value") and taint.get("value") != selector["value"]:
            continue
        if selector.get("effect") and taint.get("effect") != selector["effect"]:
            continue
        return True
    return False


def matches_target(node: Node, target: Mapping[str, Any] | None) -> bool:
    """nodeSelector AND matchExpressions AND nodeNames AND taintSelectors."""
    if not target:
        return True
    labels = labels_of(node)
    if any(labels.get(k) != v for k, v in (target.get("nodeSelector") or {}).items()):
        return False
    if not all(expression_holds(labels, e) for e in target.get("matchExpressions") or ()):
        return False
    names = target.get("nodeNames") or ()
    if names and name_of(node) not in names:
        return False
    return all(_carries(node, s) for s in target.get("taintSelectors") or ())


def cordoned_opt_in(target: Mapping[str, Any] | None) -> bool:
    """Listing the unschedulable taint in taintSelectors keeps cordoned nodes in the run."""
    return any(s.get("key") == UNSCHEDULABLE_TAINT for s in (target or {}).get("taintSelectors") or ())


@dataclass(frozen=True)
class Discovery:
    nodes: list[dict[str, Any]]
    """Eligible GPU nodes, sorted by name."""
    cordoned: list[str]
    """GPU nodes that matched the target but are cordoned, sorted."""


def is_gpu_node(node: Node, dra: GPUInventory | None = None) -> bool:
    """Labelled ``nvidia.com/gpu.present=true`` by the GPU Operator, or, on a DRA-only stack, with
    full GPUs in the NVIDIA DRA driver's ResourceSlices."""
    return labels_of(node).get(NodeLabel.GPU_PRESENT) == "true" or (
        dra is not None and dra.has_gpus(name_of(node))
    )


def discover(
    all_nodes: Iterable[Node], target: Mapping[str, Any] | None, dra: GPUInventory | None = None
) -> Discovery:
    """The target's GPU nodes (see :func:`is_gpu_node`; ``dra`` is what the cluster's ResourceSlices
    publish), cordoned ones apart."""
    keep_cordoned = cordoned_opt_in(target)
    eligible: list[dict[str, Any]] = []
    cordoned: list[str] = []
    for node in all_nodes:
        if not matches_target(node, target):
            continue
        gpu = is_gpu_node(node, dra)
        if node.get("spec", {}).get("unschedulable") and not keep_cordoned:
            if gpu:
                cordoned.append(name_of(node))
            continue
        if gpu:
            eligible.append(dict(node))
    eligible.sort(key=name_of)
    return Discovery(eligible, sorted(cordoned))
