"""Platform from ``spec.providerID`` and GPU architecture from ``nvidia.com/gpu.product``.

Nodes are plain Kubernetes Node dicts. Every decision comes back as a small frozen dataclass that
carries the explanation (messages, excluded nodes) next to the value, so a controller can turn it
into events and conditions and the CLI into a line on stderr.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from nvcre.api.v1alpha1.constants import EventReason, NodeLabel, WorkflowReason, members
from nvcre.platform.events import Event, warning_if


class Platform:
    AWS: Final = "aws"
    GCP: Final = "gcp"
    AZURE: Final = "azure"
    OCI: Final = "oci"
    ONPREM: Final = "onprem"
    TOGETHERAI: Final = "togetherai"
    MISTRAL: Final = "mistral"
    FORGE: Final = "forge"
    NSCALE: Final = "nscale"


PLATFORMS: Final = members(Platform)
"""Every platform name, in the order CLI messages list them."""

UNKNOWN_ARCHITECTURE: Final = "unknown"
"""The architecture when no node carries a product label."""

GPU_ARCHITECTURES: Final = (
    "a100",
    "b200",
    "b300",
    "gb200",
    "gb300",
    "h100",
    "h200",
    "l40",
    "l40s",
    "rtxpro6000",
)
"""Architectures with their own gpu-defaults entry (sorted); others fall back with a warning."""

TOGETHERAI_WORKER_LABEL: Final = "node-role.together.ai/worker"
FORGE_SITE_LABEL: Final = "nke.nvidia.com/site-name"
NSCALE_RDMA_RESOURCE: Final = "nscale.com/rdmashare"

_PREFIXES: Final = (
    ("aws://", Platform.AWS),
    ("gce://", Platform.GCP),
    ("azure://", Platform.AZURE),
    ("ocid1.", Platform.OCI),
    ("openstack://", Platform.ONPREM),
    ("nscale://", Platform.NSCALE),
    ("metal3://", Platform.MISTRAL),
)


# --- node accessors ----------------------------------------------------------------------------


# Detection reads every node several times per render (4,096 nodes per Certification category):
# the ``type(...) is dict`` test short-cuts the much slower ``isinstance`` against the ABC.


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def node_name(node: Mapping[str, Any]) -> str:
    return str(_mapping(node.get("metadata")).get("name") or "")


def node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return _mapping(_mapping(node.get("metadata")).get("labels"))


def node_allocatable(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(node.get("status")).get("allocatable"))


def _encoded_name(named: tuple[str, Mapping[str, Any]]) -> bytes:
    return named[0].encode()


def _by_name(nodes: Iterable[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, node) pairs in byte-wise name order (stable), each name read once."""
    named = [(node_name(node), node) for node in nodes]
    named.sort(key=_encoded_name)
    return named


