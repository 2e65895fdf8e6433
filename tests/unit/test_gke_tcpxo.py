"""GCP A3 Mega TCPXO detection: the GKE networks of the GPU NICs and the TCPXO plugin release."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nvcre.api.v1alpha1.certification import Certification
from nvcre.catalog import render_category
from nvcre.platform.gke import (
    DEFAULT_NETWORKS,
    detect_gke_networks,
    detect_tcpxo_plugin,
    plugin_release,
    resolve_gke_networks,
    resolve_tcpxo_plugin,
)

NICS = [f"gpu-nic-{i}" for i in range(8)]
PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev"


def node(name: str, networks: list[str], *, host: list[str] | None = None, **extra: str) -> dict[str, Any]:
    """A GKE node attached to ``networks`` (and the ``.IP`` twins and ``default`` GKE also
    advertises); ``host`` puts network i on the host's eth<i+1> in its annotations."""
    allocatable = {"nvidia.com/gpu": "8", "networking.gke.io.networks/default": "1", **extra}
    for network in networks:
        allocatable[f"networking.gke.io.networks/{network}"] = "1"
        allocatable[f"networking.gke.io.networks/{network}.IP"] = "1"
    annotations = {}
    if host is not None:
        annotations = {
            "networking.gke.io/north-interfaces": json.dumps(
                [{"network": n, "ipAddress": f"10.{i}.0.2"} for i, n in enumerate(host)]
            ),
            "networking.gke.io/nic-info": json.dumps(
                [{"birthIP": "10.128.0.2", "birthName": "eth0"}]
                + [{"birthIP": f"10.{i}.0.2", "birthName": f"eth{i + 1}"} for i in range(len(host))]
            ),
        }
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"providerID": f"gce://p/us-central1-a/{name}"},
        "status": {"allocatable": allocatable},
    }


def test_eight_networks_on_every_node_are_used_sorted() -> None:
    found = detect_gke_networks([node("a", NICS[::-1]), node("b", NICS)])
    assert found.names == tuple(NICS)
    assert (found.host_ordered, found.message, found.events) == (False, "", ())


def test_the_hosts_nic_order_wins_when_every_node_agrees() -> None:
    host = ["vpc3", "vpc1", "vpc2", "vpc8", "vpc4", "vpc5", "vpc6", "vpc7"]
    found = detect_gke_networks([node("a", host, host=host), node("b", host, host=host)])
    assert (found.names, found.host_ordered) == (tuple(host), True)
    disagreeing = detect_gke_networks([node("a", host, host=host), node("b", host, host=sorted(host))])
    assert (disagreeing.names, disagreeing.host_ordered) == (tuple(sorted(host)), False)


def test_a_network_missing_on_one_node_falls_back_with_a_warning() -> None:
    found = detect_gke_networks([node("a", NICS), node("b", NICS[:7])])
    assert found.detected == ()
    assert found.names == DEFAULT_NETWORKS == tuple(f"vpc{i}" for i in range(1, 9))
    falls_back = (
        "GKE TCPXO network auto-detection found 7 networks allocatable on every target node "
        "(gpu-nic-0, gpu-nic-1, gpu-nic-2, gpu-nic-3, gpu-nic-4, gpu-nic-5, gpu-nic-6), but TCPXO needs "
        "exactly 8 GPU NIC networks per node (a3-megagpu-8g); rendering the default networks vpc1..vpc8 "
        "instead; GKE rejects the pods unless Network objects with those names exist."
    )
    assert [(e.type, e.reason, e.message) for e in found.events] == [
        ("Warning", "GKENetworkDetection", falls_back)
    ]


def test_no_multi_networking_and_a_ninth_network_fall_back() -> None:
    assert detect_gke_networks([node("a", [])]).message.startswith(
        "GKE TCPXO network auto-detection found no networking.gke.io.networks/* resource allocatable "
        "on every target node, but TCPXO needs exactly 8"
    )
    assert detect_gke_networks([node("a", [*NICS, "storage"])]).detected == ()
    at_zero = node("a", NICS)
    at_zero["status"]["allocatable"]["networking.gke.io.networks/gpu-nic-7"] = "0"
    assert detect_gke_networks([at_zero]).shared == tuple(NICS[:7])


def test_only_a_gcp_h100_target_is_examined() -> None:
    nodes = [node("a", [])]
    assert resolve_gke_networks("gcp", "h100", nodes).events
    for platform, arch in (("gcp", "gb200"), ("aws", "h100")):
        skipped = resolve_gke_networks(platform, arch, nodes)
        assert (skipped.names, skipped.events) == (DEFAULT_NETWORKS, ())


# --- plugin release ------------------------------------------------------------------------------


def installer(node_name: str, tag: str, *, phase: str = "Running", image: str = PLUGIN) -> dict[str, Any]:
    return {
        "metadata": {"name": f"nccl-tcpxo-installer-{node_name}", "namespace": "kube-system"},
        "spec": {
            "nodeName": node_name,
            "initContainers": [{"name": "nccl-tcpxo-installer", "image": f"{image}:{tag}"}],
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}],
        },
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        (f"{PLUGIN}:v1.0.17", "v1.0.17"),
        (f"mirror.example.com:5000/gke/nccl-plugin-gpudirecttcpx-dev:v1.0.16@sha256:{'a' * 64}", "v1.0.16"),
        (f"{PLUGIN}@sha256:{'a' * 64}", None),
        ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21", None),
    ],
)
def test_the_release_is_the_plugin_images_tag(image: str, tag: str | None) -> None:
    assert plugin_release(image) == tag


