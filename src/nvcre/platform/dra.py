"""GPU products and counts from NVIDIA DRA ``ResourceSlice`` objects (driver ``gpu.nvidia.com``).

On a DRA-only stack the nodes carry no ``nvidia.com/gpu.product`` label and no ``nvidia.com/gpu``
allocatable; the driver publishes each GPU as a device with a ``productName`` attribute instead.
The product name uses spaces (``NVIDIA H100 80GB HBM3``) where the label uses hyphens, so it is
normalized to the label form before ``parse_product`` sees it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

GPU_DRIVER: Final = "gpu.nvidia.com"


def _devices(slice_: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    devices = (slice_.get("spec") or {}).get("devices")
    return [d for d in devices if isinstance(d, Mapping)] if isinstance(devices, list) else []


def _attributes(device: Mapping[str, Any]) -> Mapping[str, Any]:
    # resource.k8s.io/v1 puts attributes on the device; v1beta1 under ``basic``.
    attributes = device.get("attributes")
    if not isinstance(attributes, Mapping):
        attributes = (device.get("basic") or {}).get("attributes")
    return attributes if isinstance(attributes, Mapping) else {}


def _string(attributes: Mapping[str, Any], name: str) -> str:
    value = attributes.get(name)
    if isinstance(value, Mapping):
        value = value.get("string")
    return str(value) if isinstance(value, str) else ""


def _gpu_slices(slices: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for slice_ in slices:
        spec = slice_.get("spec") or {}
        node = spec.get("nodeName") if isinstance(spec, Mapping) else None
        if isinstance(spec, Mapping) and spec.get("driver") == GPU_DRIVER and node:
            for device in _devices(slice_):
                attributes = _attributes(device)
                if _string(attributes, "type") in ("", "gpu"):
                    yield str(node), attributes


def normalize_product_name(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3`` (the GPU feature discovery label form)."""
    return "-".join(name.split())


def products_from_resource_slices(slices: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Node name -> product label of its first full GPU published by the NVIDIA DRA driver."""
    products: dict[str, str] = {}
    for node, attributes in _gpu_slices(slices):
        product = normalize_product_name(_string(attributes, "productName"))
        if product and node not in products:
            products[node] = product
    return products


def gpus_from_resource_slices(slices: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Node name -> number of full GPUs (MIG devices excluded) published by the NVIDIA DRA driver."""
    counts: dict[str, int] = {}
    for node, _ in _gpu_slices(slices):
        counts[node] = counts.get(node, 0) + 1
    return counts


@dataclass(frozen=True)
class GPUInventory:
    """The full GPUs the NVIDIA DRA driver publishes, by node: what a DRA-only node (no GPU
    Operator labels, no ``nvidia.com/gpu`` allocatable) is known by. Empty on other stacks."""

    products: Mapping[str, str] = field(default_factory=dict)
    """Node name -> product in the label form (``NVIDIA-H100-80GB-HBM3``)."""
    counts: Mapping[str, int] = field(default_factory=dict)
    """Node name -> number of full GPUs."""

    @classmethod
    def from_slices(cls, slices: Iterable[Mapping[str, Any]]) -> GPUInventory:
        listed = list(slices)
        return cls(products_from_resource_slices(listed), gpus_from_resource_slices(listed))

    def has_gpus(self, node: str) -> bool:
        return self.counts.get(node, 0) > 0
