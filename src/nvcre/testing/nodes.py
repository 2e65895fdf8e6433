"""Fake GPU nodes for kwok: labels, providerIDs and resources as GPU Operator clusters show them.

``gpu_node()`` builds a :class:`lightkube.resources.core_v1.Node` annotated for kwok
(``kwok.x-k8s.io/node=fake``) with ``nvidia.com/gpu.present=true``, ``nvidia.com/gpu.product``,
``nvidia.com/gpu.count``, optional ``nvidia.com/gpu.clique``, ``kubernetes.io/hostname``, a
platform-specific ``spec.providerID`` and capacity/allocatable for ``nvidia.com/gpu``, cpu, memory,
pods and optionally ``rdma/ib`` / ``nvidia.com/mlnxnics``. ``create_gpu_nodes()`` creates several.

``platform_node_spec()`` and ``platform_nodes()`` describe nodes as a real node of one platform
and GPU shows them: the GPU count nvcre's defaults expect, the RDMA/EFA resource that platform's
device plugin advertises (and nvcre's render requests), and topology labels (the platform's
network-block key, ``nvidia.com/gpu.clique`` on NVL72 systems) in domains of M nodes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from lightkube import Client
from lightkube.models.core_v1 import NodeSpec, NodeStatus, Taint
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.resource_v1 import Device, DeviceAttribute, ResourcePool, ResourceSliceSpec
from lightkube.resources.core_v1 import Node
from lightkube.resources.resource_v1 import ResourceSlice

from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.platform.detect import FORGE_SITE_LABEL, parse_product
from nvcre.platform.detect import TOPOLOGY_KEYS as TOPOLOGY_KEYS  # the render's topology keys, re-exported
from nvcre.platform.dra import GPU_DRIVER
from nvcre.platform.gke import DEFAULT_NETWORKS, NETWORK_RESOURCE_PREFIX, TCPXO_ARCHITECTURE
from nvcre.platform.gpu_defaults import resolve_gpu_defaults
from nvcre.testing.kwok import NODE_ANNOTATION, NODE_ANNOTATION_VALUE

GPU_PRESENT = NodeLabel.GPU_PRESENT
GPU_PRODUCT = NodeLabel.GPU_PRODUCT
GPU_COUNT = NodeLabel.GPU_COUNT
GPU_CLIQUE = NodeLabel.GPU_CLIQUE
GPU_RESOURCE = NodeLabel.GPU_RESOURCE
RDMA_RESOURCE = "rdma/ib"
MLNX_RESOURCE = "nvidia.com/mlnxnics"
HOSTNAME = NodeLabel.HOSTNAME
TOGETHER_WORKER = "node-role.together.ai/worker"
POOL_LABEL = "nvcre.test/pool"
"""A test's own node label: the nodes one test created, which its objects target."""

EFA_RESOURCE = "vpc.amazonaws.com/efa"
NSCALE_RDMA_RESOURCE = "nscale.com/rdmashare"
#: EFA interfaces per instance: p5/p5e (H100/H200) 32, p6-b200 8, p6e-GB200/GB300 4 per host.
AWS_EFA = {"h100": 32, "h200": 32, "b200": 8, "b300": 8, "gb200": 4, "gb300": 4}
#: The RDMA shared device plugin's usual ``rdmaHcaMax`` (NVIDIA Network Operator's examples).
RDMA_SHARED_MAX = 63
#: Architectures whose nodes share multi-node NVLink domains (``nvidia.com/gpu.clique``).
NVL_ARCHITECTURES = frozenset({"gb200", "gb300"})

#: Platforms whose providerID the helper can fake (detection lives in nvcre.platform).
PLATFORMS = ("aws", "gcp", "azure", "oci", "nscale", "openstack", "togetherai", "mistral", "forge", "onprem")


def _hex(name: str, length: int) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:length]


