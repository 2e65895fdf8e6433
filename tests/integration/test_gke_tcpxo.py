"""GCP A3 Mega (H100) on the real API server: the Certification controller reads the GKE networks
of the GPU NICs from the target nodes and the TCPXO plugin release from GKE's installer pods in
kube-system, and says so in Warning events when it cannot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from nvcre import resources
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import Certification, category, pool_nodes
from nvcre.testing.inspect import get, wait_event
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name

ALL_REDUCE = category("communication", "nccl-all-reduce")
PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev"
HOST_ORDER = [f"a3mega-gpu-nic-{i}" for i in (3, 0, 1, 2, 4, 5, 6, 7)]


def a3_mega(networks: list[str]) -> dict[str, Any]:
    """What an A3 Mega node's GKE multi-networking shows: a resource per network (and its .IP), and
    the annotations placing network i on the host's eth<i+1>."""
    resources_ = {f"networking.gke.io.networks/{n}{suffix}": "1" for n in networks for suffix in ("", ".IP")}
    annotations = {
        "networking.gke.io/north-interfaces": json.dumps(
            [{"network": n, "ipAddress": f"192.168.{i + 1}.2"} for i, n in enumerate(networks)]
        ),
        "networking.gke.io/nic-info": json.dumps(
            [{"birthIP": f"192.168.{i + 1}.2", "birthName": f"eth{i + 1}"} for i in range(len(networks))]
        ),
    }
    return {"extra_resources": resources_, "annotations": annotations, "platform": "gcp"}


@pytest.fixture
def installers(kube: Client) -> Iterator[list[str]]:
    """Names of the kube-system pods a test creates, deleted after it."""
    created: list[str] = []
    yield created
    for name in created:
        kube.delete(Pod, name, namespace="kube-system")


def installer(node: str, tag: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=f"nccl-tcpxo-installer-{node}"[:63], namespace="kube-system"),
        spec=PodSpec(
            nodeName=node,
            initContainers=[Container(name="nccl-tcpxo-installer", image=f"{PLUGIN}:{tag}")],
            containers=[Container(name="pause", image="registry.k8s.io/pause:3.10")],
        ),
    )


def _walk(item: Any, key: str) -> Iterator[Any]:
    """Every value of ``key`` in a nested object."""
    if isinstance(item, dict):
        if key in item:
            yield item[key]
        for value in item.values():
            yield from _walk(value, key)
    elif isinstance(item, list):
        for value in item:
            yield from _walk(value, key)


def interfaces(workflow: dict[str, Any]) -> list[str]:
    """The networks of eth1..eth8 in the Workflow's TCPXO runtime patch."""
    (annotation,) = _walk(workflow["spec"], "networking.gke.io/interfaces")
    return [i["network"] for i in json.loads(annotation) if i["interfaceName"] != "eth0"]


def images(workflow: dict[str, Any]) -> set[str]:
    """The images of the NCCL test (not the tcpxo-daemon's)."""
    return {image for image in _walk(workflow["spec"], "image") if "tcpgpudmarxd" not in image}


def start(kube: Client, namespace: str, name: str, pool: str) -> dict[str, Any]:
    """Certification ``name`` of the all-reduce on ``pool``; its Workflow once created."""
    cert = (
        Certification(name).namespace(namespace).pool(pool).allow_missing_data().categories(ALL_REDUCE).obj()
    )
    kube.create(resources.Certification.from_dict(cert))
    workflow = certification_workflow_name(name, "communication", "nccl-all-reduce")
    return wait_for(
        lambda: get(kube, resources.Workflow, workflow, namespace), 30, what=workflow, ignore=(Exception,)
    )


def test_detected_networks_and_plugin_release_render(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, installers: list[str]
) -> None:
    pool = pool_name()
    nodes = pool_nodes(gpu_nodes, 2, pool, **a3_mega(HOST_ORDER))
    for node in nodes:
        created = kube.create(installer(node, "v1.0.17-1"))
        installers.append(str(created.metadata.name if created.metadata else ""))

    def running() -> bool:
        pods = [kube.get(Pod, name, namespace="kube-system") for name in installers]
        return all(pod.status is not None and pod.status.phase == "Running" for pod in pods)

    wait_for(running, 60, what="kwok to run the installer pods")
    workflow = start(kube, namespace, "tcpxo", pool)
    # the hosts' eth1 carries a3mega-gpu-nic-3, and so the pod's eth1
    assert interfaces(workflow) == HOST_ORDER
    # plugin v1.0.17 (a rebuild) is CUDA 13: the CUDA 13 image, not the CUDA 12 pin
    assert images(workflow) == {"nvcr.io/nvidia/pytorch:26.01-py3"}


def test_undetected_networks_and_plugin_warn(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool = pool_name()
    pool_nodes(gpu_nodes, 2, pool, platform="gcp")
    workflow = start(kube, namespace, "plain", pool)
    assert interfaces(workflow) == [f"vpc{i}" for i in range(1, 9)]
    assert images(workflow) == {"nvcr.io/nvidia/pytorch:25.06-py3"}
    no_networks = (
        "GKE TCPXO network auto-detection found no networking.gke.io.networks/* resource allocatable "
        "on every target node, but TCPXO needs exactly 8 GPU NIC networks per node (a3-megagpu-8g); "
        "rendering the default networks vpc1..vpc8 instead; GKE rejects the pods unless Network "
        "objects with those names exist."
    )
    no_plugin = (
        "TCPXO plugin version detection found no Running nccl-plugin-gpudirecttcpx-dev installer pod "
        "in kube-system on the target nodes; rendering the v1.0.15 images (CUDA 12). Set the "
        "category's options.image if the cluster's plugin needs another CUDA major."
    )
    for reason, message in (("GKENetworkDetection", no_networks), ("TCPXOPluginDetection", no_plugin)):
        wait_event(kube, namespace, "plain", "Certification", ("Warning", reason, message))
