"""The simulated accelerator's performance model: what a node's GPUs and links can do.

A healthy group reaches what the catalog's expected-performance table (:mod:`nvcre.expected`)
says its hardware and shape should: the table is the one source of "what healthy hardware
measures", for the sandbox as for nvcre's default floors. Where no row serves a group, each node
has its own figures: an NVLink bus bandwidth (what an intra-node all_reduce reaches at large
sizes; a multi-node NVLink one for GB200/GB300 cliques), a network bus bandwidth (what a
multi-node all_reduce reaches when this node is in the group), a start-up latency per fabric
and a GPU speed (the TFLOP/s/GPU a well-tuned Megatron run achieves), calibrated on the same
published runs (see docs/sandbox.md). Noise is a pure function of its key (a hash), never global
random state.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace

from nvcre.expected import GroupShape, expected_bandwidth
from nvcre.platform.detect import parse_product


@dataclass(frozen=True)
class Gpu:
    """One GPU product as nccl-tests and Megatron see it."""

    product: str  #: the ``nvidia.com/gpu.product`` label value
    device_name: str  #: CUDA's ``prop.name`` (the ``#  Rank`` line)
    memory_bytes: int  #: CUDA's ``totalGlobalMem``
    nvlink_busbw: float  #: GB/s, intra-node all_reduce busbw at large sizes
    tflops: float  #: achieved bf16 TFLOP/s per GPU in Megatron pre-training
    pci_bus_ids: tuple[str, ...]  #: ``[0000:xx:00]`` per device index
    mnnvl_busbw: float = 0.0  #: GB/s, all_reduce busbw of several nodes of one NVLink clique


@dataclass(frozen=True)
class Fabric:
    """The network a platform's GPU nodes talk over, as NCCL reports it."""

    name: str  #: ``efa``, ``ib``, ``roce``, ``tcpxo``, ``socket``
    network: str  #: what ``NCCL INFO Using network ...`` prints
    latency_us: float  #: small-message all_reduce time for 2 nodes
    transport: str  #: how ``NCCL INFO Channel ... via`` names it


_H100_BUS = ("04", "05", "0b", "0c", "84", "85", "8b", "8c")
_B_BUS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
_GB_BUS = ("01", "02", "03", "04")

