"""One Certification category -> one Workflow: the pure function the controller and the CLI share.

``render_category(cert, index, nodes)`` looks the category up, detects platform and GPU
architecture on the target nodes, resolves the category options (spec-level defaults,
per-category values, gpu-defaults, NIC detection, sizing), renders the catalog entry, resolves
its platform overrides, applies the resolved transforms (workload image, workload labels, gang
scheduler) and names and labels the Workflow.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from nvcre.api.v1alpha1.certification import CategoryOptions, Certification
from nvcre.api.v1alpha1.constants import (
    MANAGED_BY_VALUE,
    Annotation,
    Default,
    Label,
)
from nvcre.api.v1alpha1.workflow import Workflow
from nvcre.catalog.build import build_spec
from nvcre.catalog.errors import BuildError
from nvcre.catalog.loader import Catalog, Entry, config_arch, load_catalog
from nvcre.catalog.options import (
    duration_seconds,
    merge_options,
    options_field,
    resolve_training_resources,
    workflow_name,
)
from nvcre.catalog.sizing import effective_timeout, max_valid_nodes, min_valid_nodes
from nvcre.catalog.template_data import TemplateData
from nvcre.catalog.transforms import apply_image, apply_workload_labels
from nvcre.orchestration.capacity import filter_capacity
from nvcre.platform import (
    UNKNOWN_ARCHITECTURE,
    Event,
    architecture_from_node_selector,
    detect_gpu_architecture,
    detect_platform,
    node_name,
    resolve_gpu_defaults,
    resolve_nic_resource,
)
from nvcre.platform.detect import HeterogeneousPlatformError
from nvcre.platform.gke import GKENetworks, resolve_gke_networks, resolve_tcpxo_plugin
from nvcre.render.gang import GangSchedulingConflict, enforce_gang_contract
from nvcre.render.overrides import AppliedOverride, OverrideError
from nvcre.render.workflow import resolve_workflow

APPLIED_OVERRIDES_ANNOTATION: Final = Annotation.APPLIED_OVERRIDES


class NoNodesMatch(BuildError):
    """No schedulable GPU node matches the target (the controller waits for nodes on this one)."""


@dataclass(frozen=True)
class CategoryRender:
    """The Workflow of one category and what was decided on the way."""

    workflow: dict[str, Any]
    """Wire form (camelCase) of the Workflow, validated against the API model."""
    domain: str
    variant: str
    platform: str
    """The platform the overrides were resolved for; ``""`` when they were left unresolved."""
    gpu_architecture: str
    nodes_per_job: int
    gpus_per_node: int
    nodes: tuple[str, ...] = ()
    """Target nodes the Workflow runs on (after the architecture and GPU-capacity filters)."""
    excluded_nodes: tuple[str, ...] = ()
    applied_overrides: tuple[AppliedOverride, ...] = ()
    events: tuple[Event, ...] = field(default_factory=tuple)
    """Events for the Certification (HeterogeneousGPU, GPUArchitectureDefaults, NICResourceDetection,
    GKENetworkDetection, TCPXOPluginDetection)."""

    @property
    def name(self) -> str:
        return str(self.workflow["metadata"]["name"])

    @property
    def key(self) -> str:
        return f"{self.domain}/{self.variant}"

    def detection_annotations(self) -> dict[str, str]:
        """The annotations an offline render records: detected architecture, and platform and
        applied overrides when the overrides were resolved."""
        out = {Annotation.DETECTED_GPU_ARCHITECTURE: self.gpu_architecture}
        if self.platform:
            out[Annotation.DETECTED_PLATFORM] = self.platform
            out[APPLIED_OVERRIDES_ANNOTATION] = json.dumps(
                [record.to_summary() for record in self.applied_overrides], ensure_ascii=False
            )
        return out


# --- detection -----------------------------------------------------------------------------------


EXPECTED_FLOOR_MIN_BYTES: Final = 8 << 30
"""The expected-performance figures are bus bandwidths at 8-16 GiB messages: a sweep that stops
below this is not judged against them."""
_BYTE_UNITS: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def sweep_bytes(max_bytes: str) -> int:
    """nccl-tests' ``-e`` value (``16G``, ``512M``, ``1048576``) in bytes."""
    text = max_bytes.strip().upper()
    unit = text[-1:] if text[-1:] in _BYTE_UNITS else ""
    return int(text[: len(text) - len(unit)] or 0) * _BYTE_UNITS[unit]


