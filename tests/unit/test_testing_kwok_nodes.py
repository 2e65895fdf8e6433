"""Fake GPU node objects, kwok stage files and CRI log formatting (pure; no cluster)."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest
import yaml

import nvcre.render
from nvcre.platform.detect import node_architecture, node_platform, topology_domain_count
from nvcre.platform.nic import detect_nic_resource
from nvcre.sandbox.runner import HEARTBEAT_PAUSED
from nvcre.testing.kwok import (
    NODE_ANNOTATION,
    PHASE_ANNOTATION,
    after_last_entry,
    cri_log_lines,
    stage_documents,
)
from nvcre.testing.nodes import (
    EFA_RESOURCE,
    GPU_CLIQUE,
    GPU_COUNT,
    GPU_PRESENT,
    GPU_PRODUCT,
    GPU_RESOURCE,
    MLNX_RESOURCE,
    PLATFORMS,
    RDMA_RESOURCE,
    TOPOLOGY_KEYS,
    GpuNodeSpec,
    gpu_node,
    gpu_node_names,
    platform_nodes,
    provider_id,
)

OVERRIDES = Path(nvcre.render.__file__).parent / "workloadrun" / "platform_overrides.yaml"


@pytest.mark.parametrize(
    ("platform", "prefix"),
    [
        ("aws", "aws:///us-east-1a/i-"),
        ("gcp", "gce://"),
        ("azure", "azure:///subscriptions/"),
        ("oci", "ocid1.instance."),
        ("nscale", "nscale://"),
        ("openstack", "openstack://"),
        ("togetherai", "kubevirt://"),
        ("mistral", "metal3://"),
    ],
)
def test_provider_ids_carry_the_platform_prefix(platform: str, prefix: str) -> None:
    assert provider_id(platform, "gpu-node-000").startswith(prefix)
    assert provider_id(platform, "gpu-node-000") == provider_id(platform, "gpu-node-000")
    assert provider_id(platform, "gpu-node-000") != provider_id(platform, "gpu-node-001")


def test_onprem_and_forge_have_no_provider_id() -> None:
    assert provider_id("onprem", "n") == provider_id("forge", "n") == ""


def test_unknown_platform_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown platform"):
        provider_id("mainframe", "n")


def test_every_platform_is_supported() -> None:
    for platform in PLATFORMS:
        provider_id(platform, "n")


def test_gpu_node_has_labels_resources_and_kwok_annotation() -> None:
    node = gpu_node("n1", GpuNodeSpec(product="NVIDIA-GB200", gpus=4, clique="c.1", rdma_ib=8, mlnx_nics=4))
    assert node.metadata is not None and node.metadata.labels is not None
    labels = node.metadata.labels
    assert labels[GPU_PRESENT] == "true"
    assert labels[GPU_PRODUCT] == "NVIDIA-GB200"
    assert labels[GPU_CLIQUE] == "c.1"
    assert labels["kubernetes.io/hostname"] == "n1"
    assert labels["kubernetes.io/arch"] == "arm64"
    assert node.metadata.annotations == {NODE_ANNOTATION: "fake"}
    assert node.status is not None
    assert node.status.allocatable == node.status.capacity
    assert node.status.allocatable is not None
    assert node.status.allocatable[GPU_RESOURCE] == "4"
    assert node.status.allocatable[RDMA_RESOURCE] == "8"
    assert node.status.allocatable[MLNX_RESOURCE] == "4"
    assert node.spec is not None and str(node.spec.providerID).startswith("aws:///")


def test_gpu_node_defaults_and_togetherai_label() -> None:
    node = gpu_node("n2", GpuNodeSpec(platform="togetherai"))
    assert node.metadata is not None and node.metadata.labels is not None
    assert "node-role.together.ai/worker" in node.metadata.labels
    assert GPU_CLIQUE not in node.metadata.labels
    assert node.status is not None and node.status.allocatable is not None
    assert node.status.allocatable[GPU_RESOURCE] == "8"
    assert RDMA_RESOURCE not in node.status.allocatable


def test_onprem_node_has_no_provider_id_field() -> None:
    node = gpu_node("n3", GpuNodeSpec(platform="onprem"))
    assert node.spec is not None and node.spec.providerID is None


def test_node_names_sort_in_creation_order() -> None:
    names = gpu_node_names(12, "g")
    assert names == sorted(names)
    assert names[0] == "g-000"


def test_stage_documents_are_kwok_stages_for_nodes_and_pods() -> None:
    docs = list(yaml.safe_load_all(stage_documents()))
    assert all(d["kind"] == "Stage" for d in docs)
    kinds = {d["spec"]["resourceRef"]["kind"] for d in docs}
    assert kinds == {"Node", "Pod"}
    names = {d["metadata"]["name"] for d in docs}
    assert {"nvcre-node-initialize", "nvcre-pod-running", "nvcre-pod-succeeded", "nvcre-pod-failed"} <= names
    failed = next(d for d in docs if d["metadata"]["name"] == "nvcre-pod-failed")
    keys = [e["key"] for e in failed["spec"]["selector"]["matchExpressions"]]
    assert f'.metadata.annotations."{PHASE_ANNOTATION}"' in keys


def test_no_node_stage_rewrites_a_node_a_sandbox_fault_paused() -> None:
    """A ``not-ready`` fault's Ready=Unknown stays: neither the heartbeat nor the initialize stage
    (which matches every node that is not Ready) may select a paused node."""
    docs = [d for d in yaml.safe_load_all(stage_documents()) if d["spec"]["resourceRef"]["kind"] == "Node"]
    assert {d["metadata"]["name"] for d in docs} >= {"nvcre-node-initialize", "nvcre-node-heartbeat"}
    paused = {"key": f'.metadata.annotations."{HEARTBEAT_PAUSED}"', "operator": "DoesNotExist"}
    for doc in docs:
        assert paused in doc["spec"]["selector"]["matchExpressions"], doc["metadata"]["name"]


def test_cri_log_lines_format() -> None:
    start = datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC)
    text = cri_log_lines(["a b", "c"], start=start, stream="stderr")
    lines = text.splitlines()
    assert lines[0] == "2026-01-02T03:04:05.123456000Z stderr F a b"
    assert re.fullmatch(r"2026-01-02T03:04:05\.124456000Z stderr F c", lines[1])
    assert text.endswith("\n")


def test_an_appended_batch_is_dated_after_the_last_entry_even_one_in_the_future() -> None:
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    text = cri_log_lines(["a", "b", "c"], start=future)  # the last entry is 2 ms after `future`
    assert after_last_entry(text) == future + datetime.timedelta(milliseconds=3)
    before = datetime.datetime.now(datetime.UTC)
    past = cri_log_lines(["a"], start=before - datetime.timedelta(hours=1))
    assert before <= after_last_entry(past) <= datetime.datetime.now(datetime.UTC)  # now, not the past
    assert before <= after_last_entry("") <= datetime.datetime.now(datetime.UTC)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_platform_nodes_are_detected_as_their_platform(platform: str) -> None:
    (node,) = platform_nodes(1, platform, "NVIDIA-H100-80GB-HBM3")
    assert node_platform(node.to_dict()) == ("onprem" if platform == "openstack" else platform)
    assert node_architecture(node.to_dict()) == "h100"


def test_aws_h100_nodes_offer_the_efa_interfaces_nvcre_requests() -> None:
    rows = yaml.safe_load(OVERRIDES.read_text())
    (row,) = [r for r in rows if r["name"] == "aws-h100-efa"]
    requested = re.findall(r"vpc.amazonaws.com/efa: '?(\d+)", yaml.safe_dump(row["dependencies"]))
    (node,) = platform_nodes(1, "aws", "NVIDIA-H100-80GB-HBM3")
    efa = node.status.allocatable[EFA_RESOURCE]  # type: ignore[index,union-attr]
    assert requested and set(requested) == {efa}
    assert node.status.allocatable[GPU_RESOURCE] == "8"  # type: ignore[index,union-attr]


def test_platform_nodes_come_in_topology_domain_count() -> None:
    nodes = platform_nodes(16, "aws", "NVIDIA-H100-80GB-HBM3", domain_size=8)
    blocks = [n.metadata.labels[TOPOLOGY_KEYS["aws"]] for n in nodes]  # type: ignore[index,union-attr]
    assert blocks[:8] == [blocks[0]] * 8 and blocks[8:] == [blocks[8]] * 8 and blocks[0] != blocks[8]
    assert all(GPU_CLIQUE not in (n.metadata.labels or {}) for n in nodes)  # type: ignore[union-attr]
    assert topology_domain_count([n.to_dict() for n in nodes], TOPOLOGY_KEYS["aws"]) == 2


def test_nvl72_nodes_have_four_gpus_and_a_clique_per_domain() -> None:
    nodes = platform_nodes(36, "onprem", "NVIDIA-GB200", domain_size=18)
    cliques = {n.metadata.labels[GPU_CLIQUE] for n in nodes}  # type: ignore[index,union-attr]
    assert len(cliques) == 2
    assert {n.metadata.labels[GPU_COUNT] for n in nodes} == {"4"}  # type: ignore[index,union-attr]
    detection = detect_nic_resource([n.to_dict() for n in nodes], mlnx_per_node=8)
    assert detection.resource_name == RDMA_RESOURCE, "nvcre's NIC detection finds the advertised resource"


def test_the_heartbeat_stage_is_paced_for_the_fleet() -> None:
    def delay(nodes: int) -> dict[str, int]:
        docs = yaml.safe_load_all(stage_documents(nodes))
        return dict(next(d for d in docs if d["metadata"]["name"] == "nvcre-node-heartbeat")["spec"]["delay"])

    assert delay(8) == {"durationMilliseconds": 20000, "jitterDurationMilliseconds": 25000}
    assert delay(4096) == {"durationMilliseconds": 205000, "jitterDurationMilliseconds": 256250}
    assert stage_documents(8) == stage_documents()


def test_an_a3_mega_node_advertises_its_gpu_nic_networks() -> None:
    from nvcre.platform.gke import detect_gke_networks
    from nvcre.testing.nodes import gpu_node, platform_node_spec

    node = gpu_node("a3-0", platform_node_spec("gcp", "NVIDIA-H100-80GB-HBM3")).to_dict()
    assert detect_gke_networks([node]).detected == tuple(f"vpc{i}" for i in range(1, 9))
    assert not any(
        r.startswith("networking.gke.io")
        for r in gpu_node("g-0", platform_node_spec("gcp", "NVIDIA-GB200")).to_dict()["status"]["allocatable"]
    )