GPUS: dict[str, Gpu] = {
    g.product: g
    for g in (
        Gpu("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 85_029_158_912, 480.0, 420.0, _H100_BUS),
        Gpu("NVIDIA-H200", "NVIDIA H200", 150_109_634_560, 480.0, 450.0, _H100_BUS),
        Gpu("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 85_198_045_184, 232.0, 165.0, _H100_BUS),
        Gpu("NVIDIA-B200", "NVIDIA B200", 191_514_279_936, 880.0, 800.0, _B_BUS),
        Gpu("NVIDIA-B300-SXM6-AC", "NVIDIA B300 SXM6 AC", 288_000_000_000, 880.0, 950.0, _B_BUS),
        Gpu("NVIDIA-GB200", "NVIDIA GB200", 191_514_279_936, 680.0, 820.0, _GB_BUS, mnnvl_busbw=835.0),
        Gpu("NVIDIA-GB300", "NVIDIA GB300", 288_000_000_000, 680.0, 980.0, _GB_BUS, mnnvl_busbw=835.0),
        Gpu("NVIDIA-L40S", "NVIDIA L40S", 47_697_362_944, 24.0, 180.0, _H100_BUS),
        Gpu("NVIDIA-L40", "NVIDIA L40", 47_697_362_944, 24.0, 150.0, _H100_BUS),
        Gpu(
            "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            101_971_345_408,
            48.0,
            260.0,
            _H100_BUS,
        ),
    )
}

#: platform -> its GPU fabric (GB200/GB300 inside a clique use multi-node NVLink instead).
FABRICS: dict[str, Fabric] = {
    "aws": Fabric("efa", "AWS Libfabric", 70.0, "NET/Libfabric/0/GDRDMA"),
    "gcp": Fabric("tcpxo", "FasTrak", 120.0, "NET/FasTrak/0"),
    "azure": Fabric("ib", "IB", 25.0, "NET/IB/0/GDRDMA"),
    "oci": Fabric("roce", "IB", 30.0, "NET/IB/0/GDRDMA"),
    "nscale": Fabric("roce", "IB", 30.0, "NET/IB/0/GDRDMA"),
    "togetherai": Fabric("ib", "IB", 25.0, "NET/IB/0/GDRDMA"),
    "mistral": Fabric("ib", "IB", 25.0, "NET/IB/0/GDRDMA"),
    "forge": Fabric("ib", "IB", 25.0, "NET/IB/0/GDRDMA"),
    "onprem": Fabric("ib", "IB", 25.0, "NET/IB/0/GDRDMA"),
    "openstack": Fabric("socket", "Socket", 300.0, "NET/Socket/0"),
}

#: Network all_reduce busbw (GB/s) a node reaches by fabric and product; the fabric's default
#: (``None``) otherwise, where the expected-performance table has no row for a group. 8x400G
#: EFA on H100-class nodes: ~470-490 GB/s at two nodes (corpus: p5 2-node 487 GB/s at 16 GiB),
#: GCP A3 Mega TCPXO 339 GB/s at 8 GiB, p4de A100 78 GB/s; InfiniBand as the table's per-NIC
#: figures (H100 396, A100 192).
_NETWORK: dict[tuple[str, str | None], float] = {
    ("efa", None): 470.0,
    ("efa", "NVIDIA-A100-SXM4-80GB"): 80.0,
    ("ib", None): 396.0,
    ("ib", "NVIDIA-A100-SXM4-80GB"): 192.0,
    ("roce", None): 440.0,
    ("tcpxo", None): 340.0,
    ("socket", None): 12.0,
}

#: Intra-node all_reduce latency (us) on one node's NVLink.
NVLINK_LATENCY_US = 13.0


@dataclass(frozen=True)
class NodeModel:
    """What one simulated node can do. Faults scale these numbers (see :mod:`.faults`)."""

    name: str
    gpu: Gpu
    fabric: Fabric
    gpus: int = 8
    platform: str = ""  #: nvcre's platform name (``aws``...): with the GPU, what the table is read for
    #: Topology domain (the platform's network block, or the clique): what a ``link`` fault names.
    domain: str | None = None
    #: Multi-node NVLink domain (``nvidia.com/gpu.clique``, GB200/GB300): nodes of one such domain
    #: talk over NVLink; all others over the network, whatever their network block.
    nvlink_domain: str | None = None
    nvlink_busbw: float = 0.0
    mnnvl_busbw: float = 0.0
    network_busbw: float = 0.0
    tflops: float = 0.0


def node_model(
    name: str,
    product: str,
    platform: str,
    *,
    gpus: int = 8,
    domain: str | None = None,
    nvlink_domain: str | None = None,
) -> NodeModel:
    """The healthy model of node ``name`` with ``gpus`` GPUs ``product`` on ``platform``."""
    try:
        gpu = GPUS[product]
    except KeyError:
        raise ValueError(f"unknown GPU product {product!r}; known: {', '.join(sorted(GPUS))}") from None
    try:
        fabric = FABRICS[platform]
    except KeyError:
        raise ValueError(f"unknown platform {platform!r}; known: {', '.join(sorted(FABRICS))}") from None
    network = _NETWORK.get((fabric.name, product), _NETWORK[(fabric.name, None)])
    return NodeModel(
        name=name,
        gpu=gpu,
        fabric=fabric,
        gpus=gpus,
        platform=platform,
        domain=domain,
        nvlink_domain=nvlink_domain,
        nvlink_busbw=gpu.nvlink_busbw,
        mnnvl_busbw=gpu.mnnvl_busbw,
        network_busbw=network,
        tflops=gpu.tflops,
    )


def on_fabric(model: NodeModel, fabric: str) -> NodeModel:
    """``model`` talking over ``fabric`` (a :class:`Fabric` name, e.g. ``socket``) instead of its
    platform's: that fabric's transport, latency and network bandwidth."""
    found = next(f for f in FABRICS.values() if f.name == fabric)
    network = _NETWORK.get((fabric, model.gpu.product), _NETWORK[(fabric, None)])
    return replace(model, fabric=found, network_busbw=network)


def group_shape(nodes: Sequence[NodeModel]) -> GroupShape:
    """The shape the expected-performance table reads a group of ``nodes`` as: its node count,
    the topology domains it spans, and whether it is one NVLink clique."""
    domains = {n.domain for n in nodes if n.domain is not None}
    cliques = {n.nvlink_domain for n in nodes}
    clique = len(nodes) > 1 and len(cliques) == 1 and None not in cliques
    return GroupShape(len(nodes), len(domains), mnnvl=clique)


def expected_busbw(nodes: Sequence[NodeModel], collective: str) -> float | None:
    """The bus bandwidth (GB/s) the expected-performance table gives a healthy group of ``nodes``
    in ``collective`` (its all_reduce figure where the collective has no row of its own);
    ``None`` when no row serves the group or its nodes differ in GPU or platform."""
    first = nodes[0]
    if not all(n.gpu == first.gpu and n.platform == first.platform for n in nodes):
        return None
    arch, shape = parse_product(first.gpu.product), group_shape(nodes)
    for name in dict.fromkeys((collective, "all_reduce")):
        figure = expected_bandwidth(arch, first.platform, name, shape)
        if figure is not None:
            return figure.value
    return None


def fell_back(model: NodeModel) -> bool:
    """Whether the node's NCCL talks over another fabric than its platform's (``tcp-fallback``)."""
    return FABRICS.get(model.platform, model.fabric) != model.fabric


def scaled(model: NodeModel, *, nvlink: float = 1.0, network: float = 1.0, speed: float = 1.0) -> NodeModel:
    """``model`` with its bandwidths and GPU speed multiplied by the given factors."""
    return replace(
        model,
        nvlink_busbw=model.nvlink_busbw * nvlink,
        network_busbw=model.network_busbw * network,
        tflops=model.tflops * speed,
    )


_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``8``, ``16G``, ``512M``, ``1K`` as bytes (binary units, as nccl-tests reads them)."""
    unit_ = _UNITS.get(text[-1:].upper()) if text else None
    digits = text[:-1] if unit_ else text
    if not digits.isdigit():
        raise ValueError(f"invalid size {text!r}")
    return int(digits) * (unit_ or 1)


def unit(*key: object) -> float:
    """A uniform number in [0, 1) that depends only on ``key`` (seed, node, size, cycle...)."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return float(struct.unpack(">Q", digest)[0]) / 2.0**64


def noise(spread: float, *key: object) -> float:
    """A factor in ``[1 - spread, 1 + spread]`` that depends only on ``key``."""
    return 1.0 + spread * (2.0 * unit(*key) - 1.0)


__all__ = [
    "FABRICS",
    "GPUS",
    "NVLINK_LATENCY_US",
    "Fabric",
    "Gpu",
    "NodeModel",
    "expected_busbw",
    "fell_back",
    "group_shape",
    "node_model",
    "noise",
    "on_fabric",
    "parse_size",
    "scaled",
    "unit",
]
