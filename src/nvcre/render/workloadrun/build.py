"""WorkloadRun -> Workflow: the one build the controller and ``nvcrectl workloadrun render`` share."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    MANAGED_BY_VALUE,
    Default,
    Kind,
    Label,
    NodeLabel,
    TrainerKind,
)
from nvcre.api.v1alpha1.workloadrun import WorkloadRun, WorkloadRunSpec
from nvcre.naming import workload_run_workflow_name
from nvcre.orchestration.dependencies import DependencyScopeError, check_namespaces
from nvcre.platform import GPU_ARCHITECTURES, Event, NICDetection, detect_platform, synthetic_nodes
from nvcre.render.gang import GangIntent
from nvcre.render.overrides import OverrideContext, when_matches
from nvcre.render.workflow import resolve_workflow
from nvcre.render.workloadrun import frameworks, jobtemplate, placement, volumes
from nvcre.render.workloadrun.detection import Detection, detect
from nvcre.render.workloadrun.env import base_nccl_env, merge_env
from nvcre.render.workloadrun.errors import BuildError
from nvcre.render.workloadrun.platform_overrides import (
    PlatformRow,
    TableData,
    bake,
    overrides,
    render_table,
)
from nvcre.render.workloadrun.resources import workload_resources

__all__ = ["BuildError", "Detection", "WorkloadRunRender", "build_workflow"]


@dataclass(frozen=True)
class WorkloadRunRender:
    """The Workflow to create and what the build found on the way."""

    workflow: dict[str, Any]
    detection: Detection
    resolved: bool
    """Overrides applied (and ``spec.overrides`` dropped) and the scheduling contract checked."""
    events: tuple[Event, ...] = ()
    """Events for the WorkloadRun: ``GPUArchitectureDefaults``, ``NICResourceDetection``."""
    applied_overrides: tuple[dict[str, Any], ...] = field(default=())
    """Summaries of the overrides that matched (resolved renders only)."""

    @property
    def platform(self) -> str:
        return self.detection.platform

    @property
    def gpu_architecture(self) -> str:
        return self.detection.gpu_architecture

    @property
    def gpus_per_node(self) -> int:
        return self.detection.gpus_per_node

    @property
    def nic(self) -> NICDetection:
        return self.detection.nic


def _metadata(run: WorkloadRun) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": workload_run_workflow_name(run.name)}
    if run.namespace:
        metadata["namespace"] = run.namespace
    metadata["labels"] = {Label.MANAGED_BY: MANAGED_BY_VALUE, Label.WORKLOAD_RUN: run.name}
    return metadata


def _check(run: WorkloadRun) -> str:
    if not run.name:
        raise BuildError("metadata.name: required")
    spec = run.spec
    kind = frameworks.framework_of(spec.framework)
    placement.validate_placement(spec)
    volumes.check_config(spec)
    volumes.check_reserved(spec, kind)
    try:
        check_namespaces({"overrides": [o.to_dict() for o in spec.overrides or []]}, run.namespace or "")
    except DependencyScopeError as error:
        raise BuildError(str(error)) from error
    return kind


def _matcher(det: Detection) -> Any:
    if not det.platform:
        return lambda when: False
    ctx = OverrideContext(
        platform=det.platform, gpu_architecture=det.gpu_architecture, workload_kind=TrainerKind.TRAIN_JOB
    )
    return lambda when: when_matches(when, ctx)


@dataclass(frozen=True)
class _Parts:
    workflow: dict[str, Any]
    rows: list[PlatformRow]
    gang: GangIntent | None


def _assemble(run: WorkloadRun, kind: str, det: Detection) -> _Parts:
    spec = run.spec
    name = run.name
    gang = GangIntent.resolve(spec.gang_scheduler)
    npj = placement.nodes_per_job(spec)
    user_env = spec.env or []
    merged_env = merge_env(base_nccl_env(det.enable_mnnvl), user_env)
    rows = render_table(
        TableData(
            entry=name,
            framework=kind,
            nodes_per_job=npj,
            gpus_per_node=det.gpus_per_node,
            mlnx_per_node=det.mlnx_per_node,
            nic_resource_name=det.nic.resource_name,
            enable_mnnvl=det.enable_mnnvl,
            strict_domain=placement.scale_of(spec) == placement.INTRA_RACK,
        ),
        user_env,
    )
    baked = bake(rows, _matcher(det))
    runtime = frameworks.training_runtime(
        frameworks.RuntimeInputs(
            run_name=name,
            image=spec.image,
            kind=kind,
            gpus_per_node=det.gpus_per_node,
            nodes_per_job=npj,
            env=merged_env,
            resources=workload_resources(spec.resources, det.gpus_per_node),
            pod=volumes.workload_pod_volumes(name, spec),
            config_set=spec.config is not None,
            gang=gang,
        )
    )
    train_job = jobtemplate.train_job(name, spec, kind, det, merged_env, baked.pre_command, baked.mpi_args)
    labels = jobtemplate.workload_labels(spec, gang)
    dependencies = [runtime]
    dependencies += [
        d for d in (volumes.config_map(name, spec), jobtemplate.checkpoint_pvc(name, spec)) if d is not None
    ]
    workflow_spec: dict[str, Any] = {
        "jobTemplate": {"spec": jobtemplate.job_spec(name, spec, train_job, labels)},
        "orchestration": placement.orchestration(spec, Default.TOPOLOGY_KEY),
        "dependencies": dependencies,
    }
    all_overrides = overrides(rows) + [o.to_dict() for o in spec.overrides or []]
    if all_overrides:
        workflow_spec["overrides"] = all_overrides
    validation = jobtemplate.validation(spec)
    if validation is not None:
        workflow_spec["validation"] = validation
    if gang is not None:
        workflow_spec["gangScheduler"] = gang.to_spec()
    workflow = {
        "apiVersion": API_VERSION,
        "kind": Kind.WORKFLOW,
        "metadata": _metadata(run),
        "spec": workflow_spec,
    }
    # A JSON round trip gives every node of the tree its own object: no aliasing with the input
    # or between pods, whatever the caller later mutates.
    return _Parts(json.loads(json.dumps(workflow)), rows, gang)


def build_workflow(
    run: WorkloadRun,
    nodes: Sequence[Mapping[str, Any]] | None,
    *,
    resolve: bool,
    platform: str | None = None,
    gpu_arch: str | None = None,
    gpu_products: Mapping[str, str] | None = None,
) -> WorkloadRunRender:
    """The Workflow a WorkloadRun creates. Pure; raises ``BuildError`` naming the field.

    ``nodes`` are the run's target nodes (the controller's best-effort discovery, or the CLI's
    ``--dry-run``); the platform comes from the first node's ``providerID`` and the architecture
    from a majority vote over ``nvidia.com/gpu.product``. ``None`` means offline: no cluster, the
    architecture comes from ``gpu_arch`` or the target's nodeSelector, and the platform from
    ``platform`` (``--platform``) or stays unknown. ``platform``/``gpu_arch`` win over detection.
    ``gpu_products`` (from DRA ResourceSlices) stands in for a node's missing product label.

    Platform ``preCommand``/``mpiArgs`` of the matching override rows are baked into the trainer;
    the rest of the table, then ``spec.overrides``, go to the Workflow's ``spec.overrides``. With
    ``resolve`` they are applied against the nodes (synthetic ones offline), ``spec.overrides`` is
    dropped and the persisted scheduling contract is checked, as the Workflow controller would.
    """
    kind = _check(run)
    detection, events = detect(run.spec, nodes, platform, gpu_arch, gpu_products)
    parts = _assemble(run, kind, detection)
    if not resolve:
        return WorkloadRunRender(parts.workflow, detection, False, events)
    if not detection.platform:
        raise BuildError(
            "cannot resolve overrides without a platform: pass --platform, or render with --dry-run"
        )
    if nodes is not None and platform is None:
        # Resolving for real nodes is what the Workflow controller does, and it refuses a mixed fleet.
        consistency = detect_platform(nodes)
        if consistency.heterogeneous:
            raise BuildError(consistency.message)
    target_nodes = list(nodes) if nodes is not None else _synthetic(run.spec, detection)
    workflow, applied = resolve_workflow_overrides(parts.workflow, target_nodes, detection)
    return WorkloadRunRender(workflow, detection, True, events, applied)


def _synthetic(spec: WorkloadRunSpec, det: Detection) -> list[dict[str, Any]]:
    """Nodes standing in for the target offline, so overrides resolve as on a real cluster."""
    selector = spec.target.node_selector if spec.target else None
    if det.gpu_architecture not in GPU_ARCHITECTURES:
        raise BuildError(
            f'spec.target.nodeSelector["{NodeLabel.GPU_PRODUCT}"]: GPU architecture "{det.gpu_architecture}" '
            f"has no platform overrides to resolve offline; known: {', '.join(GPU_ARCHITECTURES)} (see --gpu-arch)"
        )
    return synthetic_nodes(
        det.platform,
        det.gpu_architecture,
        count=placement.nodes_per_job(spec),
        labels=selector,
        gpus_per_node=det.gpus_per_node,
    )


# --- gang scheduling contract and override resolution ----------------------------------------


def resolve_workflow_overrides(
    workflow: dict[str, Any], nodes: Sequence[Mapping[str, Any]], det: Detection
) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    """Resolve the Workflow as the Workflow controller would: overrides, then the gang contract."""
    try:
        resolved = resolve_workflow(
            workflow,
            nodes,
            platform=det.platform,
            gpu_architecture=det.gpu_architecture,
            annotate=False,
            validated=True,
        )
    except ValueError as error:
        raise BuildError(str(error)) from error
    summaries = tuple(record.to_summary() for record in resolved.overrides.applied)
    return resolved.workflow, summaries
