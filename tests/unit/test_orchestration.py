"""Discovery filters, capacity messages, placement and launch waves."""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import dataclass
from typing import Any

from nvcre import failednodes
from nvcre.orchestration.capacity import Exclusions, filter_capacity, no_capacity_message, requested_gpus
from nvcre.orchestration.discovery import discover
from nvcre.orchestration.placement import node_affinity, tolerations
from nvcre.orchestration.result_configmaps import (
    FAILED_NODES_KEY,
    SUCCEEDED_NODES_KEY,
    decode_failed,
    decode_succeeded,
    failed_entries,
    merge_failed,
    merge_succeeded,
    succeeded_names,
)
from nvcre.orchestration.waves import groups_to_launch


def node(
    name: str, *, gpu: bool = True, cordoned: bool = False, gpus: int | None = 8, **labels: str
) -> dict[str, Any]:
    all_labels = {"kubernetes.io/hostname": name, **labels}
    if gpu:
        all_labels["nvidia.com/gpu.present"] = "true"
    obj: dict[str, Any] = {"metadata": {"name": name, "labels": all_labels}, "spec": {}, "status": {}}
    if cordoned:
        obj["spec"]["unschedulable"] = True
        obj["spec"]["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    if gpus is not None:
        obj["status"]["allocatable"] = {"nvidia.com/gpu": str(gpus)}
    return obj


def names(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["metadata"]["name"] for n in nodes]


def test_discovery_keeps_gpu_nodes_sorted_and_reports_cordoned_ones() -> None:
    found = discover([node("b"), node("a"), node("cpu", gpu=False), node("c", cordoned=True)], None)
    assert names(found.nodes) == ["a", "b"]
    assert found.cordoned == ["c"]


def test_node_names_intersect_node_selector() -> None:
    nodes = [node("a", pool="x"), node("b", pool="y"), node("c", pool="x")]
    target = {"nodeSelector": {"pool": "x"}, "nodeNames": ["a", "b"]}
    assert names(discover(nodes, target).nodes) == ["a"]


def test_match_expressions_all_operators() -> None:
    nodes = [node("a", rack="r1"), node("b", rack="r2"), node("c")]
    assert names(
        discover(nodes, {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}).nodes
    ) == ["a"]
    assert names(
        discover(nodes, {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r1"]}]}).nodes
    ) == ["b", "c"]
    assert names(discover(nodes, {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}).nodes) == [
        "a",
        "b",
    ]
    assert names(
        discover(nodes, {"matchExpressions": [{"key": "rack", "operator": "DoesNotExist"}]}).nodes
    ) == ["c"]
    assert (
        names(
            discover(nodes, {"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["1"]}]}).nodes
        )
        == []
    )


def test_taint_selectors_require_every_taint_and_can_opt_in_cordoned_nodes() -> None:
    tainted = node("t")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "burn-in", "effect": "NoSchedule"}]
    nodes = [tainted, node("plain"), node("c", cordoned=True)]
    assert names(discover(nodes, {"taintSelectors": [{"key": "dedicated", "value": "burn-in"}]}).nodes) == [
        "t"
    ]
    assert names(discover(nodes, {"taintSelectors": [{"key": "dedicated", "value": "other"}]}).nodes) == []
    opt_in = discover(nodes, {"taintSelectors": [{"key": "node.kubernetes.io/unschedulable"}]})
    assert names(opt_in.nodes) == ["c"] and opt_in.cordoned == []


def test_requested_gpus_is_the_largest_anywhere() -> None:
    template = {"trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}}
    runtime = {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "8"}}}]}
    assert requested_gpus(template, runtime) == 8
    assert requested_gpus({"x": 1}) == 0


def test_capacity_filter_keeps_nodes_without_the_resource() -> None:
    result = filter_capacity(
        [node("a", gpus=4), node("b", gpus=8), node("c", gpus=None), node("d", gpus=0)], 8
    )
    assert names(result.kept) == ["b", "c", "d"]
    assert result.excluded == [("a", 4)]
    assert no_capacity_message(8, result.excluded) == (
        "No node can supply the 8 nvidia.com/gpu the workload requests per node; best available is 4"
    )


def test_exclusion_reason_and_shortfall_message() -> None:
    exclusions = Exclusions(["c1"], ["l1"], "h100", [("a", 4)], 8)
    assert exclusions.nodes == ["c1", "l1", "a"]
    assert exclusions.reason == (
        "1 node(s) matched the target but were unschedulable (cordoned): c1. "
        "target set has more than one GPU architecture; certified h100 only. "
        "1 node(s) matched the target but have insufficient GPU capacity, the workload requests 8 "
        "nvidia.com/gpu per node: a has 4"
    )
    assert exclusions.not_enough_nodes(4, 3) == (
        "Not enough schedulable nodes: need 4, found 3. 1 node(s) matched the target but were excluded for "
        "not being GPU architecture h100: l1. 1 node(s) matched the target but were excluded for having fewer "
        "than the 8 allocatable nvidia.com/gpu the workload requests per node: a has 4. Set nodesPerJob to 3, "
        "or narrow the target to one architecture, or lower gpusPerNode"
    )
    assert (
        Exclusions([], [], "h100", [], 8).not_enough_nodes(4, 3)
        == "Not enough schedulable nodes: need 4, found 3"
    )


