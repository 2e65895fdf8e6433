"""``nvcre.clusterinfo``: what cluster info says, decided from plain Node dicts and the catalog."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.clusterinfo import ClusterInfoError, cluster_info, render_table, to_dict
from nvcre.expected import TABLE_VERSION
from nvcre.platform import GPUInventory
from nvcre.testing.nodes import gpu_resource_slice

AWS_RACK = "topology.k8s.aws/network-node-layer-1"
H100 = "NVIDIA-H100-80GB-HBM3"


def node(
    name: str,
    gpus: int | None = 8,
    *,
    provider: str = "aws:///us-east-1a/i-",
    product: str | None = H100,
    labels: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    ready: bool = True,
    cordoned: bool = False,
    gpu_present: bool = True,
) -> dict[str, Any]:
    node_labels = dict(labels or {})
    if gpu_present:
        node_labels["nvidia.com/gpu.present"] = "true"
    if product:
        node_labels["nvidia.com/gpu.product"] = product
    alloc = dict(allocatable or {})
    if gpus is not None:
        alloc["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"providerID": f"{provider}{name}"} if provider else {}
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def clique_nodes(*names: str) -> list[dict[str, Any]]:
    """On-prem GB200 nodes of one NVLink clique with their InfiniBand NICs."""
    return [
        node(
            name,
            4,
            provider="",
            product="NVIDIA-GB200",
            allocatable={"rdma/ib": "8"},
            labels={"nvidia.com/gpu.clique": "c0"},
        )
        for name in names
    ]


def case10() -> list[dict[str, Any]]:
    """Acceptance case 10: two Ready AWS H100 nodes with 8 and 2 GPUs in rack-a (and the EFA
    interfaces of a p5 instance, which the catalog's AWS overrides request)."""
    efa = {"vpc.amazonaws.com/efa": "32"}
    return [
        node("n1", 8, labels={AWS_RACK: "rack-a"}, allocatable=efa),
        node("n2", 2, labels={AWS_RACK: "rack-a"}, allocatable=efa),
    ]


def test_acceptance_case_10_json() -> None:
    out = to_dict(cluster_info(case10()))
    assert out["platform"] == "aws"
    assert out["gpuArchitecture"] == "h100"
    assert out["gpuProduct"] == H100
    assert (out["gpusPerNode"], out["totalGPUs"], out["catalogGpusPerNode"], out["totalNodes"]) == (
        2,
        10,
        8,
        2,
    )
    assert out["topology"]["key"] == AWS_RACK
    assert out["topology"]["racks"] == [{"name": "rack-a", "nodes": ["n1", "n2"], "nodeCount": 2}]
    assert out["nodes"][0] == {
        "name": "n1",
        "gpus": 8,
        "ready": True,
        "rack": "rack-a",
        "product": H100,
        "nics": {"vpc.amazonaws.com/efa": "32"},
    }
    # the controller's capacity filter: the 2-GPU node cannot take the catalog's 8 GPUs per node
    assert [(e["name"], e["reason"]) for e in out["excluded"]] == [("n2", "InsufficientGPUCapacity")]


def test_acceptance_case_10_table() -> None:
    text = render_table(cluster_info(case10()))
    lines = text.splitlines()
    assert lines[:4] == [
        "Platform:     aws",
        f"GPU:          {H100} (h100, 2 GPUs/node)",
        "Nodes:        2 ready",
        "Total GPUs:   10",
    ]
    mixed = lines.index("Nodes do not all have the same GPU count. The value above is the")
    assert lines[mixed + 1] == "smallest, because a job asks for the same count on every node."
    assert lines[mixed + 2].split() == ["NODE", "GPUS", "READY"]
    assert lines[mixed + 3].split() == ["n1", "8", "true"]
    assert lines[mixed + 4].split() == ["n2", "2", "true"]
    assert "The catalog assumes 8 GPUs per node for h100. Set gpusPerNode in the" in lines
    assert "certification, or the pods ask for more GPUs than a node has." in lines
    topology = lines.index(f"TOPOLOGY ({AWS_RACK}):")
    assert lines[topology + 1] == "  rack-a    2 nodes"


def test_uniform_nodes_have_no_mixed_or_catalog_note() -> None:
    text = render_table(
        cluster_info([node("a", labels={AWS_RACK: "r1"}), node("b", labels={AWS_RACK: "r2"})])
    )
    assert "same GPU count" not in text
    assert "The catalog assumes" not in text
    assert "  r1    1 node\n  r2    1 node" in text


def test_more_gpus_than_the_catalog_assumes_leaves_gpus_unused() -> None:
    text = render_table(cluster_info([node("a", 16), node("b", 16)]))
    assert "The catalog assumes 8 GPUs per node for h100. Set gpusPerNode in the" in text
    assert "certification, or the pods leave GPUs on each node unused." in text


def test_a_node_without_allocatable_gpus_counts_zero_and_says_so() -> None:
    info = cluster_info([node("a", 8), node("b", None)])
    assert (info.gpus_per_node, info.total_gpus) == (0, 8)
    text = render_table(info)
    assert "At least one selected node reports 0 allocatable nvidia.com/gpu, so" in text
    assert "nothing schedules on it. If you expect GPUs there, check the GPU Operator." in text


def test_long_rack_names_are_cut_to_21_characters_and_dots() -> None:
    long = "rack-" + "x" * 30
    info = cluster_info([node("a", labels={AWS_RACK: long})])
    assert f"  {long[:21]}...    1 node" in render_table(info)
    assert to_dict(info)["topology"]["racks"][0]["name"] == long


def test_missing_topology_labels_on_a_cloud_name_the_expected_key() -> None:
    text = render_table(cluster_info([node("a")]))
    assert f"Topology:     no topology labels found (expected: {AWS_RACK})" in text
    assert "topology" not in to_dict(cluster_info([node("a")]))


def test_on_prem_has_no_topology_key_unless_given() -> None:
    nodes = [node("a", provider="", labels={"rack": "r1"})]
    assert "Topology:" not in render_table(cluster_info(nodes))
    given = to_dict(cluster_info(nodes, topology_key="rack"))
    assert given["topology"] == {"key": "rack", "racks": [{"name": "r1", "nodes": ["a"], "nodeCount": 1}]}


def test_nodes_and_racks_are_sorted_by_name() -> None:
    nodes = [
        node("c", labels={AWS_RACK: "r2"}),
        node("a", labels={AWS_RACK: "r2"}),
        node("b", labels={AWS_RACK: "r1"}),
    ]
    out = to_dict(cluster_info(nodes))
    assert [n["name"] for n in out["nodes"]] == ["a", "b", "c"]
    assert [(r["name"], r["nodes"]) for r in out["topology"]["racks"]] == [("r1", ["b"]), ("r2", ["a", "c"])]


def test_ready_counts_only_nodes_whose_ready_condition_is_true() -> None:
    info = cluster_info([node("a"), node("b", ready=False)])
    assert (info.total_nodes, info.ready_nodes) == (2, 1)
    text = render_table(info)
    assert "Nodes:        2 (1 ready)" in text
    assert "Not Ready: b." in text


def test_exclusions_are_the_controllers_cordon_and_architecture_rules() -> None:
    nodes = [
        node("a"),
        node("b"),
        node("c", cordoned=True),
        node("d", product="NVIDIA-A100-SXM4-80GB"),
        node("e", product=None),
        node("f", gpu_present=False),
    ]
    info = cluster_info(nodes)
    assert [n.name for n in info.nodes] == ["a", "b"]
    assert {e.node: e.reason for e in info.exclusions} == {
        "c": "Cordoned",
        "d": "GPUArchitecture",
        "e": "GPUArchitecture",
    }
    messages = {e.node: e.message for e in info.exclusions}
    assert messages["d"].startswith("GPU architecture a100, not the majority h100")
    assert messages["e"].startswith("no nvidia.com/gpu.product label")
    assert "EXCLUDED (nvcre would not run on these nodes):" in render_table(info)


def test_a_category_fits_on_the_nodes_its_render_keeps() -> None:
    info = cluster_info(case10())
    fits = {fit.key: fit for fit in info.categories}
    allreduce = fits["communication/nccl-all-reduce"]
    assert (allreduce.fits, allreduce.nodes, allreduce.gpus_per_node) == (True, 1, 8)
    assert allreduce.message == "runs without n2"
    assert not fits["training/nemotron5-56b"].fits
    assert "model constraints" in fits["training/nemotron5-56b"].message


def test_a_category_whose_pods_request_a_resource_the_nodes_lack_does_not_fit() -> None:
    # the AWS NCCL overrides request EFA interfaces; nodes without them would leave the pods Pending
    without = {fit.key: fit for fit in cluster_info([node("a"), node("b")]).categories}
    efa = {"vpc.amazonaws.com/efa": "32"}
    with_efa = {
        fit.key: fit
        for fit in cluster_info([node("a", allocatable=efa), node("b", allocatable=efa)]).categories
    }
    key = "communication/nccl-all-reduce"
    assert not without[key].fits
    assert "32 vpc.amazonaws.com/efa per node" in without[key].message
    assert with_efa[key].fits and with_efa[key].nodes == 2


def test_nic_resources_and_on_prem_detection() -> None:
    nodes = clique_nodes("g1", "g2")
    out = to_dict(cluster_info(nodes))
    assert out["nicResources"] == [{"name": "rdma/ib", "nodes": 2, "minPerNode": "8", "maxPerNode": "8"}]
    assert out["nicDetection"] == "requests rdma/ib (8 per node, detected on every node)"
    assert out["nvlinkDomains"] == {
        "key": "nvidia.com/gpu.clique",
        "domains": [{"name": "c0", "nodes": ["g1", "g2"], "nodeCount": 2}],
    }


def test_heterogeneous_platforms_are_shown_and_no_category_fits() -> None:
    info = cluster_info([node("a"), node("b", provider="gce://p/z/")])
    assert dict(info.platforms) == {"aws": 1, "gcp": 1}
    text = render_table(info)
    assert "Platform:     aws (1 node), gcp (1 node)" in text
    assert all(not fit.fits and "heterogeneous platforms" in fit.message for fit in info.categories)


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([], "no GPU nodes found: no node is labelled nvidia.com/gpu.present=true"),
        ([node("a", gpu_present=False)], "no GPU nodes found"),
        ([node("a", cordoned=True)], "every node labelled nvidia.com/gpu.present=true is cordoned (a)"),
        ([node("a", product=None)], "no nodes have nvidia.com/gpu.product label"),
    ],
)
def test_no_usable_gpu_node_is_an_error(nodes: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ClusterInfoError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cluster_info(nodes)


# --- expected performance ---------------------------------------------------------------------------


def expected_of(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["category"]: c for c in out["expectedPerformance"]["categories"]}


def test_expected_figures_for_one_group_of_each_category_with_their_source() -> None:
    """The seed example's fleet: 16 AWS H100 nodes with EFA, one all-reduce group of all of them."""
    efa = {"vpc.amazonaws.com/efa": "32"}
    info = cluster_info([node(f"gpu-node-{i:03d}", allocatable=efa) for i in range(16)])
    out = to_dict(info)
    assert (out["expectedPerformance"]["gpuArchitecture"], out["expectedPerformance"]["platform"]) == (
        "h100",
        "aws",
    )
    assert out["expectedPerformance"]["tableVersion"] == TABLE_VERSION
    categories = expected_of(out)
    allreduce = categories["communication/nccl-all-reduce"]
    assert allreduce["measures"] == "all_reduce"
    assert allreduce["groupShape"] == {
        "nodes": 16,
        "domains": 1,
        "mnnvl": False,
        "text": "16 nodes in one domain",
    }
    assert allreduce["expected"] == [
        {
            "key": "busBandwidthGBps",
            "value": 356.27,
            "source": "AWS p5 EFA, HyperPod nccl-tests at 16 nodes",
            "row": "h100/aws/all_reduce/9-16-nodes",
        }
    ]
    # the loopback entries run on one node each: NVSwitch has a figure, the NIC loopback path none
    nvswitch = categories["communication/nccl-loopback-nvswitch"]
    assert (nvswitch["groupShape"]["nodes"], nvswitch["expected"][0]["value"]) == (1, 479.9)
    loopback = categories["communication/nccl-loopback"]
    assert (loopback["measures"], loopback["expected"], loopback["message"]) == (
        "nic_loopback_all_reduce",
        [],
        "no published figure",
    )
    assert categories["training/nemotron5-8b"]["message"] == "no published figure"
    assert "diagnostics/dcgm-level3" not in categories  # measures nothing

    text = render_table(info)
    lines = text.splitlines()
    assert "EXPECTED PERFORMANCE (h100 on aws, one group of each category; table 1):" in lines
    assert (
        "  communication/nccl-all-reduce         16 nodes in one domain  356.27 GB/s          "
        "AWS p5 EFA, HyperPod nccl-tests at 16 nodes (h100/aws/all_reduce/9-16-nodes)"
    ) in lines
    assert any(
        line.split()[:2] == ["communication/nccl-loopback", "1"] and "no published figure" in line
        for line in lines
    )


def test_every_row_for_the_hardware_by_collective_and_none_for_the_rest() -> None:
    efa = {"vpc.amazonaws.com/efa": "32"}
    info = cluster_info([node("a", allocatable=efa), node("b", allocatable=efa)])
    collectives = {c["collective"]: c for c in to_dict(info)["expectedPerformance"]["collectives"]}
    assert list(collectives) == ["all_gather", "all_reduce", "alltoall", "nic_loopback_all_reduce"]
    assert collectives["all_gather"] == {
        "collective": "all_gather",
        "rows": [],
        "message": "no published figure",
    }
    allreduce = [(r["row"], r["value"]) for r in collectives["all_reduce"]["rows"]]
    assert allreduce[:2] == [("h100/any/all_reduce/1-node", 479.9), ("h100/aws/all_reduce/2-nodes", 487.09)]
    assert all("/aws/" in row or "/any/" in row for row, _ in allreduce)
    first = collectives["all_reduce"]["rows"][1]
    assert first["groupShape"] == "2 nodes in one domain"
    assert "487.09 GB/s at 17179869184 B" in first["source"] and first["source"].count("https://") == 1
    text = render_table(info)
    assert "EXPECTED BUS BANDWIDTH BY GROUP SHAPE (h100 on aws):" in text
    assert "  all_gather               any                        no published figure  -" in text
    assert "  all_reduce               2 nodes in one domain      487.09 GB/s          AWS p5 EFA" in text


def test_a_group_across_network_blocks_has_no_published_figure_on_aws() -> None:
    efa = {"vpc.amazonaws.com/efa": "32"}
    nodes = [
        node("a", labels={AWS_RACK: "r1"}, allocatable=efa),
        node("b", labels={AWS_RACK: "r1"}, allocatable=efa),
        node("c", labels={AWS_RACK: "r2"}, allocatable=efa),
    ]
    allreduce = expected_of(to_dict(cluster_info(nodes)))["communication/nccl-all-reduce"]
    assert allreduce["groupShape"]["text"] == "3 nodes across 2 domains"
    assert (allreduce["expected"], allreduce["message"]) == ([], "no published figure")


def test_a_gb200_group_inside_one_clique_expects_multi_node_nvlink() -> None:
    nodes = clique_nodes("g1", "g2", "g3")
    allreduce = expected_of(to_dict(cluster_info(nodes)))["communication/nccl-all-reduce"]
    assert allreduce["groupShape"] == {
        "nodes": 3,
        "domains": 1,
        "mnnvl": True,
        "text": "3 nodes in one NVLink clique (MNNVL)",
    }
    assert [(e["value"], e["row"]) for e in allreduce["expected"]] == [
        (834.57, "gb200/any/all_reduce/mnnvl-2-18-nodes")
    ]


# --- DRA-only nodes ---------------------------------------------------------------------------------


def test_a_node_without_gpu_labels_is_known_by_its_dra_resource_slice() -> None:
    nodes = [
        node("a"),
        node("b", gpus=None, product=None, gpu_present=False),
        node("c", gpus=None, product=None, gpu_present=False),
    ]
    dra = GPUInventory.from_slices(
        [
            gpu_resource_slice("b", H100, 8).to_dict(),
            gpu_resource_slice("c", "NVIDIA-GB200", 4).to_dict(),
        ]
    )
    info = cluster_info(nodes, dra=dra)
    assert (info.gpu_architecture, info.gpu_product) == ("h100", H100)
    assert [(n.name, n.gpus, n.product) for n in info.nodes] == [("a", 8, H100), ("b", 8, H100)]
    assert [(e.node, e.reason, e.message) for e in info.exclusions] == [
        (
            "c",
            "GPUArchitecture",
            "GPU architecture gb200, not the majority h100 (nvcre certifies one architecture at a time)",
        )
    ]
    with pytest.raises(ClusterInfoError, match="no GPU nodes found"):
        cluster_info(nodes[1:])