def expected_floor_fraction(options: CategoryOptions) -> float:
    """The category's floor fraction: its option, else 0.8; 0 for a sweep too short to compare."""
    if sweep_bytes(options.max_bytes or Default.MAX_BYTES) < EXPECTED_FLOOR_MIN_BYTES:
        return 0.0
    if options.expected_floor_fraction is None:
        return Default.EXPECTED_FLOOR_FRACTION
    return float(options.expected_floor_fraction)


def _capacity_filter(
    key: str, nodes: list[Mapping[str, Any]], gpus: int
) -> tuple[list[Mapping[str, Any]], list[str]]:
    """Drop nodes reporting a positive GPU count below the per-node request (0 or absent is kept)."""
    result = filter_capacity(nodes, gpus)
    if not result.kept:
        best = max(count for _, count in result.excluded)
        raise BuildError(
            f"{key}: no node can supply the {gpus} nvidia.com/gpu the workload requests per node; best "
            f"available is {best} across {len(nodes)} matching node(s). Lower gpusPerNode or target "
            "nodes with more GPUs",
            field="gpusPerNode",
        )
    return list(result.kept), [name for name, _ in result.excluded]


def _nodes_per_job(
    entry: Entry,
    options: CategoryOptions,
    *,
    available: int,
    gpus: int,
    arch: str,
    offline: bool,
    field_path: str,
) -> int:
    requested = options.nodes_per_job
    constrained = entry.meta.min_gpus > 0 or bool(entry.meta.parallelism)
    if options.placement == "Unpinned":
        if requested is None:
            raise BuildError(f"{field_path}: required when placement is Unpinned", field=field_path)
        if not offline and requested > available:
            raise BuildError(
                f"{field_path}: {requested} nodes requested but only {available} matching node(s) can run "
                f"{entry.key}; placement Unpinned runs exactly nodesPerJob nodes and never clamps it",
                field=field_path,
            )
        return requested
    if offline:
        return requested if requested is not None else max(min_valid_nodes(entry, gpus, arch), 1)
    ceiling = available if requested is None else min(requested, available)
    if not constrained:
        return ceiling
    valid = max_valid_nodes(entry, ceiling, gpus, arch)
    if valid == 0:
        raise BuildError(
            f"{entry.key}: no valid node count <= {ceiling} satisfies model constraints "
            f"(gpusPerNode={gpus}, arch={arch})",
            field=field_path,
        )
    return valid


# --- the render ----------------------------------------------------------------------------------


