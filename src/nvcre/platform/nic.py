"""RDMA NIC extended-resource auto-detection for on-prem NVL72 and HGX targets.

When ``nicResourceName`` is unset on an on-prem GB200/GB300 (or x86 HGX B200/B300) target, the
controller requests the one candidate resource (``rdma/*`` or ``nvidia.com/mlnxnics``) that every
target node can supply at the resolved ``mlnxPerNode`` count. Anything else requests nothing and
explains why in a Normal ``NICResourceDetection`` event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal

from nvcre.api.v1alpha1.constants import EventReason
from nvcre.platform.detect import Platform, node_allocatable
from nvcre.platform.events import Event

MLNXNICS_RESOURCE: Final = "nvidia.com/mlnxnics"
RDMA_PREFIX: Final = "rdma/"
DETECTION_ARCHITECTURES: Final = frozenset({"gb200", "gb300", "b200", "b300"})
"""On-prem architectures whose fragments request a NIC resource (set or auto-detected)."""

NICSource = Literal["field", "detected", "undetected", "not-applicable"]

_QUANTITY = re.compile(r"^([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_SUFFIX: Final[Mapping[str | None, Decimal]] = {
    None: Decimal(1),
    "m": Decimal("0.001"),
    **{suffix: Decimal(1000) ** power for power, suffix in enumerate("kMGTPE", start=1)},
    **{f"{suffix}i": Decimal(1024) ** power for power, suffix in enumerate("KMGTPE", start=1)},
}
"""A quantity's suffix to its factor: decimal (``k`` = 1000, ``M``...) and binary (``Ki`` = 1024...)."""


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity (``"8"``, ``"1k"``, ``"2Ki"``, ``500m``) as a number; ``None`` if invalid."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return None
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except InvalidOperation:
        return None


def is_candidate(resource: str) -> bool:
    return resource.startswith(RDMA_PREFIX) or resource == MLNXNICS_RESOURCE


def detection_applies(platform: str, architecture: str) -> bool:
    """Detection runs only for on-prem NVL72 (GB200/GB300) and x86 HGX (B200/B300) targets."""
    return platform == Platform.ONPREM and architecture in DETECTION_ARCHITECTURES


@dataclass(frozen=True)
class NICDetection:
    """Which NIC resource the workload requests, and why.

    ``resource_name`` is ``""`` when nothing is requested; ``count`` is always ``mlnxPerNode``
    (also for a detected name). ``message`` is the event text when detection ran and chose nothing.
    """

    resource_name: str
    count: int
    source: NICSource
    required: int = 0
    present: tuple[str, ...] = ()
    qualifying: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        if self.source != "undetected":
            return ""
        if len(self.qualifying) > 1:
            return (
                "NIC resource auto-detection found multiple candidates allocatable on every target node "
                f"({', '.join(self.qualifying)}); no NIC resource is requested. "
                "Set nicResourceName to choose one."
            )
        if not self.present:
            return (
                "NIC resource auto-detection found no RDMA extended resource (rdma/* or nvidia.com/mlnxnics) "
                "on any target node; no NIC resource is requested. Set nicResourceName to request one."
            )
        return (
            f"NIC resource auto-detection found candidates ({', '.join(self.present)}), but none is "
            f"allocatable at the requested count {self.required} on every target node; no NIC resource "
            "is requested. Set nicResourceName to request one, or adjust mlnxPerNode."
        )

    @property
    def events(self) -> tuple[Event, ...]:
        if self.source != "undetected":
            return ()
        return (Event.normal(EventReason.NIC_RESOURCE_DETECTION, self.message),)


def detect_nic_resource(nodes: Iterable[Mapping[str, Any]], mlnx_per_node: int) -> NICDetection:
    """Run detection over the target nodes (no gate: see ``resolve_nic_resource``)."""
    node_list = list(nodes)
    required = max(mlnx_per_node, 1)
    present: set[str] = set()
    for node in node_list:
        present.update(name for name in node_allocatable(node) if is_candidate(str(name)))

    def qualifies(resource: str) -> bool:
        for node in node_list:
            amount = parse_quantity(node_allocatable(node).get(resource))
            if amount is None or amount < required:
                return False
        return True

    qualifying = tuple(sorted(name for name in present if node_list and qualifies(name)))
    present_sorted = tuple(sorted(present))
    if len(qualifying) == 1:
        return NICDetection(qualifying[0], mlnx_per_node, "detected", required, present_sorted, qualifying)
    return NICDetection("", mlnx_per_node, "undetected", required, present_sorted, qualifying)


def resolve_nic_resource(
    nodes: Iterable[Mapping[str, Any]],
    *,
    platform: str,
    architecture: str,
    mlnx_per_node: int,
    nic_resource_name: str | None = None,
) -> NICDetection:
    """The field when set (no detection, no event); detection on gated targets; else nothing."""
    if nic_resource_name:
        return NICDetection(nic_resource_name, mlnx_per_node, "field")
    if not detection_applies(platform, architecture):
        return NICDetection("", mlnx_per_node, "not-applicable")
    return detect_nic_resource(nodes, mlnx_per_node)
