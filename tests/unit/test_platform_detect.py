"""Platform from providerID, architecture from the product label, majority vote and its tie rule."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvcre.api.v1alpha1.constants import EventReason, EventType
from nvcre.platform import (
    GPU_ARCHITECTURES,
    PLATFORMS,
    HeterogeneousPlatformError,
    architecture_from_node_selector,
    check_architecture,
    check_platform,
    detect_gpu_architecture,
    detect_platform,
    gpus_from_resource_slices,
    node_platform,
    parse_product,
    products_from_resource_slices,
    synthetic_nodes,
    topology_domain_count,
)


def node(
    name: str,
    provider_id: str = "",
    labels: dict[str, str] | None = None,
    product: str | None = None,
    allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if product is not None:
        all_labels["nvidia.com/gpu.product"] = product
    return {
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"providerID": provider_id} if provider_id else {},
        "status": {"allocatable": allocatable or {}},
    }


# --- platform ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider_id", "labels", "expected"),
    [
        ("aws:///us-east-1a/i-1", {}, "aws"),
        ("gce://p/z/n", {}, "gcp"),
        ("azure:///subscriptions/x/resourceGroups/y", {}, "azure"),
        ("ocid1.instance.oc1.iad.abc", {}, "oci"),
        ("nscale://x", {}, "nscale"),
        ("openstack://x", {}, "onprem"),
        ("metal3://uuid", {}, "mistral"),
        ("kubevirt://x", {"node-role.together.ai/worker": ""}, "togetherai"),
        ("kubevirt://x", {}, "onprem"),
        ("", {"kubernetes.io/hostname": "gpu-forge-01"}, "forge"),
        ("", {"nke.nvidia.com/site-name": "s1"}, "forge"),
        ("", {"nke.nvidia.com/site-name": ""}, "forge"),
        ("", {}, "onprem"),
        ("", {"kubernetes.io/hostname": "gpu-node-01"}, "onprem"),
        ("vsphere://x", {}, "onprem"),
        ("kind://docker/kind/kind-worker", {}, "onprem"),
        # prefixes are case-sensitive and anchored
        ("AWS:///us-east-1a/i-1", {}, "onprem"),
        ("x-aws://", {}, "onprem"),
        # a providerID wins over the forge labels
        ("aws:///z/i-1", {"kubernetes.io/hostname": "forge-1"}, "aws"),
        # openstack is on-prem even with nscale's resource (newest reference)
        ("openstack://x", {}, "onprem"),
    ],
)
def test_node_platform_rules(provider_id: str, labels: dict[str, str], expected: str) -> None:
    assert node_platform(node("n", provider_id, labels)) == expected


def test_forge_hostname_match_is_case_sensitive() -> None:
    assert node_platform(node("n", "", {"kubernetes.io/hostname": "GPU-FORGE-01"})) == "onprem"


def test_openstack_with_nscale_resource_is_onprem() -> None:
    n = node("n", "openstack://x", allocatable={"nscale.com/rdmashare": "8"})
    assert node_platform(n) == "onprem"


def test_cluster_platform_is_first_node_by_name() -> None:
    nodes = [node("b", "gce://p/z/b"), node("a", "aws:///z/i-a")]
    detection = detect_platform(nodes)
    assert detection.platform == "aws"
    assert detection.heterogeneous
    assert detection.message == "heterogeneous platforms detected: map[aws:1 gcp:1]"
    with pytest.raises(
        HeterogeneousPlatformError, match=r"^heterogeneous platforms detected: map\[aws:1 gcp:1\]$"
    ):
        detection.require_consistent()


def test_platform_counts_in_message_are_sorted_by_platform() -> None:
    nodes = [node("a", "gce://1"), node("b", "aws:///1"), node("c", "aws:///2")]
    assert detect_platform(nodes).message == "heterogeneous platforms detected: map[aws:2 gcp:1]"


def test_empty_node_list_is_onprem() -> None:
    detection = detect_platform([])
    assert detection.platform == "onprem"
    assert detection.require_consistent() == "onprem"
    assert detection.message == ""


def test_consistent_platform() -> None:
    detection = detect_platform([node("a", "aws:///1"), node("b", "aws:///2")])
    assert not detection.heterogeneous
    assert detection.require_consistent() == "aws"


# --- product labels ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "arch"),
    [
        ("NVIDIA-H100-80GB-HBM3", "h100"),
        ("NVIDIA-H100-NVL", "h100"),
        ("NVIDIA-H200", "h200"),
        ("NVIDIA-H200-141GB-HBM3e", "h200"),
        ("NVIDIA-B200", "b200"),
        ("NVIDIA-B300-SXM6-AC", "b300"),
        ("NVIDIA-GB200", "gb200"),
        ("NVIDIA-GB200-NVL72", "gb200"),
        ("NVIDIA-GB300", "gb300"),
        ("NVIDIA-GB300-NVL72", "gb300"),
        ("NVIDIA-A100-SXM4-40GB", "a100"),
        ("NVIDIA-L40", "l40"),
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "rtxpro6000"),
        ("NVIDIA-rtx-pro-6000-blackwell", "rtxpro6000"),
        ("Tesla-T4", "tesla"),
        ("", ""),
        ("nvidia-H100", "nvidia"),
        ("-H100", "-h100"),
    ],
)
def test_parse_product(label: str, arch: str) -> None:
    assert parse_product(label) == arch


def test_architecture_from_node_selector() -> None:
    assert architecture_from_node_selector({"nvidia.com/gpu.product": "NVIDIA-GB200"}) == "gb200"
    assert architecture_from_node_selector({"other": "x"}) == ""
    assert architecture_from_node_selector(None) == ""


# --- majority vote -----------------------------------------------------------------------------


def test_majority_wins_and_minority_and_unlabeled_are_excluded() -> None:
    nodes = [
        node("a", product="NVIDIA-H100-80GB-HBM3"),
        node("b", product="NVIDIA-GB200"),
        node("c", product="NVIDIA-GB200-NVL72"),
        node("d"),
    ]
    detection = detect_gpu_architecture(nodes)
    assert detection.architecture == "gb200"
    assert detection.nodes == ("b", "c")
    assert detection.excluded == ("a", "d")
    assert detection.unlabeled == ("d",)
    assert detection.votes == {"h100": 1, "gb200": 2}
    assert detection.message == "Filtered 2/4 nodes to primary GPU architecture gb200; excluded: a, d"
    (event,) = detection.events
    assert (event.type, event.reason) == (EventType.WARNING, EventReason.HETEROGENEOUS_GPU)
    assert [n["metadata"]["name"] for n in detection.filter(nodes)] == ["b", "c"]


def test_tie_goes_to_architecture_of_first_node_by_name() -> None:
    detection = detect_gpu_architecture([node("b", product="NVIDIA-H100"), node("a", product="NVIDIA-GB200")])
    assert detection.architecture == "gb200"
    assert detection.excluded == ("b",)


def test_tie_uses_earliest_node_not_list_order() -> None:
    # h100 has the earliest node (a) even though gb200 appears first in the input.
    nodes = [
        node("z", product="NVIDIA-GB200"),
        node("c", product="NVIDIA-GB200"),
        node("a", product="NVIDIA-H100"),
        node("d", product="NVIDIA-H100"),
    ]
    assert detect_gpu_architecture(nodes).architecture == "h100"


def test_majority_is_not_first_node() -> None:
    """The upstream bug: [h100, a100, a100, a100] certified h100."""
    nodes = [
        node("node-0", product="NVIDIA-H100"),
        node("node-1", product="NVIDIA-A100-SXM4-40GB"),
        node("node-2", product="NVIDIA-A100-SXM4-40GB"),
        node("node-3", product="NVIDIA-A100-SXM4-40GB"),
    ]
    detection = detect_gpu_architecture(nodes)
    assert detection.architecture == "a100"
    assert detection.excluded == ("node-0",)
    assert detect_gpu_architecture(list(reversed(nodes))) == detection


def test_unlabeled_nodes_do_not_vote() -> None:
    nodes = [node("a"), node("b"), node("c"), node("d", product="NVIDIA-L40S")]
    detection = detect_gpu_architecture(nodes)
    assert detection.architecture == "l40s"
    assert detection.nodes == ("d",)
    assert detection.excluded == ("a", "b", "c")


def test_all_unlabeled_is_unknown_and_keeps_every_node() -> None:
    detection = detect_gpu_architecture([node("b"), node("a")])
    assert detection.architecture == "unknown"
    assert detection.nodes == ("a", "b")
    assert detection.excluded == ()
    assert detection.message == ""
    assert detection.events == ()


def test_homogeneous_keeps_all_without_warning() -> None:
    detection = detect_gpu_architecture(
        [node("a", product="NVIDIA-H100"), node("b", product="NVIDIA-H100-NVL")]
    )
    assert detection.architecture == "h100"
    assert not detection.heterogeneous
    assert detection.events == ()


def test_empty_is_unknown() -> None:
    assert detect_gpu_architecture([]).architecture == "unknown"


_PRODUCTS = st.sampled_from(["NVIDIA-H100", "NVIDIA-GB200", "NVIDIA-A100-SXM4-40GB", None])


@given(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4), _PRODUCTS, max_size=8))
def test_vote_is_order_independent_and_partitions_nodes(products: dict[str, str | None]) -> None:
    nodes = [node(name, product=product) for name, product in products.items()]
    detection = detect_gpu_architecture(nodes)
    assert detect_gpu_architecture(list(reversed(nodes))) == detection
    assert sorted(detection.nodes + detection.excluded) == sorted(products)
    labeled = {name: parse_product(p) for name, p in products.items() if p}
    if not labeled:
        assert detection.architecture == "unknown"
        return
    counts = {arch: list(labeled.values()).count(arch) for arch in set(labeled.values())}
    assert counts[detection.architecture] == max(counts.values())
    tied = [arch for arch, count in counts.items() if count == max(counts.values())]
    first = min((name for name, arch in labeled.items() if arch in tied), key=str.encode)
    assert detection.architecture == labeled[first]


# --- topology domains --------------------------------------------------------------------------


def test_domain_count() -> None:
    nodes = [
        node("a", labels={"nvidia.com/gpu.clique": "c0"}),
        node("b", labels={"nvidia.com/gpu.clique": "c1"}),
        node("c", labels={"nvidia.com/gpu.clique": "c1"}),
        node("d", labels={"nvidia.com/gpu.clique": ""}),
        node("e"),
    ]
    assert topology_domain_count(nodes, "nvidia.com/gpu.clique") == 2
    assert topology_domain_count(nodes, None) == 0
    assert topology_domain_count([], "nvidia.com/gpu.clique") == 0


# --- synthetic nodes round-trip through detection ----------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("arch", GPU_ARCHITECTURES)
def test_synthetic_nodes_detect_back(platform: str, arch: str) -> None:
    nodes = synthetic_nodes(platform, arch, count=2)
    assert detect_platform(nodes).require_consistent() == platform
    detection = detect_gpu_architecture(nodes)
    assert detection.architecture == arch
    assert detection.excluded == ()


def test_synthetic_node_gpu_counts_and_labels() -> None:
    (gb,) = synthetic_nodes("aws", "gb200", labels={"team": "a", "nvidia.com/gpu.product": "NVIDIA-H100"})
    assert gb["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert gb["metadata"]["labels"]["team"] == "a"
    assert gb["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-GB200"
    assert gb["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
    (h,) = synthetic_nodes("onprem", "h100")
    assert h["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    (two,) = synthetic_nodes("onprem", "h100", gpus_per_node=2)
    assert two["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    (oci,) = synthetic_nodes("oci", "l40s")
    assert oci["status"]["allocatable"]["nvidia.com/gpu"] == "4"


def test_check_platform_lists_valid_names_in_order() -> None:
    assert check_platform("aws") == "aws"
    with pytest.raises(ValueError) as error:
        check_platform("bogus")
    assert str(error.value) == (
        'invalid --platform "bogus": must be one of aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale'
    )


def test_check_architecture_accepts_short_and_product_names() -> None:
    assert check_architecture("gb300") == "gb300"
    assert check_architecture("NVIDIA-GB300") == "gb300"
    assert check_architecture("NVIDIA-H100-80GB-HBM3") == "h100"
    with pytest.raises(ValueError) as error:
        check_architecture("gb2OO")
    assert str(error.value) == (
        'invalid --gpu-arch "gb2OO": must be one of a100, b200, b300, gb200, gb300, h100, h200, l40, l40s, rtxpro6000'
    )
    with pytest.raises(ValueError):
        check_architecture("Tesla-T4")


# --- DRA ResourceSlices ------------------------------------------------------------------------


def resource_slice(
    node_name: str, *devices: dict[str, Any], driver: str = "gpu.nvidia.com"
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "spec": {"driver": driver, "nodeName": node_name, "devices": list(devices)},
    }


def gpu_device(name: str, product: str, kind: str = "gpu", beta: bool = False) -> dict[str, Any]:
    attributes = {"productName": {"string": product}, "type": {"string": kind}}
    return (
        {"name": name, "basic": {"attributes": attributes}}
        if beta
        else {"name": name, "attributes": attributes}
    )


def test_products_and_counts_from_resource_slices() -> None:
    slices = [
        resource_slice(
            "a", gpu_device("gpu-0", "NVIDIA H100 80GB HBM3"), gpu_device("gpu-1", "NVIDIA H100 80GB HBM3")
        ),
        resource_slice("a", gpu_device("mig-0", "NVIDIA H100 80GB HBM3", kind="mig")),
        resource_slice("b", gpu_device("gpu-0", "NVIDIA GB200", beta=True)),
        resource_slice("c", gpu_device("nic-0", "ConnectX-7"), driver="rdma.example.com"),
    ]
    assert products_from_resource_slices(slices) == {"a": "NVIDIA-H100-80GB-HBM3", "b": "NVIDIA-GB200"}
    assert gpus_from_resource_slices(slices) == {"a": 2, "b": 1}


def test_dra_products_vote_for_unlabelled_nodes_only() -> None:
    nodes = [node("a"), node("b"), node("c", product="NVIDIA-H100")]
    products = {"a": "NVIDIA-GB200", "b": "NVIDIA-GB200", "c": "NVIDIA-GB200"}
    detection = detect_gpu_architecture(nodes, products)
    assert detection.architecture == "gb200"
    assert detection.nodes == ("a", "b")
    assert detection.excluded == ("c",)
    assert detection.unlabeled == ()
    assert detect_gpu_architecture(nodes).architecture == "h100"


def test_heterogeneous_platform_reason() -> None:
    assert HeterogeneousPlatformError.reason == "HeterogeneousPlatform"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_synthetic_nodes_ignore_selector_labels_that_would_change_the_platform(platform: str) -> None:
    labels = {"nke.nvidia.com/site-name": "s1", "node-role.together.ai/worker": "", "team": "a"}
    nodes = synthetic_nodes(platform, "h100", labels=labels)
    assert detect_platform(nodes).platform == platform
    assert nodes[0]["metadata"]["labels"]["team"] == "a"


def test_read_only_mappings_are_read_like_dicts() -> None:
    plain = node("b", "aws://x", product="NVIDIA-H100-80GB-HBM3")
    frozen = MappingProxyType(
        {
            "metadata": MappingProxyType(
                {"name": "a", "labels": MappingProxyType({"nvidia.com/gpu.product": "NVIDIA-GB200"})}
            ),
            "spec": MappingProxyType({"providerID": "gce://y"}),
        }
    )
    assert detect_platform([plain, frozen]).counts == {"aws": 1, "gcp": 1}
    assert detect_platform([plain, frozen]).platform == "gcp"
    detection = detect_gpu_architecture([plain, frozen])
    assert (detection.architecture, detection.nodes, detection.excluded) == ("gb200", ("a",), ("b",))
    assert detection.filter([plain, frozen]) == [frozen]


def test_a_section_of_the_wrong_type_reads_as_empty() -> None:
    odd: dict[str, Any] = {"metadata": ["not", "a", "map"], "spec": "aws://x"}
    assert detect_platform([odd]).platform == "onprem"
    assert detect_gpu_architecture([odd]).nodes == ("",)