def render_category(
    cert: Certification,
    index: int,
    nodes: Sequence[Mapping[str, Any]],
    *,
    platform: str | None = None,
    offline: bool = False,
    resolve_overrides: bool = True,
    catalog: Catalog | None = None,
    gpu_products: Mapping[str, str] | None = None,
    tcpxo_installers: Sequence[Mapping[str, Any]] | None = None,
) -> CategoryRender:
    """The Workflow of ``cert.spec.categories[index]`` on the target ``nodes`` (Node objects as dicts).

    ``platform`` forces the platform instead of detecting it from the nodes' providerIDs.
    ``resolve_overrides=False`` leaves the entry's overrides in the Workflow, unresolved (an
    offline render whose platform is not known); the platform then counts as unknown.
    ``gpu_products`` (node name -> product, from DRA ResourceSlices) stands in for the product
    label of a node without one. ``tcpxo_installers`` are the Running pods of ``kube-system``
    (GKE's ``nccl-tcpxo-installer`` among them) a GCP H100 target's TCPXO plugin release is read
    from; None: not read (the fallback release renders, no event).
    ``offline`` marks synthetic nodes (``nvcrectl certification render`` without ``--dry-run``):
    they only carry the platform and architecture, so no GPU-capacity filter runs and
    ``nodesPerJob`` defaults to the smallest count the entry can run on instead of every node.

    Raises :class:`CategoryNotFound` for an unknown category, :class:`NoNodesMatch` when no node
    matches, and :class:`BuildError` (message naming the field) for everything else.
    """
    spec = cert.spec
    category = spec.categories[index]
    entry = (catalog or load_catalog()).lookup(category.domain, category.variant)
    key = entry.key

    # platform and architecture
    if not nodes:
        raise NoNodesMatch(f"{key}: no nodes match target", field="spec.target")
    if not resolve_overrides:
        platform = ""
    elif platform is None:
        try:
            platform = detect_platform(nodes).require_consistent()
        except HeterogeneousPlatformError as exc:
            raise BuildError(f"{key}: {exc}", field="spec.target") from exc
    arch_detection = detect_gpu_architecture(nodes, gpu_products)
    events: list[Event] = list(arch_detection.events)
    arch = arch_detection.architecture
    kept = arch_detection.filter(nodes)
    excluded = list(arch_detection.excluded)
    if arch == UNKNOWN_ARCHITECTURE:
        arch = architecture_from_node_selector((spec.target.node_selector if spec.target else None) or {})
        if not arch:
            raise BuildError(
                "cannot determine GPU architecture from target nodeSelector "
                "(nvidia.com/gpu.product label is required)",
                field="spec.target.nodeSelector",
            )

    # options
    options = merge_options(spec, index)
    defaults = resolve_gpu_defaults(
        arch,
        platform,
        gpus_per_node=options.gpus_per_node,
        mlnx_per_node=options.mlnx_per_node,
        enable_mnnvl=options.enable_mnnvl,
    )
    events.extend(defaults.events)
    gpus = defaults.gpus_per_node
    if not offline:
        kept, dropped = _capacity_filter(key, kept, gpus)
        excluded.extend(dropped)
    nic = resolve_nic_resource(
        kept,
        platform=platform,
        architecture=arch,
        mlnx_per_node=defaults.mlnx_per_node,
        nic_resource_name=options.nic_resource_name,
    )
    events.extend(nic.events)
    networks = GKENetworks() if offline else resolve_gke_networks(platform, arch, kept)
    plugin = resolve_tcpxo_plugin(platform, arch, kept, tcpxo_installers)
    events.extend([*networks.events, *plugin.events])

    test_scale = options.test_scale or Default.TEST_SCALE
    diagnose = test_scale == "diagnose"
    nodes_field = options_field(spec, index, "nodesPerJob")
    nodes_per_job = _nodes_per_job(
        entry, options, available=len(kept), gpus=gpus, arch=arch, offline=offline, field_path=nodes_field
    )
    if test_scale == "intra-node":
        nodes_per_job = 1
    layout = entry.parallelism(arch)
    resources = resolve_training_resources(options.resources, options_field(spec, index, "resources"))
    timeout = effective_timeout(entry, options.timeout_per_job, test_scale)
    data = TemplateData(
        image_pull_secrets=[{"name": s.name or ""} for s in options.image_pull_secrets or []],
        storage_class_name=options.storage_class_name or "",
        nodes_per_job=nodes_per_job,
        gpus_per_node=gpus,
        mlnx_per_node=defaults.mlnx_per_node,
        nic_resource_name=nic.resource_name,
        rdma_device_access=options.rdma_device_access or "",
        gke_tcpxo_networks=list(networks.names),
        tcpxo_cuda_major=plugin.cuda_major,
        enable_mnnvl=defaults.enable_mnnvl,
        gang_scheduler=spec.gang_scheduler is not None,
        enable_checkpoint=bool(options.enable_checkpoint),
        max_steps=Default.MAX_STEPS if options.max_steps is None else options.max_steps,
        exit_duration_mins=options.exit_duration_mins or Default.EXIT_DURATION_MINS,
        startup_stall_timeout_seconds=options.startup_stall_timeout_seconds or 0,
        save_interval=options.save_interval or Default.SAVE_INTERVAL,
        save_retain_interval=options.save_retain_interval or Default.SAVE_RETAIN_INTERVAL,
        save_top_k=options.save_top_k or Default.SAVE_TOP_K,
        storage_size=options.storage_size or Default.STORAGE_SIZE,
        tp=layout.tp,
        pp=layout.pp,
        ep=layout.ep,
        training_cpu_limit=resources.cpu_limit,
        training_memory_limit=resources.memory_limit,
        training_cpu_request=resources.cpu_request,
        training_memory_request=resources.memory_request,
        source_repo=options.source_repo or "",
        gpu_architecture=arch,
        config_arch=config_arch(arch),
        entry_name=entry.variant,
        test_scale=test_scale,
        max_bytes=options.max_bytes or Default.MAX_BYTES,
        num_iterations=options.num_iterations
        or (Default.DIAGNOSE_NUM_ITERATIONS if diagnose else Default.NUM_ITERATIONS),
        num_cycles=options.num_cycles or (Default.DIAGNOSE_NUM_CYCLES if diagnose else Default.NUM_CYCLES),
        max_concurrent=max(options.max_concurrent or 0, 0),
        min_group_size=options.min_group_size or Default.MIN_GROUP_SIZE,
        timeout_per_job=timeout,
        timeout_seconds=int(duration_seconds(timeout)),
        measurement_timeout=options.measurement_timeout or "",
        thresholds=dict(options.thresholds or {}),
        expected_floor_fraction=expected_floor_fraction(options),
        regression_fraction=options.regression_fraction,
        baseline_results=options.baseline_results,
        allow_missing_data=bool(options.allow_missing_data),
        isolation=options.isolation or "On",
        early_verdict=options.early_verdict or "On",
    )
    target = spec.target.to_dict() if spec.target else None
    workflow_spec = build_spec(
        entry,
        data,
        target=target or None,
        repeat_count=options.repeat_count,
        max_restarts=options.max_restarts,
        field=nodes_field,
    )

    # resolved transforms that the overrides and the gang contract build on
    apply_workload_labels(workflow_spec, spec, index)
    if options.placement:
        workflow_spec["orchestration"]["placement"] = options.placement
    workflow = _workflow_object(cert, workflow_name(cert.name, category), entry, workflow_spec, options)

    # overrides, resolved against the detected context (none is left for the Workflow), then the
    # gang-scheduling contract
    applied: tuple[AppliedOverride, ...] = ()
    try:
        if resolve_overrides:
            resolved = resolve_workflow(
                workflow, kept, platform=platform, gpu_architecture=arch, annotate=False
            )
            workflow = resolved.workflow
            applied = resolved.overrides.applied
        else:
            workflow["spec"] = enforce_gang_contract(workflow["spec"]).spec
    except OverrideError as exc:
        raise BuildError(f"{key}: {exc}", field=exc.path) from exc
    except GangSchedulingConflict as exc:
        raise BuildError(str(exc), field="spec.gangScheduler") from exc
    except ValueError as exc:
        raise BuildError(f"{key}: {exc}") from exc

    # the user's workload image wins over the catalog's and the overrides'
    if options.image:
        apply_image(workflow["spec"], options.image, entry.variant)
    _validate(key, workflow)
    return CategoryRender(
        workflow=workflow,
        domain=entry.domain,
        variant=entry.variant,
        platform=platform,
        gpu_architecture=arch,
        nodes_per_job=nodes_per_job,
        gpus_per_node=gpus,
        nodes=tuple(node_name(n) for n in kept),
        excluded_nodes=tuple(excluded),
        applied_overrides=applied,
        events=tuple(events),
    )


def _workflow_object(
    cert: Certification, name: str, entry: Entry, spec: dict[str, Any], options: CategoryOptions
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            Label.MANAGED_BY: MANAGED_BY_VALUE,
            Label.CERTIFICATION: cert.name,
            Label.CATEGORY_DOMAIN: entry.domain,
            Label.CATEGORY_VARIANT: entry.variant,
        },
    }
    if cert.namespace:
        metadata["namespace"] = cert.namespace
    if options.test_scale:
        metadata["annotations"] = {Annotation.REQUESTED_TEST_SCALE: options.test_scale}
    uid = cert.metadata.get("uid")
    if uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": cert.api_version,
                "kind": cert.kind,
                "name": cert.name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": Workflow.api_version_of(),
        "kind": Workflow.KIND,
        "metadata": metadata,
        "spec": copy.deepcopy(spec),
    }


def _validate(key: str, workflow: dict[str, Any]) -> None:
    try:
        Workflow.model_validate(workflow)
    except ValidationError as exc:
        item = exc.errors()[0]
        loc = ".".join(str(part) for part in item["loc"])
        raise BuildError(f"{key}: rendered Workflow is invalid: {loc}: {item['msg']}", field=loc) from exc
