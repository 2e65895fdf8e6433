"""What a group's Job is judged against when no threshold names a key: the expected-performance
table's figure for the group's hardware and shape (:mod:`nvcre.expected`), written into the Job's
``spec.expectedPerformance`` when the Workflow launches it; :mod:`nvcre.measure.verdicts` judges it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvcre.expected import TABLE_VERSION, ExpectedFigure, GroupShape, expected_bandwidth, expected_training


def _figure(figure: ExpectedFigure) -> dict[str, str]:
    return {"key": figure.key, "value": f"{figure.value:g}", "source": figure.source, "row": figure.row}


def expected_performance(
    fraction: float,
    job_spec: Mapping[str, Any],
    group: Mapping[str, Any],
    *,
    gpu_architecture: str,
    platform: str,
    variant: str | None,
    mnnvl: bool,
) -> dict[str, Any] | None:
    """``spec.expectedPerformance`` of the group's Job, or None (off, or no published figure).

    ``variant`` is the catalog variant the Workflow runs (it tells the two loopback entries
    apart), else the bandwidth measurement's ``testType`` names the collective. The group's
    shape: its node count, the topology domains it spans (recorded by partitioning when a
    topology key is set; 1 otherwise) and whether it runs over multi-node NVLink.
    """
    if fraction <= 0 or not gpu_architecture or not platform:
        return None
    nodes = len(group.get("nodes") or ())
    if nodes < 1:
        return None
    figures: list[ExpectedFigure] = []
    bandwidth = job_spec.get("bandwidthMeasurement")
    if bandwidth:
        collective = variant or str(bandwidth.get("testType") or "")
        domains = max(len(group.get("domains") or ()), 1)
        shape = GroupShape(nodes=nodes, domains=domains, mnnvl=mnnvl and domains == 1)
        found = expected_bandwidth(gpu_architecture, platform, collective, shape) if collective else None
        if found is not None:
            figures.append(found)
    if job_spec.get("goodputMeasurement") and variant:
        figures += expected_training(gpu_architecture, platform, variant, nodes)
    if not figures:
        return None
    return {
        "floorFraction": fraction,
        "tableVersion": TABLE_VERSION,
        "figures": [_figure(f) for f in figures],
    }
