"""Placement, test scale and the Workflow's orchestration block."""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.constants import Default
from nvcre.api.v1alpha1.workloadrun import WorkloadRunSpec
from nvcre.durations import format_duration, parse_duration
from nvcre.render.workloadrun.errors import BuildError

INTRA_NODE = "intra-node"
INTRA_RACK = "intra-rack"

UNPINNED_INTRA_NODE = (
    'orchestration.placement: Unpinned is incompatible with orchestration.testScale "intra-node": '
    "intra-node runs one job per target node, Unpinned runs exactly one job; drop one of the two"
)
UNPINNED_INTRA_RACK = (
    'orchestration.placement: Unpinned is incompatible with orchestration.testScale "intra-rack": '
    "intra-rack runs one job per topology domain, Unpinned runs exactly one job; to keep a single job "
    "inside one domain, name the domain label in target.matchExpressions instead"
)


def scale_of(spec: WorkloadRunSpec) -> str:
    return (spec.orchestration.test_scale if spec.orchestration else None) or ""


def placement_of(spec: WorkloadRunSpec) -> str:
    return (spec.orchestration.placement if spec.orchestration else None) or ""


def validate_placement(spec: WorkloadRunSpec) -> None:
    """Unpinned runs one job, so a grouping strategy (intra-node, intra-rack) contradicts it."""
    if placement_of(spec) != "Unpinned":
        return
    scale = scale_of(spec)
    if scale == INTRA_NODE:
        raise BuildError(UNPINNED_INTRA_NODE)
    if scale == INTRA_RACK:
        raise BuildError(UNPINNED_INTRA_RACK)


def nodes_per_job(spec: WorkloadRunSpec) -> int:
    """``intra-node`` runs one node per job; otherwise ``numNodes`` is the job size."""
    return 1 if scale_of(spec) == INTRA_NODE else spec.num_nodes


def timeout_per_job(spec: WorkloadRunSpec) -> str:
    """The spec's Go duration, or 24h when it is empty, unparseable or not positive."""
    raw = (spec.orchestration.timeout_per_job if spec.orchestration else None) or ""
    try:
        ns = parse_duration(raw)
    except ValueError:
        ns = 0
    if ns <= 0:
        ns = parse_duration(Default.WORKLOAD_RUN_TIMEOUT_PER_JOB)
    return format_duration(ns)


def orchestration(spec: WorkloadRunSpec, topology_key: str) -> dict[str, Any]:
    """``spec.orchestration`` of the Workflow.

    ``intra-rack`` groups by topology domain (``strictDomain``) under ``topology_key``, which the
    caller resolves from the platform (platform overrides may replace it).
    """
    out: dict[str, Any] = {}
    if spec.target is not None:
        out["target"] = spec.target.to_dict()
    if scale_of(spec) == INTRA_RACK:
        out["topology"] = {"topologyKey": topology_key, "strictDomain": True}
    execution: dict[str, Any] = {}
    orch = spec.orchestration
    if orch is not None and orch.max_concurrent:
        execution["maxConcurrent"] = orch.max_concurrent
    execution["timeoutPerJob"] = timeout_per_job(spec)
    out["execution"] = execution
    out["iterations"] = (orch.repeat_count if orch else None) or 1
    if placement_of(spec):
        out["placement"] = placement_of(spec)
    if orch is not None and orch.isolation:
        out["isolation"] = orch.isolation
    return out
