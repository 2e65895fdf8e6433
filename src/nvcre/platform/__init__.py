"""Platform and GPU detection from nodes, gpu-defaults, NIC resource detection, synthetic nodes.

Every path that decides a platform or an architecture (Certification, Workflow and WorkloadRun
controllers, offline CLI renders, cluster info) goes through these functions.
"""

from nvcre.platform.detect import (
    GPU_ARCHITECTURES,
    PLATFORMS,
    TOPOLOGY_KEYS,
    UNKNOWN_ARCHITECTURE,
    GPUArchitectureDetection,
    HeterogeneousPlatformError,
    Platform,
    PlatformDetection,
    architecture_from_node_selector,
    detect_gpu_architecture,
    detect_platform,
    is_known_architecture,
    node_architecture,
    node_name,
    node_platform,
    parse_product,
    sort_nodes,
    topology_domain_count,
)
from nvcre.platform.dra import GPUInventory, gpus_from_resource_slices, products_from_resource_slices
from nvcre.platform.events import Event
from nvcre.platform.gpu_defaults import GPUDefaults, gpu_defaults, resolve_gpu_defaults
from nvcre.platform.nic import NICDetection, detect_nic_resource, detection_applies, resolve_nic_resource
from nvcre.platform.synthetic import PRODUCT_LABELS, check_architecture, check_platform, synthetic_nodes

__all__ = [
    "GPU_ARCHITECTURES",
    "PLATFORMS",
    "PRODUCT_LABELS",
    "TOPOLOGY_KEYS",
    "UNKNOWN_ARCHITECTURE",
    "Event",
    "GPUArchitectureDetection",
    "GPUDefaults",
    "GPUInventory",
    "HeterogeneousPlatformError",
    "NICDetection",
    "Platform",
    "PlatformDetection",
    "architecture_from_node_selector",
    "check_architecture",
    "check_platform",
    "detect_gpu_architecture",
    "detect_nic_resource",
    "detect_platform",
    "detection_applies",
    "gpu_defaults",
    "gpus_from_resource_slices",
    "is_known_architecture",
    "node_architecture",
    "node_name",
    "node_platform",
    "parse_product",
    "products_from_resource_slices",
    "resolve_gpu_defaults",
    "resolve_nic_resource",
    "sort_nodes",
    "synthetic_nodes",
    "topology_domain_count",
]
