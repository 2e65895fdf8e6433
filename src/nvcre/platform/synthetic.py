"""Synthetic nodes for offline renders (``nvcrectl ... render --platform P --gpu-arch A``).

Offline renders build nodes that the detection code maps back to the requested platform and
architecture, so an offline render and the controller take the same decisions through the
same functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.platform.detect import (
    FORGE_SITE_LABEL,
    GPU_ARCHITECTURES,
    NSCALE_RDMA_RESOURCE,
    PLATFORMS,
    TOGETHERAI_WORKER_LABEL,
    Platform,
    parse_product,
)
from nvcre.platform.gpu_defaults import resolve_gpu_defaults

PRODUCT_LABELS: Final[Mapping[str, str]] = {
    "a100": "NVIDIA-A100-SXM4-80GB",
    "b200": "NVIDIA-B200",
    "b300": "NVIDIA-B300-SXM6-AC",
    "gb200": "NVIDIA-GB200",
    "gb300": "NVIDIA-GB300",
    "h100": "NVIDIA-H100-80GB-HBM3",
    "h200": "NVIDIA-H200",
    "l40": "NVIDIA-L40",
    "l40s": "NVIDIA-L40S",
    "rtxpro6000": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
}
"""A representative ``nvidia.com/gpu.product`` value for every known architecture."""

ARM64_ARCHITECTURES: Final = frozenset({"gb200", "gb300"})


def platform_names() -> str:
    return ", ".join(PLATFORMS)


def architecture_names() -> str:
    return ", ".join(GPU_ARCHITECTURES)


def check_platform(value: str, flag: str = "--platform") -> str:
    """``value`` if it names a platform, else ``ValueError`` with the CLI message listing them all."""
    if value not in PLATFORMS:
        raise ValueError(f'invalid {flag} "{value}": must be one of {platform_names()}')
    return value


def check_architecture(value: str, flag: str = "--gpu-arch") -> str:
    """A short name (``gb300``) or a product label (``NVIDIA-GB300``) -> the architecture."""
    arch = value if value in GPU_ARCHITECTURES else parse_product(value)
    if arch not in GPU_ARCHITECTURES:
        raise ValueError(f'invalid {flag} "{value}": must be one of {architecture_names()}')
    return arch


def _provider_id(platform: str, name: str, index: int) -> str:
    return {
        Platform.AWS: f"aws:///us-east-1a/i-{index:017x}",
        Platform.GCP: f"gce://synthetic-project/us-central1-a/{name}",
        Platform.AZURE: (
            "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/synthetic"
            f"/providers/Microsoft.Compute/virtualMachines/{name}"
        ),
        Platform.OCI: f"ocid1.instance.oc1.iad.synthetic{index}",
        Platform.ONPREM: "",
        Platform.TOGETHERAI: f"kubevirt://{name}",
        Platform.MISTRAL: f"metal3://{name}",
        Platform.FORGE: "",
        Platform.NSCALE: f"nscale://{name}",
    }[platform]


def synthetic_nodes(
    platform: str,
    architecture: str,
    *,
    count: int = 1,
    labels: Mapping[str, str] | None = None,
    gpus_per_node: int | None = None,
    name_prefix: str = "synthetic-node",
) -> list[dict[str, Any]]:
    """``count`` Ready GPU nodes of ``architecture`` on ``platform``, named ``<prefix>-<i>``.

    ``labels`` (e.g. the target's nodeSelector) are added first; the GPU labels win over them.
    Each node advertises ``gpus_per_node`` GPUs (default: the gpu-defaults value).
    """
    check_platform(platform)
    check_architecture(architecture)
    gpus = (
        gpus_per_node
        if gpus_per_node is not None
        else resolve_gpu_defaults(architecture, platform).gpus_per_node
    )
    nodes: list[dict[str, Any]] = []
    for index in range(count):
        name = f"{name_prefix}-{index}"
        hostname = f"{name_prefix}-forge-{index}" if platform == Platform.FORGE else name
        node_labels: dict[str, str] = {
            key: value
            for key, value in (labels or {}).items()
            if key not in (TOGETHERAI_WORKER_LABEL, FORGE_SITE_LABEL)  # they would change the platform
        }
        node_labels.update(
            {
                NodeLabel.HOSTNAME: hostname,
                NodeLabel.GPU_PRESENT: "true",
                NodeLabel.GPU_PRODUCT: PRODUCT_LABELS[architecture],
                NodeLabel.GPU_COUNT: str(gpus),
                "kubernetes.io/arch": "arm64" if architecture in ARM64_ARCHITECTURES else "amd64",
            }
        )
        if platform == Platform.TOGETHERAI:
            node_labels[TOGETHERAI_WORKER_LABEL] = ""
        if platform == Platform.FORGE:
            node_labels[FORGE_SITE_LABEL] = "synthetic"
        allocatable: dict[str, str] = {NodeLabel.GPU_RESOURCE: str(gpus), "cpu": "128", "memory": "2Ti"}
        if platform == Platform.NSCALE:
            allocatable[NSCALE_RDMA_RESOURCE] = "8"
        spec: dict[str, Any] = {}
        provider_id = _provider_id(platform, name, index)
        if provider_id:
            spec["providerID"] = provider_id
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": node_labels},
                "spec": spec,
                "status": {
                    "allocatable": allocatable,
                    "capacity": dict(allocatable),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return nodes
