"""What ``nvcrectl cluster info`` says about a cluster, decided from plain Node dicts and the catalog.

Every rule is the controller's own: discovery and the cordon filter
(``nvcre.orchestration.discovery``), platform and the GPU-architecture majority vote
(``nvcre.platform``), the GPU-capacity filter (``nvcre.orchestration.capacity``), and, for each
catalog category, the render the Certification controller makes (``nvcre.catalog.render_category``)
with the extended resources its pods request checked against what the nodes can supply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre.api.v1alpha1.certification import Certification
from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.catalog import BuildError, Catalog, Entry, load_catalog, render_category
from nvcre.expected import (
    ANY_PLATFORM,
    COLLECTIVES,
    NIC_LOOPBACK,
    TABLE_VERSION,
    ExpectedFigure,
    GroupShape,
    Row,
    collective_name,
    expected_bandwidth,
    expected_training,
    rows,
)
from nvcre.orchestration.capacity import GPU, allocatable_gpus, filter_capacity, requested_counts
from nvcre.orchestration.discovery import discover
from nvcre.platform import (
    TOPOLOGY_KEYS,
    UNKNOWN_ARCHITECTURE,
    GPUInventory,
    detect_gpu_architecture,
    detect_platform,
    gpu_defaults,
    node_architecture,
    node_name,
    resolve_nic_resource,
)
from nvcre.platform.detect import NSCALE_RDMA_RESOURCE, node_allocatable, node_labels
from nvcre.platform.nic import is_candidate, parse_quantity

EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"
_BASIC_RESOURCES: Final = frozenset({"cpu", "memory", "pods", "ephemeral-storage", GPU})


class ClusterInfoError(ValueError):
    """The cluster has no GPU node nvcre could run on (the command exits 1 with this message)."""


def is_nic_resource(resource: str) -> bool:
    """An RDMA/EFA network resource a device plugin advertises (``rdma/*``, mlnxnics, EFA, nscale)."""
    return is_candidate(resource) or resource in (EFA_RESOURCE, NSCALE_RDMA_RESOURCE)


@dataclass(frozen=True)
class NodeInfo:
    name: str
    gpus: int
    """Allocatable ``nvidia.com/gpu``; 0 when absent or not a whole number."""
    ready: bool
    product: str
    rack: str = ""
    nvlink_domain: str = ""
    nics: Mapping[str, str] | None = None
    """NIC resources allocatable on the node (name -> quantity as the node reports it)."""


@dataclass(frozen=True)
class Domain:
    name: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Topology:
    key: str
    domains: tuple[Domain, ...]


@dataclass(frozen=True)
class Exclusion:
    node: str
    reason: str
    """``Cordoned``, ``GPUArchitecture`` or ``InsufficientGPUCapacity``."""
    message: str


@dataclass(frozen=True)
class NICResource:
    name: str
    nodes: int
    """How many of the nodes advertise it."""
    min_per_node: str
    max_per_node: str


@dataclass(frozen=True)
class CategoryFit:
    domain: str
    variant: str
    fits: bool
    nodes: int = 0
    """Nodes the category would run on (0 when it does not fit)."""
    nodes_per_job: int = 0
    gpus_per_node: int = 0
    message: str = ""
    """Why it does not fit, or what the controller would exclude for it."""
    members: tuple[str, ...] = ()
    """The nodes it would run on."""
    measures: str = ""
    """What its workload measures: a collective (``all_reduce``...), ``training``, or ``""``."""
    workload_nodes: int = 0
    """Nodes one workload spans (its TrainJob's ``numNodes``): 1 for the per-node loopback entries."""

    @property
    def key(self) -> str:
        return f"{self.domain}/{self.variant}"


TRAINING: Final = "training"


@dataclass(frozen=True)
class ExpectedCategory:
    """What one fitting catalog category should measure on a group of this cluster."""

    key: str
    measures: str
    shape: GroupShape
    figures: tuple[ExpectedFigure, ...]
    """Empty: no published figure for this hardware and shape."""


@dataclass(frozen=True)
class ExpectedPerformance:
    """The expected-performance table as it applies to the detected architecture and platform."""

    version: str
    categories: tuple[ExpectedCategory, ...]
    collectives: tuple[tuple[str, tuple[Row, ...]], ...]
    """Each collective the catalog's NCCL categories measure, with the table's rows for this
    architecture and platform (empty: no published figure)."""


@dataclass(frozen=True)
class ClusterInfo:
    platform: str
    platforms: Mapping[str, int]
    """Nodes per platform (more than one key: nvcre refuses to run)."""
    gpu_architecture: str
    gpu_product: str
    gpus_per_node: int
    """The smallest per-node count: a job asks for the same count on every node."""
    catalog_gpus_per_node: int
    nodes: tuple[NodeInfo, ...]
    topology: Topology | None
    topology_key: str
    """The key looked for (given, or the platform's default; ``""`` when the platform has none)."""
    nvlink_domains: Topology | None
    nic_resources: tuple[NICResource, ...]
    nic_message: str
    """Which NIC resource nvcre requests on this platform and architecture, and why."""
    exclusions: tuple[Exclusion, ...]
    categories: tuple[CategoryFit, ...]
    expected: ExpectedPerformance

    @property
    def total_nodes(self) -> int:
        return len(self.nodes)

    @property
    def ready_nodes(self) -> int:
        return sum(node.ready for node in self.nodes)

    @property
    def total_gpus(self) -> int:
        return sum(node.gpus for node in self.nodes)

    @property
    def mixed_gpu_counts(self) -> bool:
        return len({node.gpus for node in self.nodes}) > 1

    @property
    def zero_gpu_nodes(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes if node.gpus == 0)

    @property
    def heterogeneous_platform(self) -> bool:
        return len(self.platforms) > 1


def is_ready(node: Mapping[str, Any]) -> bool:
    """The node's ``Ready`` condition is ``True``."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _label(node: Mapping[str, Any], key: str) -> str:
    return str(node_labels(node).get(key) or "") if key else ""


def _domains(nodes: Sequence[NodeInfo], key: str, value_of: str) -> Topology | None:
    members: dict[str, list[str]] = {}
    for node in nodes:
        value = getattr(node, value_of)
        if value:
            members.setdefault(value, []).append(node.name)
    if not key or not members:
        return None
    return Topology(key, tuple(Domain(name, tuple(sorted(members[name]))) for name in sorted(members)))


def _nic_resources(nodes: Sequence[Mapping[str, Any]]) -> tuple[NICResource, ...]:
    quantities: dict[str, list[str]] = {}
    for node in nodes:
        for resource, quantity in node_allocatable(node).items():
            if is_nic_resource(str(resource)):
                quantities.setdefault(str(resource), []).append(str(quantity))
    out = []
    for resource in sorted(quantities):
        ordered = sorted(quantities[resource], key=lambda q: parse_quantity(q) or 0)
        out.append(NICResource(resource, len(ordered), ordered[0], ordered[-1]))
    return tuple(out)


def _probe_certification(product: str, domain: str, variant: str) -> Certification:
    """A Certification of one category targeting the discovered GPU product, with no options set."""
    selector = {NodeLabel.GPU_PRESENT: "true"}
    if product:
        selector[NodeLabel.GPU_PRODUCT] = product
    return Certification.model_validate(
        {
            "apiVersion": Certification.api_version_of(),
            "kind": Certification.KIND,
            "metadata": {"name": "cluster-info"},
            "spec": {
                "target": {"nodeSelector": selector},
                "categories": [{"domain": domain, "variant": variant}],
            },
        }
    )


def _unsupplied(render_nodes: Sequence[Mapping[str, Any]], requests: Mapping[str, int]) -> str:
    """What the category's pods request per node that some node cannot supply; ``""`` when all fit."""
    problems = []
    for resource in sorted(requests):
        want = requests[resource]
        if resource in _BASIC_RESOURCES or want <= 0:
            continue
        short = [
            node_name(node)
            for node in render_nodes
            if (parse_quantity(node_allocatable(node).get(resource, 0)) or 0) < want
        ]
        if short:
            problems.append(
                f"its pods request {want} {resource} per node, which {len(short)} node(s) cannot supply "
                f"({', '.join(short)}): they would stay Pending"
            )
    return "; ".join(problems)


def _measures(entry: Entry, job: Mapping[str, Any]) -> str:
    """What the rendered category measures: its collective (the variant tells the two loopback
    entries apart, whose testType is the same), ``training``, or ``""``."""
    bandwidth = job.get("bandwidthMeasurement")
    if bandwidth:
        by_variant = collective_name(entry.variant)
        if by_variant in (*COLLECTIVES, NIC_LOOPBACK):
            return by_variant
        return collective_name(str(bandwidth.get("testType") or ""))
    return TRAINING if job.get("goodputMeasurement") else ""


def _workload_nodes(job: Mapping[str, Any]) -> int:
    """The rendered TrainJob's ``numNodes`` (0 when absent)."""
    trainer = ((job.get("workload") or {}).get("trainJob") or {}).get("trainer") or {}
    return int(trainer.get("numNodes") or 0)


def category_fit(
    entry: Entry,
    nodes: Sequence[Mapping[str, Any]],
    product: str,
    catalog: Catalog,
    dra: GPUInventory | None = None,
) -> CategoryFit:
    """Whether the Certification controller could run the category on ``nodes``, and on how many."""
    cert = _probe_certification(product, entry.domain, entry.variant)
    try:
        render = render_category(cert, 0, nodes, catalog=catalog, gpu_products=dra.products if dra else None)
    except BuildError as error:
        return CategoryFit(entry.domain, entry.variant, False, message=str(error))
    used = [node for node in nodes if node_name(node) in set(render.nodes)]
    spec = render.workflow["spec"]
    job = (spec.get("jobTemplate") or {}).get("spec") or {}
    missing = _unsupplied(used, requested_counts(spec.get("jobTemplate"), spec.get("dependencies")))
    if missing:
        return CategoryFit(
            entry.domain,
            entry.variant,
            False,
            message=f"{entry.key}: {missing}",
            measures=_measures(entry, job),
        )
    message = ""
    if render.excluded_nodes:
        message = f"runs without {', '.join(render.excluded_nodes)}"
    return CategoryFit(
        entry.domain,
        entry.variant,
        True,
        nodes=len(render.nodes),
        nodes_per_job=render.nodes_per_job,
        gpus_per_node=render.gpus_per_node,
        message=message,
        members=render.nodes,
        measures=_measures(entry, job),
        workload_nodes=_workload_nodes(job) or render.nodes_per_job,
    )


def group_shape(fit: CategoryFit, nodes: Sequence[NodeInfo], mnnvl: bool) -> GroupShape:
    """The shape of one workload of ``fit`` on these nodes: its TrainJob's node count. A workload
    that takes every node the category runs on spans the topology domains of those nodes (NVLink
    cliques where ``mnnvl``, else network blocks); a smaller one is taken to fit one domain.
    ``mnnvl``: the architecture runs multi-node NVLink, which a group gets inside one clique."""
    size = fit.workload_nodes
    members = set(fit.members)
    used = [node for node in nodes if node.name in members]
    spanned = {node.nvlink_domain if mnnvl else node.rack for node in used} - {""}
    domains = len(spanned) if size >= len(used) else 1
    in_clique = mnnvl and bool(spanned) and domains <= 1
    return GroupShape(nodes=size, domains=max(domains, 1), mnnvl=in_clique)


def expected_performance(
    architecture: str, platform: str, fits: Sequence[CategoryFit], nodes: Sequence[NodeInfo], mnnvl: bool
) -> ExpectedPerformance:
    """The table's figures for each fitting category that measures something, and the table's rows
    for each collective the catalog measures, on this architecture and platform."""
    categories = []
    for fit in fits:
        if not fit.fits or not fit.measures:
            continue
        shape = group_shape(fit, nodes, mnnvl)
        if fit.measures == TRAINING:
            figures = tuple(expected_training(architecture, platform, fit.variant, shape.nodes))
        else:
            figure = expected_bandwidth(architecture, platform, fit.measures, shape)
            figures = (figure,) if figure else ()
        categories.append(ExpectedCategory(fit.key, fit.measures, shape, figures))
    measured = dict.fromkeys(fit.measures for fit in fits if fit.measures and fit.measures != TRAINING)
    applicable = [
        row for row in rows() if row.arch == architecture and row.platform in (platform, ANY_PLATFORM)
    ]
    collectives = tuple(
        (name, tuple(row for row in applicable if row.subject == name)) for name in sorted(measured)
    )
    return ExpectedPerformance(TABLE_VERSION, tuple(categories), collectives)


def cluster_info(
    all_nodes: Iterable[Mapping[str, Any]],
    *,
    topology_key: str | None = None,
    catalog: Catalog | None = None,
    dra: GPUInventory | None = None,
) -> ClusterInfo:
    """What nvcre finds on a cluster of these nodes; :class:`ClusterInfoError` when it finds no GPU node.

    ``topology_key`` overrides the platform's default network-block label. ``dra`` is what the
    NVIDIA DRA driver's ResourceSlices publish: a node without GPU labels is known by them.
    """
    dra = dra or GPUInventory()
    found = discover(all_nodes, None, dra)
    if not found.nodes:
        if found.cordoned:
            raise ClusterInfoError(
                f"no schedulable GPU nodes: every node labelled {NodeLabel.GPU_PRESENT}=true is cordoned "
                f"({', '.join(found.cordoned)})"
            )
        raise ClusterInfoError(
            f"no GPU nodes found: no node is labelled {NodeLabel.GPU_PRESENT}=true and no "
            "gpu.nvidia.com ResourceSlice publishes a GPU (is the NVIDIA GPU Operator or DRA driver installed?)"
        )
    architecture = detect_gpu_architecture(found.nodes, dra.products)
    if architecture.architecture == UNKNOWN_ARCHITECTURE:
        raise ClusterInfoError(f"no nodes have {NodeLabel.GPU_PRODUCT} label")
    kept = architecture.filter(found.nodes)
    platform = detect_platform(kept)

    def product_of(node: Mapping[str, Any]) -> str:
        return _label(node, NodeLabel.GPU_PRODUCT) or dra.products.get(node_name(node), "")

    products: dict[str, int] = {}
    for node in kept:
        product = product_of(node)
        products[product] = products.get(product, 0) + 1
    product = max(sorted(products), key=lambda p: products[p])
    key = topology_key if topology_key is not None else TOPOLOGY_KEYS.get(platform.platform, "")
    infos = tuple(
        NodeInfo(
            name=node_name(node),
            gpus=allocatable_gpus(node) or dra.counts.get(node_name(node), 0),
            ready=is_ready(node),
            product=product_of(node),
            rack=_label(node, key),
            nvlink_domain=_label(node, NodeLabel.GPU_CLIQUE),
            nics={
                str(name): str(quantity)
                for name, quantity in node_allocatable(node).items()
                if is_nic_resource(str(name))
            },
        )
        for node in kept
    )
    defaults = gpu_defaults(architecture.architecture, platform.platform)
    nic = resolve_nic_resource(
        kept,
        platform=platform.platform,
        architecture=architecture.architecture,
        mlnx_per_node=defaults.mlnx_per_node,
    )
    nic_message = nic.message
    if nic.source == "detected":
        nic_message = f"requests {nic.resource_name} ({nic.count} per node, detected on every node)"
    exclusions = [
        Exclusion(name, "Cordoned", "cordoned (spec.unschedulable): nvcre never schedules onto it")
        for name in found.cordoned
    ]
    unlabelled = set(architecture.unlabeled)
    arch_of = {node_name(node): node_architecture(node, dra.products) for node in found.nodes}
    exclusions += [
        Exclusion(
            name,
            "GPUArchitecture",
            (
                f"no {NodeLabel.GPU_PRODUCT} label"
                if name in unlabelled
                else f"GPU architecture {arch_of[name]}"
            )
            + f", not the majority {architecture.architecture} (nvcre certifies one architecture at a time)",
        )
        for name in architecture.excluded
    ]
    exclusions += [
        Exclusion(
            name,
            "InsufficientGPUCapacity",
            f"{count} allocatable {GPU}, fewer than the {defaults.gpus_per_node} a catalog category "
            f"requests per node (set gpusPerNode to {count} to include it)",
        )
        for name, count in filter_capacity(kept, defaults.gpus_per_node).excluded
    ]
    catalog = catalog or load_catalog()
    fits = tuple(category_fit(entry, kept, product, catalog, dra) for entry in catalog.list())
    return ClusterInfo(
        platform=platform.platform,
        platforms=dict(platform.counts),
        gpu_architecture=architecture.architecture,
        gpu_product=product,
        gpus_per_node=min(info.gpus for info in infos),
        catalog_gpus_per_node=defaults.gpus_per_node,
        nodes=infos,
        topology=_domains(infos, key, "rack"),
        topology_key=key,
        nvlink_domains=_domains(infos, NodeLabel.GPU_CLIQUE, "nvlink_domain"),
        nic_resources=_nic_resources(kept),
        nic_message=nic_message,
        exclusions=tuple(sorted(exclusions, key=lambda e: e.node)),
        categories=fits,
        expected=expected_performance(
            architecture.architecture, platform.platform, fits, infos, defaults.enable_mnnvl
        ),
    )
