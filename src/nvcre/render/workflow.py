"""Resolve a Workflow against nodes: detection, overrides, the gang contract, render annotations.

``resolve_workflow`` is what the Workflow controller decides before it creates anything, and
what ``nvcrectl workflow render`` prints offline (against synthetic nodes): the same code path.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from nvcre.api.v1alpha1 import kind_model
from nvcre.api.v1alpha1.constants import Annotation, Kind
from nvcre.orchestration.dependencies import check_namespaces
from nvcre.platform.detect import (
    GPUArchitectureDetection,
    PlatformDetection,
    detect_gpu_architecture,
    detect_platform,
)
from nvcre.platform.events import Event
from nvcre.render.gang import GangCheck, enforce_gang_contract
from nvcre.render.overrides import OverrideContext, OverrideResult, apply_overrides, select_dependencies

if TYPE_CHECKING:
    from nvcre.api.v1alpha1.workflow import Workflow


class WorkflowResolveError(ValueError):
    """The Workflow object itself is invalid (before any override runs)."""


@dataclass(frozen=True)
class ResolvedWorkflow:
    """A Workflow with its overrides resolved for the detected platform and architecture.

    ``workflow`` is the object to print or run: the effective spec with ``overrides`` removed
    (they are baked in), dependencies filtered by their own ``when``, and render annotations when
    requested. ``nodes`` are the target nodes kept after the architecture vote.
    """

    workflow: dict[str, Any]
    platform: PlatformDetection
    gpu: GPUArchitectureDetection
    overrides: OverrideResult
    gang: GangCheck
    nodes: tuple[Mapping[str, Any], ...]

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.workflow["spec"]
        return spec

    @property
    def events(self) -> tuple[Event, ...]:
        """``HeterogeneousGPU`` (minority nodes dropped) then the override events."""
        return self.gpu.events + self.overrides.events


def _validate(workflow: Mapping[str, Any]) -> None:
    """``WorkflowResolveError`` naming the first invalid field of a Workflow given as a dict."""
    try:
        kind_model(Kind.WORKFLOW).model_validate(workflow)
    except ValidationError as error:
        item = error.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in item["loc"]).lstrip(".")
        message = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
        raise WorkflowResolveError(f"{loc}: {message}" if loc else str(message)) from error


def _split(
    workflow: Workflow | Mapping[str, Any], *, validated: bool
) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """(object without spec/status, spec dict without overrides, overrides as given), once the
    object is valid (checked here unless ``validated``) and every dependency, its own or an
    override's, is in its namespace."""
    if not isinstance(workflow, Mapping):  # a Workflow
        raw = workflow.to_dict()
        overrides: list[Any] = list(workflow.spec.overrides or [])
    else:
        if not validated:
            _validate(workflow)
        raw = copy.deepcopy(dict(workflow))
        overrides = list(raw.get("spec", {}).get("overrides") or [])
    check_namespaces(raw.get("spec") or {}, str((raw.get("metadata") or {}).get("namespace") or ""))
    spec = dict(raw.get("spec") or {})
    spec.pop("overrides", None)
    head = {key: value for key, value in raw.items() if key not in ("spec", "status")}
    return head, spec, overrides


def resolve_workflow(
    workflow: Workflow | Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    *,
    platform: str | None = None,
    gpu_architecture: str | None = None,
    annotate: bool = True,
    validated: bool = False,
    platform_detection: PlatformDetection | None = None,
    gpu_products: Mapping[str, str] | None = None,
) -> ResolvedWorkflow:
    """Detect platform and architecture from ``nodes``, apply overrides, enforce the gang contract.

    ``platform`` / ``gpu_architecture`` replace detection when given (e.g. cached detection);
    ``platform_detection`` is the caller's own detection of ``nodes``, not made again.
    ``gpu_products`` (node name -> product, from DRA ResourceSlices) stands in for the product
    label of a node without one.
    ``validated``: the caller built ``workflow`` itself from an object already checked (a
    WorkloadRun), so the Workflow model is not built and run again (a tenth of a cold render).
    Raises ``HeterogeneousPlatformError``, ``OverrideError``, ``GangSchedulingConflict``,
    ``DependencyScopeError`` or ``WorkflowResolveError`` (all ``ValueError``), each with a one-line
    message.
    """
    node_list = list(nodes)
    head, base_spec, overrides = _split(workflow, validated=validated)
    platform_detection = platform_detection or detect_platform(node_list)
    detected_platform = platform if platform is not None else platform_detection.require_consistent()
    gpu = detect_gpu_architecture(node_list, gpu_products)
    kept = tuple(gpu.filter(node_list))
    architecture = gpu_architecture if gpu_architecture is not None else gpu.architecture

    ctx = OverrideContext.for_spec(
        base_spec, platform=detected_platform, gpu_architecture=architecture, nodes=kept
    )
    result = apply_overrides(base_spec, ctx, overrides)
    effective = dict(result.spec)
    effective["dependencies"] = select_dependencies(effective.get("dependencies") or [], ctx)
    if not effective["dependencies"]:
        del effective["dependencies"]
    gang = enforce_gang_contract(effective, base_spec=base_spec)

    metadata = copy.deepcopy(dict(head.get("metadata") or {}))
    if annotate:
        annotations = dict(metadata.get("annotations") or {})
        annotations[Annotation.DETECTED_PLATFORM] = detected_platform
        annotations[Annotation.DETECTED_GPU_ARCHITECTURE] = architecture
        annotations[Annotation.APPLIED_OVERRIDES] = json.dumps(
            [record.to_summary() for record in result.applied], ensure_ascii=False
        )
        metadata["annotations"] = annotations
    rendered = {**head, "metadata": metadata, "spec": gang.spec}
    return ResolvedWorkflow(
        workflow=rendered,
        platform=PlatformDetection(detected_platform, platform_detection.counts),
        gpu=gpu,
        overrides=result,
        gang=gang,
        nodes=kept,
    )
