"""What a WorkloadRun build decides about its target: platform, GPU architecture, per-node resources.

Detection itself (providerID, majority vote, gpu-defaults, NIC resource detection) is
``nvcre.platform``; this module applies it to a run: forced values, offline fallbacks, and the
WorkloadRun-specific rules (offline on-prem NVL72/HGX needs ``nicResourceName``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import EventReason
from nvcre.api.v1alpha1.workloadrun import WorkloadRunSpec
from nvcre.platform import (
    UNKNOWN_ARCHITECTURE,
    Event,
    NICDetection,
    architecture_from_node_selector,
    detect_gpu_architecture,
    detect_platform,
    resolve_gpu_defaults,
)
from nvcre.platform.nic import detection_applies, resolve_nic_resource
from nvcre.render.workloadrun.errors import BuildError

UNKNOWN_ARCHITECTURE_MESSAGE = (
    "cannot determine GPU architecture: nvidia.com/gpu.product label required in target.nodeSelector"
)


@dataclass(frozen=True)
class Detection:
    """What the build decided about the target: platform, architecture and per-node resources."""

    platform: str
    """``""`` when unknown (offline render without ``--platform``)."""
    gpu_architecture: str
    gpus_per_node: int
    mlnx_per_node: int
    enable_mnnvl: bool
    nic: NICDetection


def _architecture(
    spec: WorkloadRunSpec,
    nodes: Sequence[Mapping[str, Any]] | None,
    forced: str | None,
    gpu_products: Mapping[str, str] | None = None,
) -> str:
    if forced:
        return forced
    selector = spec.target.node_selector if spec.target else None
    if nodes is not None:
        arch = detect_gpu_architecture(nodes, gpu_products).architecture
        if arch != UNKNOWN_ARCHITECTURE:
            return arch
        return architecture_from_node_selector(selector) or arch
    arch = architecture_from_node_selector(selector)
    if not arch:
        raise BuildError(UNKNOWN_ARCHITECTURE_MESSAGE)
    return arch


def _nic(
    spec: WorkloadRunSpec,
    nodes: Sequence[Mapping[str, Any]] | None,
    platform: str,
    arch: str,
    mlnx: int,
) -> NICDetection:
    if spec.nic_resource_name:
        return NICDetection(spec.nic_resource_name, mlnx, "field")
    if mlnx == 0 or not detection_applies(platform, arch):
        return NICDetection("", mlnx, "not-applicable")
    if nodes is None:
        raise BuildError(
            f"spec.nicResourceName: required to render offline for {platform} {arch}: without a cluster "
            "there are no nodes to detect the RDMA NIC resource on; set it (for example rdma/ib or "
            "nvidia.com/mlnxnics), set mlnxPerNode: 0 to request none, or render with --dry-run"
        )
    return resolve_nic_resource(nodes, platform=platform, architecture=arch, mlnx_per_node=mlnx)


def detect(
    spec: WorkloadRunSpec,
    nodes: Sequence[Mapping[str, Any]] | None,
    platform: str | None,
    gpu_arch: str | None,
    gpu_products: Mapping[str, str] | None = None,
) -> tuple[Detection, tuple[Event, ...]]:
    """``gpu_products`` (node name -> product, from DRA ResourceSlices) stands in for the product
    label of a node without one."""
    if platform is None:
        platform = detect_platform(nodes).platform if nodes is not None else ""
    arch = _architecture(spec, nodes, gpu_arch, gpu_products)
    defaults = resolve_gpu_defaults(
        arch,
        platform,
        gpus_per_node=spec.gpus_per_node,
        mlnx_per_node=spec.mlnx_per_node,
        enable_mnnvl=spec.enable_mnnvl,
    )
    nic = _nic(spec, nodes, platform, arch, defaults.mlnx_per_node)
    detection = Detection(
        platform=platform,
        gpu_architecture=arch,
        gpus_per_node=defaults.gpus_per_node,
        mlnx_per_node=defaults.mlnx_per_node,
        enable_mnnvl=defaults.enable_mnnvl,
        nic=nic,
    )
    events = (*defaults.events, *nic.events)
    if nic.source == "field" and platform and not detection_applies(platform, arch):
        # Only the on-prem NVL72/HGX rows request the field; say so rather than drop it silently.
        events += (
            Event.normal(
                EventReason.NIC_RESOURCE_DETECTION,
                f"nicResourceName {nic.resource_name} is requested only on on-prem GB200, GB300, B200 and "
                f"B300 targets; not requested on {platform} {arch}",
            ),
        )
    return detection, events