@pytest.mark.parametrize(
    ("tags", "cuda", "exact"),
    [
        (["v1.0.15", "v1.0.15"], 12, True),
        (["v1.0.16", "v1.0.16-1"], 12, True),
        (["v1.0.17-1", "v1.0.17"], 13, True),
        (["v1.0.18", "v1.0.18"], 13, False),
        (["v1.0.13", "v1.0.13"], 12, False),
        (["v1.0.16", "v1.0.17"], 12, False),
        (["latest", "latest"], 12, False),
    ],
)
def test_one_mapped_release_on_every_node_picks_the_cuda_major(
    tags: list[str], cuda: int, exact: bool
) -> None:
    nodes = [node("a", NICS), node("b", NICS)]
    found = detect_tcpxo_plugin(nodes, [installer("a", tags[0]), installer("b", tags[1])])
    assert (found.cuda_major, found.exact) == (cuda, exact)
    assert bool(found.events) is not exact


def test_the_warning_says_what_was_found_and_what_renders() -> None:
    nodes = [node("a", NICS), node("b", NICS)]
    newer = detect_tcpxo_plugin(nodes, [installer("a", "v1.0.18"), installer("b", "v1.0.18")])
    unknown_release = (
        "TCPXO plugin version detection found release v1.0.18, which has no image row of its own; "
        "rendering the v1.0.17 images (CUDA 13). Set the category's options.image if the cluster's "
        "plugin needs another CUDA major."
    )
    assert [(e.type, e.reason, e.message) for e in newer.events] == [
        ("Warning", "TCPXOPluginDetection", unknown_release)
    ]
    # a pending installer, another node's installer and a terminating one do not count
    terminating = installer("b", "v1.0.17")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    partial = detect_tcpxo_plugin(
        nodes,
        [
            installer("a", "v1.0.17"),
            installer("b", "v1.0.17", phase="Pending"),
            terminating,
            installer("c", "v1.0.17"),
        ],
    )
    assert partial.message.startswith(
        "TCPXO plugin version detection found no Running installer on 1 target node(s) (b); "
        "rendering the v1.0.15 images (CUDA 12)."
    )
    assert detect_tcpxo_plugin(nodes, []).message.startswith(
        "TCPXO plugin version detection found no Running nccl-plugin-gpudirecttcpx-dev installer pod "
        "in kube-system on the target nodes; rendering the v1.0.15 images (CUDA 12)."
    )


def test_plugin_detection_runs_only_when_pods_were_read_for_a_gcp_h100_target() -> None:
    nodes = [node("a", NICS)]
    assert resolve_tcpxo_plugin("gcp", "h100", nodes, [installer("a", "v1.0.17")]).cuda_major == 13
    for platform, arch, pods in (("gcp", "h100", None), ("aws", "h100", []), ("gcp", "gb200", [])):
        skipped = resolve_tcpxo_plugin(platform, arch, nodes, pods)
        assert (skipped.cuda_major, skipped.events) == (12, ())


# --- the render ----------------------------------------------------------------------------------


def _images(workflow: dict[str, Any]) -> set[str]:
    """Every image of the NCCL test's launcher, workers and trainer (not the tcpxo-daemon's)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            image = value.get("image")
            if isinstance(image, str) and "tcpgpudmarxd" not in image:
                found.add(image)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(workflow["spec"])
    return found


def _render(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]] | None, variant: str = "nccl-all-reduce"
) -> Any:
    cert = Certification.model_validate(
        {
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Certification",
            "metadata": {"name": "c1", "namespace": "nvcre"},
            "spec": {
                "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                "categories": [
                    {
                        "domain": "communication" if variant.startswith("nccl") else "training",
                        "variant": variant,
                    }
                ],
            },
        }
    )
    return render_category(cert, 0, nodes, tcpxo_installers=pods)


def gpu_node(name: str, networks: list[str]) -> dict[str, Any]:
    found = node(name, networks)
    found["metadata"]["labels"] = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    }
    return found


def test_the_render_takes_the_plugins_cuda_major_and_warns_what_it_could_not_detect() -> None:
    nodes = [gpu_node("a", NICS), gpu_node("b", NICS)]
    cuda13 = _render(nodes, [installer("a", "v1.0.17"), installer("b", "v1.0.17-1")])
    assert _images(cuda13.workflow) == {"nvcr.io/nvidia/pytorch:26.01-py3"}
    assert [e.reason for e in cuda13.events] == []
    cuda12 = _render(nodes, [installer("a", "v1.0.16"), installer("b", "v1.0.16")])
    assert _images(cuda12.workflow) == {"nvcr.io/nvidia/pytorch:25.06-py3"}

    bare = _render([gpu_node("a", []), gpu_node("b", [])], [])
    assert _images(bare.workflow) == {"nvcr.io/nvidia/pytorch:25.06-py3"}
    assert [(e.type, e.reason) for e in bare.events] == [
        ("Warning", "GKENetworkDetection"),
        ("Warning", "TCPXOPluginDetection"),
    ]
    annotations = json.dumps(bare.workflow["spec"])
    assert '\\"network\\": \\"vpc8\\"' in annotations


@pytest.mark.parametrize(
    ("tag", "image"), [("v1.0.16", "pytorch:25.06-py3"), ("v1.0.17", "pytorch:25.08-py3")]
)
def test_training_follows_the_plugin_too(tag: str, image: str) -> None:
    nodes = [gpu_node(name, NICS) for name in ("a", "b", "c", "d")]
    rendered = _render(nodes, [installer(n, tag) for n in ("a", "b", "c", "d")], "nemotron5-8b")
    assert _images(rendered.workflow) == {f"nvcr.io/nvidia/{image}"}
