"""The first pass of a Workflow: discover nodes, detect, resolve overrides, partition into groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvcre.api.v1alpha1.constants import ConditionType, EventReason, EventType, NodeLabel, WorkflowReason
from nvcre.controllers.resourceslices import gpu_inventory
from nvcre.controllers.workflow.diagnosing import first_round
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.decide import limits
from nvcre.orchestration.capacity import Exclusions, filter_capacity, no_capacity_message, requested_gpus
from nvcre.orchestration.dependencies import DependencyScopeError
from nvcre.orchestration.discovery import discover, labels_of, name_of
from nvcre.orchestration.partition import PartitionError, group_size, run_groups
from nvcre.orchestration.placement import PlacementError, check_placement
from nvcre.platform.detect import HeterogeneousPlatformError, PlatformDetection, detect_platform
from nvcre.render.gang import GangSchedulingConflict
from nvcre.render.overrides import OverrideError
from nvcre.render.workflow import ResolvedWorkflow, resolve_workflow
from nvcre.runtime.controller import Result


class Failure(Exception):
    """A terminal decision: the Workflow fails with this reason and message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def resolve(
    state: WorkflowState,
    nodes: list[dict[str, Any]],
    *,
    cached: bool,
    platform: PlatformDetection | None = None,
    gpu_products: Mapping[str, str] | None = None,
) -> ResolvedWorkflow:
    """Overrides resolved against ``nodes`` (with the stored detection when ``cached``, with
    ``platform`` when the caller has just detected it; ``gpu_products`` from DRA ResourceSlices
    for nodes without a product label)."""
    orchestration = state.orchestration
    try:
        return resolve_workflow(
            state.workflow,
            nodes,
            platform=orchestration.get("detectedPlatform") if cached else None,
            gpu_architecture=orchestration.get("detectedGPUArchitecture") if cached else None,
            annotate=False,
            platform_detection=platform,
            gpu_products=gpu_products,
        )
    except HeterogeneousPlatformError as error:
        raise Failure(WorkflowReason.HETEROGENEOUS_PLATFORM, str(error)) from error
    except GangSchedulingConflict as error:
        raise Failure(WorkflowReason.GANG_SCHEDULING_CONFLICT, str(error)) from error
    except DependencyScopeError as error:
        raise Failure(
            WorkflowReason.DEPENDENCY_CREATION_ERROR, f"Failed to create dependency: {error}"
        ) from error
    except (OverrideError, ValueError) as error:
        raise Failure(WorkflowReason.OVERRIDE_ERROR, f"Failed to apply overrides: {error}") from error


async def discover_and_partition(state: WorkflowState) -> Result:
    """Decide the groups of the whole run, once; raises :class:`Failure` when it cannot run.

    Its events (exclusions, applied overrides) go out after the status write that records the
    groups (or the failure), once: a conflict makes the whole decision again.

    The nodes are examined here even when a Certification rendered this Workflow from the same
    node cache a moment before: what it saw is recorded nowhere the Workflow can read (a
    controller writes only its own object's status), a node may have been cordoned or relabelled
    since, and a Workflow a user or a WorkloadRun created has no such render. Checking that the
    cache did not change would cost what the examination does; it runs once per Workflow, and
    its detection is stored in the status for every later pass (see ``resolving``)."""
    orchestration_spec = state.spec.get("orchestration") or {}
    dra = await gpu_inventory(state.ctx.client)
    found = discover(state.caches.nodes.items(), orchestration_spec.get("target"), dra)
    if not found.nodes:
        raise Failure(
            WorkflowReason.NODE_DISCOVERY_ERROR, "No target nodes found matching orchestration target"
        )
    refusal = limits.too_many_nodes(len(found.nodes), limits.workflow_limit(state.workflow))
    if refusal is not None:
        raise Failure(WorkflowReason.TOO_MANY_NODES, refusal)
    platform = detect_platform(found.nodes)
    if platform.heterogeneous:
        raise Failure(WorkflowReason.HETEROGENEOUS_PLATFORM, platform.message)
    if found.cordoned:
        state.emit(
            EventType.WARNING,
            EventReason.CORDONED_NODES_EXCLUDED,
            f"Excluded {len(found.cordoned)} cordoned node(s) from certification: {', '.join(found.cordoned)}",
        )
    resolved = resolve(state, found.nodes, cached=False, platform=platform, gpu_products=dra.products)
    gpu = resolved.gpu
    architecture_excluded = sorted(set(map(name_of, found.nodes)) - set(map(name_of, resolved.nodes)))
    request = requested_gpus(resolved.spec.get("jobTemplate"), resolved.spec.get("dependencies"))
    capacity = filter_capacity(resolved.nodes, request)
    exclusions = Exclusions(
        found.cordoned, architecture_excluded, gpu.architecture, capacity.excluded, request
    )
    orchestration = state.orchestration
    orchestration.update(
        detectedPlatform=platform.platform,
        detectedGPUArchitecture=gpu.architecture,
        appliedOverrides=resolved.overrides.status_records(),
    )
    if exclusions.nodes:
        orchestration.update(excludedNodes=exclusions.nodes, exclusionReason=exclusions.reason)
    for event in resolved.events:
        state.emit(event.type, event.reason, event.message)
    if capacity.excluded:
        detail = ", ".join(f"{n} has {c}" for n, c in capacity.excluded)
        state.emit(
            EventType.WARNING,
            EventReason.INSUFFICIENT_GPU_CAPACITY,
            f"Excluded {len(capacity.excluded)} node(s) with fewer than {request} allocatable nvidia.com/gpu: {detail}",
        )
    if not capacity.kept:
        raise Failure(WorkflowReason.PARTITION_ERROR, no_capacity_message(request, capacity.excluded))
    effective_orchestration = resolved.spec.get("orchestration") or {}
    topology = effective_orchestration.get("topology") or {}
    placement = effective_orchestration.get("placement") or "Pinned"
    try:
        check_placement(
            placement,
            diagnose=bool(effective_orchestration.get("diagnose")),
            strict_domain=bool(topology.get("strictDomain")),
        )
    except PlacementError as error:
        raise Failure(WorkflowReason.PARTITION_ERROR, str(error)) from error
    nodes = capacity.kept
    if effective_orchestration.get("diagnose"):
        groups = first_round(state, nodes, resolved.spec)
        npj = len(groups[0]["nodes"])
    else:
        job_spec = (resolved.spec.get("jobTemplate") or {}).get("spec") or {}
        try:
            npj = group_size(job_spec, len(nodes), exclusions)
            groups = run_groups(nodes, npj, placement, topology)
        except PartitionError as error:
            raise Failure(WorkflowReason.PARTITION_ERROR, str(error)) from error
    orchestration.update(
        totalNodes=len(nodes),
        nodesPerJob=npj,
        totalGroups=len(groups),
        currentIteration=1,
        completedIterations=0,
        groups=groups,
        placement=placement,
        gpuProducts=sorted({labels_of(n).get(NodeLabel.GPU_PRODUCT, "") for n in nodes} - {""}),
    )
    await state.record(
        ConditionType.IN_PROGRESS,
        WorkflowReason.GROUPS_PARTITIONED,
        f"Discovered {len(nodes)} nodes, partitioned into {len(groups)} groups ({npj} nodes/job)",
    )
    return Result(requeue_after=0.05)
