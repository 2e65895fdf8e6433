"""Which nodes a target selects (spec/controllers.md 4.4), shared by the controller and --dry-run."""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.common import TargetSpec
from nvcre.orchestration.discovery import filter_target_nodes


def node(
    name: str, *, gpu: bool = True, cordoned: bool = False, taints: Any = None, **labels: str
) -> dict[str, Any]:
    all_labels = {"nvidia.com/gpu.present": "true"} if gpu else {}
    all_labels.update({k.replace("__", "/").replace("_", "."): v for k, v in labels.items()})
    spec: dict[str, Any] = {"unschedulable": True} if cordoned else {}
    if taints:
        spec["taints"] = taints
    return {"metadata": {"name": name, "labels": all_labels}, "spec": spec}


def names(target: TargetSpec | None, nodes: list[dict[str, Any]]) -> list[str]:
    return [n["metadata"]["name"] for n in filter_target_nodes(nodes, target).nodes]


def test_gpu_nodes_only_sorted_by_name() -> None:
    nodes = [node("b"), node("cpu", gpu=False), node("a")]
    assert names(None, nodes) == ["a", "b"]


def test_match_expressions_and_node_names_intersect() -> None:
    nodes = [node("a", zone="x"), node("b", zone="y"), node("c", zone="x")]
    target = TargetSpec.model_validate(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}], "nodeNames": ["c", "b"]}
    )
    assert names(target, nodes) == ["c"]


def test_unknown_operator_excludes() -> None:
    target = TargetSpec.model_validate(
        {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}
    )
    assert names(target, [node("a", zone="2")]) == []


def test_cordoned_gpu_nodes_are_reported_not_kept() -> None:
    result = filter_target_nodes([node("a"), node("z", cordoned=True)], None)
    assert [n["metadata"]["name"] for n in result.nodes] == ["a"]
    assert result.cordoned == ["z"]


def test_taint_selector_for_unschedulable_opts_cordoned_nodes_in() -> None:
    taint = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    target = TargetSpec.model_validate({"taintSelectors": [{"key": "node.kubernetes.io/unschedulable"}]})
    nodes = [node("a"), node("z", cordoned=True, taints=taint)]
    assert names(target, nodes) == ["z"]