def sort_nodes(nodes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Nodes in byte-wise name order, the order every detection rule is defined over."""
    return [node for _, node in _by_name(nodes)]


# --- platform ----------------------------------------------------------------------------------


def node_platform(node: Mapping[str, Any]) -> str:
    """The platform of one node; the first matching rule of the table wins (case-sensitive)."""
    provider_id = str(_mapping(node.get("spec")).get("providerID") or "")
    labels = node_labels(node)
    if not provider_id:
        if "forge" in str(labels.get(NodeLabel.HOSTNAME, "")) or FORGE_SITE_LABEL in labels:
            return Platform.FORGE
        return Platform.ONPREM
    for prefix, platform in _PREFIXES:
        if provider_id.startswith(prefix):
            return platform
    if provider_id.startswith("kubevirt://"):
        return Platform.TOGETHERAI if TOGETHERAI_WORKER_LABEL in labels else Platform.ONPREM
    return Platform.ONPREM


class HeterogeneousPlatformError(ValueError):
    """Target nodes are on more than one platform."""

    reason: Final = WorkflowReason.HETEROGENEOUS_PLATFORM


@dataclass(frozen=True)
class PlatformDetection:
    """The cluster platform: the platform of the first node in name order (``onprem`` if none)."""

    platform: str
    counts: Mapping[str, int] = field(default_factory=dict)
    """Nodes per platform."""

    @property
    def heterogeneous(self) -> bool:
        return len(self.counts) > 1

    @property
    def message(self) -> str:
        """``heterogeneous platforms detected: map[aws:1 gcp:2]`` when the nodes disagree, else ``""``."""
        if not self.heterogeneous:
            return ""
        pairs = " ".join(f"{name}:{count}" for name, count in sorted(self.counts.items()))
        return f"heterogeneous platforms detected: map[{pairs}]"

    def require_consistent(self) -> str:
        """The platform, or ``HeterogeneousPlatformError`` when the nodes disagree."""
        if self.heterogeneous:
            raise HeterogeneousPlatformError(self.message)
        return self.platform


def detect_platform(nodes: Iterable[Mapping[str, Any]]) -> PlatformDetection:
    ordered = _by_name(nodes)
    if not ordered:
        return PlatformDetection(Platform.ONPREM)
    counts: dict[str, int] = {}
    for _, node in ordered:
        platform = node_platform(node)
        counts[platform] = counts.get(platform, 0) + 1
    return PlatformDetection(node_platform(ordered[0][1]), counts)


# --- GPU architecture --------------------------------------------------------------------------


@lru_cache(maxsize=256)
def parse_product(label: str) -> str:
    """Architecture family of a ``nvidia.com/gpu.product`` value; ``""`` for an empty label.

    ``NVIDIA-H100-80GB-HBM3`` gives ``h100``, ``NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition``
    gives ``rtxpro6000``, ``Tesla-T4`` gives ``tesla`` (not a known architecture: see
    ``is_known_architecture``).
    """
    if not label:
        return ""
    rest = label.removeprefix("NVIDIA-")
    if rest.upper().startswith("RTX-PRO-6000"):
        return "rtxpro6000"
    hyphen = rest.find("-")
    if hyphen > 0:
        rest = rest[:hyphen]
    return rest.lower()


def is_known_architecture(arch: str) -> bool:
    return arch in GPU_ARCHITECTURES


def node_architecture(node: Mapping[str, Any], products: Mapping[str, str] | None = None) -> str:
    """The node's architecture, ``""`` when it has no product label.

    ``products`` (node name -> product, e.g. from DRA ResourceSlices) is used for a node
    without the label.
    """
    label = str(node_labels(node).get(NodeLabel.GPU_PRODUCT) or "")
    if not label and products:
        label = products.get(node_name(node), "")
    return parse_product(label)


def architecture_from_node_selector(node_selector: Mapping[str, str] | None) -> str:
    """The architecture a target's ``nodeSelector`` pins through ``nvidia.com/gpu.product``, or ``""``."""
    return parse_product(str((node_selector or {}).get(NodeLabel.GPU_PRODUCT) or ""))


@dataclass(frozen=True)
class GPUArchitectureDetection:
    """Majority vote over the nodes' product labels.

    ``nodes`` are the names kept (those of the winning architecture, or all of them when no node
    is labelled); ``excluded`` are the rest, in name order, including unlabelled nodes when a
    labelled majority exists.
    """

    architecture: str
    nodes: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    votes: Mapping[str, int] = field(default_factory=dict)
    unlabeled: tuple[str, ...] = ()

    @property
    def heterogeneous(self) -> bool:
        return bool(self.excluded)

    @property
    def total(self) -> int:
        return len(self.nodes) + len(self.excluded)

    @property
    def message(self) -> str:
        """The ``HeterogeneousGPU`` warning text, ``""`` when no node was excluded."""
        if not self.excluded:
            return ""
        return (
            f"Filtered {len(self.nodes)}/{self.total} nodes to primary GPU architecture "
            f"{self.architecture}; excluded: {', '.join(self.excluded)}"
        )

    @property
    def events(self) -> tuple[Event, ...]:
        return warning_if(EventReason.HETEROGENEOUS_GPU, self.message)

    def filter(self, nodes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The given nodes that were kept, in name order."""
        kept = set(self.nodes)
        return [node for name, node in _by_name(nodes) if name in kept]


def detect_gpu_architecture(
    nodes: Iterable[Mapping[str, Any]], products: Mapping[str, str] | None = None
) -> GPUArchitectureDetection:
    """The architecture with the most labelled nodes (strictly more wins).

    A tie goes to the architecture whose earliest node comes first in name order. Unlabelled
    nodes do not vote; ``unknown`` wins only when no node is labelled, and then every node is kept.
    ``products`` supplies the product of nodes without the label (see ``nvcre.platform.dra``).
    """
    ordered = _by_name(nodes)
    names = tuple(name for name, _ in ordered)
    archs = {name: node_architecture(node, products) for name, node in ordered}
    votes: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    unlabeled: list[str] = []
    for position, name in enumerate(names):
        arch = archs[name]
        if not arch:
            unlabeled.append(name)
            continue
        votes[arch] = votes.get(arch, 0) + 1
        first_seen.setdefault(arch, position)
    if not votes:
        return GPUArchitectureDetection(UNKNOWN_ARCHITECTURE, names, (), {}, tuple(unlabeled))
    winner = ""
    for arch in sorted(votes, key=lambda a: first_seen[a]):
        if not winner or votes[arch] > votes[winner]:
            winner = arch
    kept = tuple(name for name, arch in archs.items() if arch == winner)
    excluded = tuple(name for name, arch in archs.items() if arch != winner)
    return GPUArchitectureDetection(winner, kept, excluded, dict(votes), tuple(unlabeled))


TOPOLOGY_KEYS: Final = {
    Platform.AWS: "topology.k8s.aws/network-node-layer-1",
    Platform.GCP: "cloud.google.com/gce-topology-block",
    Platform.AZURE: "kubernetes.azure.com/ppg",
}
"""The network-block label each cloud puts on its nodes; other platforms have none."""


def topology_domain_count(nodes: Sequence[Mapping[str, Any]], topology_key: str | None) -> int:
    """Distinct non-empty values of the topology label across the nodes; 0 without a key."""
    if not topology_key:
        return 0
    values = {str(node_labels(node).get(topology_key) or "") for node in nodes}
    values.discard("")
    return len(values)
