"""``cluster info`` as a table for people and as a JSON/YAML object for programs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvcre.clusterinfo.model import ClusterInfo, ExpectedPerformance, Topology
from nvcre.expected import NO_PUBLISHED_FIGURE, ExpectedFigure, GroupShape, Row
from nvcre.orchestration.capacity import GPU

RACK_NAME_LIMIT = 24


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _domains_dict(topology: Topology, item_key: str) -> dict[str, Any]:
    return {
        "key": topology.key,
        item_key: [
            {"name": domain.name, "nodes": list(domain.nodes), "nodeCount": len(domain.nodes)}
            for domain in topology.domains
        ],
    }


def to_dict(info: ClusterInfo) -> dict[str, Any]:
    """The ``-o json|yaml`` object (spec field names first, then what nvcre adds)."""
    nodes = []
    for node in info.nodes:
        entry: dict[str, Any] = {"name": node.name, "gpus": node.gpus, "ready": node.ready}
        if node.rack:
            entry["rack"] = node.rack
        entry["product"] = node.product
        if node.nvlink_domain:
            entry["nvlinkDomain"] = node.nvlink_domain
        if node.nics:
            entry["nics"] = dict(sorted(node.nics.items()))
        nodes.append(entry)
    out: dict[str, Any] = {
        "platform": info.platform,
        "gpuArchitecture": info.gpu_architecture,
        "gpuProduct": info.gpu_product,
        "gpusPerNode": info.gpus_per_node,
        "catalogGpusPerNode": info.catalog_gpus_per_node,
        "totalNodes": info.total_nodes,
        "readyNodes": info.ready_nodes,
        "totalGPUs": info.total_gpus,
        "nodes": nodes,
    }
    if info.topology is not None:
        out["topology"] = _domains_dict(info.topology, "racks")
    if info.nvlink_domains is not None:
        out["nvlinkDomains"] = _domains_dict(info.nvlink_domains, "domains")
    out["platforms"] = dict(sorted(info.platforms.items()))
    out["nicResources"] = [
        {"name": nic.name, "nodes": nic.nodes, "minPerNode": nic.min_per_node, "maxPerNode": nic.max_per_node}
        for nic in info.nic_resources
    ]
    if info.nic_message:
        out["nicDetection"] = info.nic_message
    out["excluded"] = [
        {"name": exclusion.node, "reason": exclusion.reason, "message": exclusion.message}
        for exclusion in info.exclusions
    ]
    categories = []
    for fit in info.categories:
        category: dict[str, Any] = {"domain": fit.domain, "variant": fit.variant, "fits": fit.fits}
        if fit.fits:
            category.update(nodes=fit.nodes, nodesPerJob=fit.nodes_per_job, gpusPerNode=fit.gpus_per_node)
        if fit.message:
            category["message"] = fit.message
        categories.append(category)
    out["categories"] = categories
    out["expectedPerformance"] = _expected_dict(info)
    return out


def _figure_dict(figure: ExpectedFigure) -> dict[str, Any]:
    return {"key": figure.key, "value": figure.value, "source": figure.source, "row": figure.row}


def _shape_dict(shape: GroupShape) -> dict[str, Any]:
    return {"nodes": shape.nodes, "domains": shape.domains, "mnnvl": shape.mnnvl, "text": str(shape)}


def _row_dict(row: Row) -> dict[str, Any]:
    out: dict[str, Any] = {
        "row": row.id,
        "platform": row.platform,
        "groupShape": row.shape,
        "key": row.key,
        "value": row.value,
        "interconnect": row.interconnect,
        "cite": row.cite,
        "source": row.source,
    }
    if row.derived:
        out["derived"] = row.derived
    return out


def _expected_dict(info: ClusterInfo) -> dict[str, Any]:
    expected = info.expected
    categories = []
    for category in expected.categories:
        entry: dict[str, Any] = {
            "category": category.key,
            "measures": category.measures,
            "groupShape": _shape_dict(category.shape),
            "expected": [_figure_dict(figure) for figure in category.figures],
        }
        if not category.figures:
            entry["message"] = NO_PUBLISHED_FIGURE
        categories.append(entry)
    collectives = []
    for name, rows in expected.collectives:
        item: dict[str, Any] = {"collective": name, "rows": [_row_dict(row) for row in rows]}
        if not rows:
            item["message"] = NO_PUBLISHED_FIGURE
        collectives.append(item)
    return {
        "tableVersion": expected.version,
        "gpuArchitecture": info.gpu_architecture,
        "platform": info.platform,
        "categories": categories,
        "collectives": collectives,
    }


def _columns(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns two spaces apart (the last column is not padded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        indent + "".join(cell.ljust(width + 2) for cell, width in zip(row, widths, strict=False)) + row[-1]
        for row in rows
    ]


def _rack_name(name: str) -> str:
    return name if len(name) <= RACK_NAME_LIMIT else name[: RACK_NAME_LIMIT - 3] + "..."


def _domain_lines(title: str, topology: Topology) -> list[str]:
    names = [_rack_name(domain.name) for domain in topology.domains]
    width = max(len(name) for name in names)
    lines = [f"{title} ({topology.key}):"]
    for name, domain in zip(names, topology.domains, strict=True):
        lines.append(f"  {name.ljust(width)}    {_plural(len(domain.nodes), 'node')}")
    return lines


def _platform_line(info: ClusterInfo) -> str:
    if not info.heterogeneous_platform:
        return info.platform
    return ", ".join(f"{name} ({_plural(count, 'node')})" for name, count in sorted(info.platforms.items()))


def _value(figure_key: str, value: float) -> str:
    return f"{value:g} GB/s" if figure_key == "busBandwidthGBps" else f"{value:g} {figure_key}"


def _expected_blocks(info: ClusterInfo) -> list[list[str]]:
    expected: ExpectedPerformance = info.expected
    hardware = f"{info.gpu_architecture} on {info.platform}"
    blocks: list[list[str]] = []
    if expected.categories:
        category_rows = [("CATEGORY", "GROUP", "EXPECTED", "SOURCE")]
        for category in expected.categories:
            if not category.figures:
                category_rows.append((category.key, str(category.shape), NO_PUBLISHED_FIGURE, "-"))
            for figure in category.figures:
                category_rows.append(
                    (
                        category.key,
                        str(category.shape),
                        _value(figure.key, figure.value),
                        f"{figure.source} ({figure.row})",
                    )
                )
        blocks.append(
            [
                f"EXPECTED PERFORMANCE ({hardware}, one group of each category; table {expected.version}):",
                *_columns(category_rows),
            ]
        )
    if expected.collectives:
        table_rows = [("COLLECTIVE", "GROUP", "BUS BANDWIDTH", "SOURCE")]
        for name, rows in expected.collectives:
            if not rows:
                table_rows.append((name, "any", NO_PUBLISHED_FIGURE, "-"))
            for row in rows:
                table_rows.append((name, row.shape, _value(row.key, row.value), row.cite))
        blocks.append([f"EXPECTED BUS BANDWIDTH BY GROUP SHAPE ({hardware}):", *_columns(table_rows)])
    return blocks


def render_table(info: ClusterInfo) -> str:
    """The text ``cluster info`` prints on stdout."""
    ready = info.ready_nodes
    nodes_line = f"{ready} ready" if ready == info.total_nodes else f"{info.total_nodes} ({ready} ready)"
    head = [
        f"Platform:     {_platform_line(info)}",
        f"GPU:          {info.gpu_product} ({info.gpu_architecture}, {info.gpus_per_node} GPUs/node)",
        f"Nodes:        {nodes_line}",
        f"Total GPUs:   {info.total_gpus}",
    ]
    if info.topology is None and info.topology_key:
        head.append(f"Topology:     no topology labels found (expected: {info.topology_key})")
    blocks: list[list[str]] = [head]
    if info.heterogeneous_platform:
        blocks.append(
            [
                "The nodes are on more than one platform, and nvcre runs on one platform at a time:",
                "narrow the target (nodeSelector) to the nodes of one platform.",
            ]
        )
    not_ready = [node.name for node in info.nodes if not node.ready]
    if not_ready:
        blocks.append(
            [
                f"Not Ready: {', '.join(not_ready)}. nvcre does not exclude a node that is not Ready;",
                "a job placed on it waits until it is.",
            ]
        )
    if info.mixed_gpu_counts:
        rows = [("NODE", "GPUS", "READY")] + [
            (node.name, str(node.gpus), str(node.ready).lower()) for node in info.nodes
        ]
        blocks.append(
            [
                "Nodes do not all have the same GPU count. The value above is the",
                "smallest, because a job asks for the same count on every node.",
                *_columns(rows),
            ]
        )
    if info.catalog_gpus_per_node != info.gpus_per_node:
        consequence = (
            "or the pods ask for more GPUs than a node has."
            if info.catalog_gpus_per_node > info.gpus_per_node
            else "or the pods leave GPUs on each node unused."
        )
        blocks.append(
            [
                f"The catalog assumes {info.catalog_gpus_per_node} GPUs per node for {info.gpu_architecture}. "
                "Set gpusPerNode in the",
                f"certification, {consequence}",
            ]
        )
    if info.zero_gpu_nodes:
        blocks.append(
            [
                f"At least one selected node reports 0 allocatable {GPU}, so",
                "nothing schedules on it. If you expect GPUs there, check the GPU Operator.",
            ]
        )
    if info.topology is not None:
        blocks.append(_domain_lines("TOPOLOGY", info.topology))
    if info.nvlink_domains is not None:
        blocks.append(_domain_lines("NVLINK DOMAINS", info.nvlink_domains))
    nic_lines = []
    if info.nic_resources:
        nic_rows = [("RESOURCE", "NODES", "PER NODE")] + [
            (
                nic.name,
                str(nic.nodes),
                nic.min_per_node
                if nic.min_per_node == nic.max_per_node
                else f"{nic.min_per_node}-{nic.max_per_node}",
            )
            for nic in info.nic_resources
        ]
        nic_lines = ["NIC RESOURCES:", *_columns(nic_rows)]
    else:
        nic_lines = ["NIC RESOURCES: none (no rdma/*, nvidia.com/mlnxnics or EFA resource on any node)"]
    if info.nic_message:
        nic_lines.append(f"  {info.nic_message}")
    blocks.append(nic_lines)
    category_rows = [("CATEGORY", "FITS", "NODES", "PER JOB", "NOTE")] + [
        (
            fit.key,
            "yes" if fit.fits else "no",
            str(fit.nodes) if fit.fits else "-",
            str(fit.nodes_per_job) if fit.fits else "-",
            fit.message.removeprefix(f"{fit.key}: ") or "-",
        )
        for fit in info.categories
    ]
    blocks.append(["CATALOG CATEGORIES:", *_columns(category_rows)])
    blocks += _expected_blocks(info)
    if info.exclusions:
        rows = [("NODE", "REASON", "WHY")] + [(e.node, e.reason, e.message) for e in info.exclusions]
        blocks.append(["EXCLUDED (nvcre would not run on these nodes):", *_columns(rows)])
    else:
        blocks.append(["EXCLUDED: none"])
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