def terms(affinity: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert affinity is not None
    return affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ]


def test_pinned_affinity_names_the_group_and_ands_the_target() -> None:
    target = {
        "nodeSelector": {"pool": "x", "a": "b"},
        "matchExpressions": [{"key": "rack", "operator": "Exists"}],
    }
    assert terms(node_affinity(target, group_nodes=["n1", "n2"], products=["NVIDIA-H100-80GB-HBM3", ""])) == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]},
        {"key": "a", "operator": "In", "values": ["b"]},
        {"key": "pool", "operator": "In", "values": ["x"]},
        {"key": "rack", "operator": "Exists"},
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]},
    ]


def test_unpinned_affinity_has_no_hostname_unless_node_names_were_given() -> None:
    unpinned = terms(node_affinity({"nodeSelector": {"pool": "x"}}, group_nodes=None, products=["P"]))
    assert all(t["key"] != "kubernetes.io/hostname" for t in unpinned)
    named = terms(node_affinity({"nodeNames": ["a"]}, group_nodes=None, products=[]))
    assert named == [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}]
    assert node_affinity(None, group_nodes=None, products=[]) is None


def test_duplicate_requirements_are_dropped() -> None:
    target = {
        "nodeSelector": {"k": "v"},
        "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}],
    }
    assert len(terms(node_affinity(target, group_nodes=None, products=[]))) == 1


def test_tolerations() -> None:
    selectors = {
        "taintSelectors": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, {"key": "spot"}]
    }
    assert tolerations(selectors, has_launcher=True) == [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists"},
    ]
    assert tolerations(None, has_launcher=True) == [{"operator": "Exists"}]
    assert tolerations(None, has_launcher=False) == []


@dataclass
class G:
    name: str
    phase: str
    nodes: tuple[str, ...]


def test_waves_respect_max_concurrent() -> None:
    groups = [G(f"group-{i}", "Pending", (f"n{i}",)) for i in range(6)]
    assert groups_to_launch(groups, 2) == ["group-0", "group-1"]
    assert groups_to_launch(groups, 0) == [g.name for g in groups]


def test_overflow_sharing_a_node_waits_for_the_next_wave() -> None:
    groups = [
        G("group-0", "Succeeded", ("n1", "n2")),
        G("group-1", "Pending", ("n3", "n4")),
        G("group-2-overflow", "Pending", ("n4", "n5")),
    ]
    assert groups_to_launch(groups, 0) == ["group-1"]
    groups[1].phase = "Succeeded"
    assert groups_to_launch(groups, 0) == ["group-2-overflow"]


def test_node_result_payloads_merge_and_sort() -> None:
    first = merge_succeeded(None, ["b", "a"])
    assert decode_succeeded(merge_succeeded(first, ["c", "a", " "])) == ["a", "b", "c"]
    failed = merge_failed(None, [{"name": "n2", "reason": "WorkloadFailed", "message": "boom"}])
    failed = merge_failed(
        failed,
        [
            {"name": "n1", "reason": "HardwareFailureDetected"},
            {"name": "n2", "reason": "WorkloadFailed", "message": "again"},
        ],
    )
    assert decode_failed(failed) == [
        {
            "name": "n1",
            "reason": "HardwareFailureDetected",
            "cause": "HardwareFailureDetected",
            "message": "",
        },
        {"name": "n2", "reason": "WorkloadFailed", "cause": "WorkloadFailed", "message": "boom"},
    ]


def test_a_node_result_config_map_reads_by_its_keys_and_a_hand_edited_one_reads_empty() -> None:
    failed = base64.b64encode(merge_failed(None, [{"name": "n1", "reason": "WorkloadFailed"}])).decode()
    succeeded = base64.b64encode(merge_succeeded(None, ["n2", "n3"])).decode()
    config_map = {"binaryData": {FAILED_NODES_KEY: failed, SUCCEEDED_NODES_KEY: succeeded}}
    assert [e["name"] for e in failed_entries(config_map)] == ["n1"]
    assert succeeded_names(config_map) == ["n2", "n3"]
    assert failed_entries({"binaryData": {FAILED_NODES_KEY: "not base64!"}}) == []
    assert failed_entries(None) == [] and succeeded_names({}) == []


def test_a_failed_nodes_record_speaks_the_reference_reasons() -> None:
    """Consumers match ``reason`` against the reference's three values; nvcre's cause goes beside
    it, and an entry stored before ``cause`` existed reads with its cause recovered."""
    payload = merge_failed(
        None,
        [
            failednodes.entry("n1", "BandwidthOutlier", "bus bandwidth 144.00 GB/s is below 0.8 ..."),
            failednodes.entry("n2", "JobTimedOut", "Job exceeded timeoutPerJob"),
            {"name": "n3", "reason": "JobDeleted", "message": "old form"},
        ],
    )
    decoded = json.loads(gzip.decompress(payload))
    assert [(e["name"], e["reason"], e["cause"]) for e in decoded] == [
        ("n1", "ThresholdViolation", "BandwidthOutlier"),
        ("n2", "WorkloadFailed", "JobTimedOut"),
        ("n3", "WorkloadFailed", "JobDeleted"),
    ]
    assert {e["reason"] for e in decoded} <= set(failednodes.REASONS)