def provider_id(platform: str, name: str) -> str:
    """A realistic ``spec.providerID`` for a node ``name`` on ``platform`` ('' for forge/onprem)."""
    if platform == "aws":
        return f"aws:///us-east-1a/i-{_hex(name, 17)}"
    if platform == "gcp":
        return f"gce://nvcre-test/us-central1-a/{name}"
    if platform == "azure":
        vm = int(_hex(name, 6), 16)
        return (
            "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/nvcre-test"
            f"/providers/Microsoft.Compute/virtualMachineScaleSets/gpu/virtualMachines/{vm}"
        )
    if platform == "oci":
        return f"ocid1.instance.oc1.iad.{_hex(name, 60)}"
    if platform == "nscale":
        return f"nscale://{_hex(name, 32)}"
    if platform == "openstack":
        return f"openstack:///{_hex(name, 32)}"
    if platform == "togetherai":
        return f"kubevirt://{name}"
    if platform == "mistral":
        return f"metal3://metal3/{name}/{name}"
    if platform in ("forge", "onprem"):
        return ""
    raise ValueError(f"unknown platform {platform!r}; known: {', '.join(PLATFORMS)}")


@dataclass
class GpuNodeSpec:
    """What a fake GPU node looks like; every field has a sensible default."""

    platform: str = "aws"
    product: str = "NVIDIA-H100-80GB-HBM3"
    gpus: int = 8
    clique: str | None = None
    cpu: str = "192"
    memory: str = "2Ti"
    pods: str = "110"
    rdma_ib: int | None = None
    mlnx_nics: int | None = None
    unschedulable: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    extra_resources: Mapping[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    dra: bool = False
    """A DRA-only node: no GPU Operator labels and no ``nvidia.com/gpu`` resource; its GPUs are
    published in a ResourceSlice (:func:`gpu_resource_slice`)."""


def gpu_node(name: str, spec: GpuNodeSpec | None = None) -> Node:
    """The Node object for one fake GPU node (not yet created)."""
    spec = spec or GpuNodeSpec()
    hostname = name
    labels = {
        HOSTNAME: hostname,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "arm64" if spec.product.startswith(("NVIDIA-GB", "NVIDIA-GH")) else "amd64",
        "type": "kwok",
    }
    if not spec.dra:
        labels.update({GPU_PRESENT: "true", GPU_PRODUCT: spec.product, GPU_COUNT: str(spec.gpus)})
    if spec.clique:
        labels[GPU_CLIQUE] = spec.clique
    if spec.platform == "togetherai":
        labels[TOGETHER_WORKER] = ""
    labels.update(spec.labels)
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": spec.pods}
    if not spec.dra:
        resources[GPU_RESOURCE] = str(spec.gpus)
    if spec.rdma_ib is not None:
        resources[RDMA_RESOURCE] = str(spec.rdma_ib)
    if spec.mlnx_nics is not None:
        resources[MLNX_RESOURCE] = str(spec.mlnx_nics)
    resources.update(spec.extra_resources)
    annotations = {NODE_ANNOTATION: NODE_ANNOTATION_VALUE, **spec.annotations}
    return Node(
        metadata=ObjectMeta(name=name, labels=labels, annotations=annotations),
        spec=NodeSpec(
            providerID=provider_id(spec.platform, name) or None,
            unschedulable=spec.unschedulable or None,
            taints=list(spec.taints) or None,
        ),
        status=NodeStatus(capacity=dict(resources), allocatable=dict(resources)),
    )


def gpu_resource_slice(node: str, product: str, gpus: int) -> ResourceSlice:
    """The ResourceSlice the NVIDIA DRA driver publishes for ``node``: ``gpus`` full GPUs, each
    with its product name as the driver spells it (``NVIDIA H100 80GB HBM3``)."""
    name = " ".join(product.split("-"))
    return ResourceSlice(
        metadata=ObjectMeta(name=f"{node}-gpu.nvidia.com"),
        spec=ResourceSliceSpec(
            driver=GPU_DRIVER,
            nodeName=node,
            pool=ResourcePool(name=node, generation=1, resourceSliceCount=1),
            devices=[
                Device(
                    name=f"gpu-{index}",
                    attributes={
                        "type": DeviceAttribute(string="gpu"),
                        "productName": DeviceAttribute(string=name),
                        "index": DeviceAttribute(int=index),
                    },
                )
                for index in range(gpus)
            ],
        ),
    )


def nic_resources(platform: str, architecture: str, mlnx_per_node: int) -> dict[str, str]:
    """The RDMA/EFA extended resources a ``platform`` node of ``architecture`` advertises."""
    if platform == "aws":
        return {EFA_RESOURCE: str(AWS_EFA.get(architecture, 32))}
    if platform == "azure":
        return {MLNX_RESOURCE: str(mlnx_per_node or 8)}
    if platform == "nscale":
        return {NSCALE_RDMA_RESOURCE: str(RDMA_SHARED_MAX)}
    if platform == "gcp" and architecture == TCPXO_ARCHITECTURE:
        # A3 Mega: GKE multi-networking advertises each GPU NIC network (and its IP) per node.
        return {
            f"{NETWORK_RESOURCE_PREFIX}{n}{suffix}": "1" for n in DEFAULT_NETWORKS for suffix in ("", ".IP")
        }
    if platform in ("gcp", "oci"):
        return {}  # other GCP GPUs / OCI host RDMA: no extended resource
    return {RDMA_RESOURCE: str(RDMA_SHARED_MAX)}


def platform_node_spec(platform: str, product: str, *, gpus: int | None = None) -> GpuNodeSpec:
    """A node of ``platform`` with ``product`` GPUs as its device plugins advertise it."""
    provider_id(platform, "probe")  # rejects an unknown platform
    architecture = parse_product(product)
    defaults = resolve_gpu_defaults(architecture, platform)
    count = gpus if gpus is not None else defaults.gpus_per_node
    return GpuNodeSpec(
        platform=platform,
        product=product,
        gpus=count,
        labels={FORGE_SITE_LABEL: "nvcre-sandbox"} if platform == "forge" else {},
        extra_resources=nic_resources(platform, architecture, defaults.mlnx_per_node),
    )


def domain_labels(platform: str, product: str, domain: int, *, prefix: str = "gpu-node") -> dict[str, str]:
    """Topology labels of the nodes of domain number ``domain`` (values as the platform spells them)."""
    architecture = parse_product(product)
    labels = {}
    if architecture in NVL_ARCHITECTURES:
        labels[GPU_CLIQUE] = f"{_uuid(prefix)}.{domain}"
    key = TOPOLOGY_KEYS.get(platform)
    if key:
        labels[key] = (
            f"nn-{_hex(f'{prefix}/{domain}', 17)}" if platform == "aws" else f"{prefix}-block-{domain}"
        )
    return labels


def _uuid(name: str) -> str:
    h = _hex(name, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def platform_nodes(
    count: int,
    platform: str,
    product: str,
    *,
    gpus: int | None = None,
    domain_size: int | None = None,
    prefix: str = "gpu-node",
    labels: Mapping[str, str] | None = None,
) -> list[Node]:
    """``count`` nodes ``<prefix>-000``...: :func:`platform_node_spec` nodes, topology labels in
    domains of ``domain_size`` consecutive nodes (one domain of all when ``None``)."""
    base = platform_node_spec(platform, product, gpus=gpus)
    size = domain_size or max(count, 1)
    nodes = []
    for index, name in enumerate(gpu_node_names(count, prefix)):
        topology = domain_labels(platform, product, index // size, prefix=prefix)
        spec = GpuNodeSpec(**{**base.__dict__, "labels": {**base.labels, **topology, **(labels or {})}})
        nodes.append(gpu_node(name, spec))
    return nodes


def gpu_node_names(count: int, prefix: str = "gpu-node") -> list[str]:
    return [f"{prefix}-{i:03d}" for i in range(count)]


def create_gpu_nodes(
    client: Client,
    count: int,
    spec: GpuNodeSpec | None = None,
    *,
    prefix: str = "gpu-node",
    clique_size: int | None = None,
) -> list[Node]:
    """Create ``count`` fake GPU nodes named ``<prefix>-000`` ...; return the created objects.

    ``clique_size`` assigns ``nvidia.com/gpu.clique`` labels ``<prefix>-clique.<k>`` in groups of
    that many nodes (NVLink domains, as GB200 NVL72 racks report them).
    """
    spec = spec or GpuNodeSpec()
    created = []
    for index, name in enumerate(gpu_node_names(count, prefix)):
        node_spec = spec
        if clique_size:
            node_spec = GpuNodeSpec(**{**spec.__dict__, "clique": f"{prefix}-clique.{index // clique_size}"})
        created.append(client.create(gpu_node(name, node_spec)))
    return created


def node_ready(node: Node) -> bool:
    conditions = node.status.conditions if node.status and node.status.conditions else []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
