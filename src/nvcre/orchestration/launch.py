"""A group's Job: its name, its spec (the Workflow's template placed on the group's nodes, with
thresholds, node health and expected floors) and its body; pure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    MANAGED_BY_VALUE,
    Annotation,
    Default,
    Finalizer,
    Kind,
    Label,
    TrainerKind,
)
from nvcre.naming import uses_single_job_name
from nvcre.orchestration import diagnose
from nvcre.orchestration.dependencies import JobScopedCopies
from nvcre.orchestration.discovery import cordoned_opt_in
from nvcre.orchestration.expected import expected_performance
from nvcre.orchestration.placement import node_affinity, tolerations
from nvcre.workload import trainjob


def single(orchestration: Mapping[str, Any], iterations: int, *, isolating: bool) -> bool:
    """A lone group's Job is ``<wf>-job``; an isolation round's groups are never alone: the
    name is taken by the Job they re-test."""
    return not isolating and uses_single_job_name(
        int(orchestration.get("totalGroups") or 0),
        iterations,
        diagnose=bool(orchestration.get("diagnose")),
    )


def job_spec(
    spec: Mapping[str, Any], orchestration: Mapping[str, Any], group: Mapping[str, Any], variant: str | None
) -> dict[str, Any]:
    """The group's Job spec from the resolved Workflow ``spec`` and its ``status.orchestration``
    (``variant``: the category variant the Workflow is labelled with)."""
    template = spec["jobTemplate"]
    out: dict[str, Any] = copy.deepcopy(template["spec"])
    performance = ((spec.get("validation") or {}).get("performance")) or {}
    thresholds = (performance.get("thresholds") or {}).get("thresholds")
    if thresholds:
        out["thresholds"] = dict(thresholds)
    if performance.get("measurementTimeout"):
        out["measurementTimeout"] = performance["measurementTimeout"]
    target = (spec.get("orchestration") or {}).get("target")
    if not out.get("nodeHealthMonitor"):
        out["nodeHealthMonitor"] = {"cel": {"expression": Default.NODE_HEALTH_EXPRESSION}}
    if cordoned_opt_in(target):
        out.pop("nodeHealthMonitor", None)
    pinned = orchestration.get("placement", "Pinned") != "Unpinned"
    workload = out["workload"]["trainJob"]
    affinity = node_affinity(
        target,
        group_nodes=group["nodes"] if pinned else None,
        products=orchestration.get("gpuProducts") or (),
    )
    out["workload"]["trainJob"] = trainjob.place(
        workload,
        affinity=affinity,
        tolerations=tolerations(target, has_launcher=trainjob.has_launcher(workload)),
        num_nodes=len(group["nodes"]) if pinned else int(orchestration.get("nodesPerJob") or 1),
    )
    if diagnose.no_nvl_group(group["name"]):
        out = diagnose.without_mnnvl(out)
    expected = expected_performance(
        float(performance.get("expectedFloorFraction") or 0),
        out,
        group,
        gpu_architecture=str(orchestration.get("detectedGPUArchitecture") or ""),
        platform=str(orchestration.get("detectedPlatform") or ""),
        variant=variant,
        mnnvl=diagnose.mnnvl_enabled(out["workload"]),
    )
    if expected is not None:
        out["expectedPerformance"] = expected
    return out


def runtime_copy(copies: JobScopedCopies) -> str | None:
    """The Job-scoped TrainingRuntime copy the Job's workload names, if it names one."""
    ref = ((copies.job_spec.get("workload") or {}).get("trainJob") or {}).get("runtimeRef") or {}
    names = {
        (c.get("metadata") or {}).get("name")
        for c in copies.objects
        if c.get("kind") == TrainerKind.TRAINING_RUNTIME
    }
    return (
        str(ref["name"])
        if ref.get("kind") == TrainerKind.TRAINING_RUNTIME and ref.get("name") in names
        else None
    )


def job_body(
    spec: Mapping[str, Any], workflow: str, group: Mapping[str, Any], name: str, copies: JobScopedCopies
) -> dict[str, Any]:
    """The Job ``name`` of ``workflow``'s ``group``, with the spec of its Job-scoped ``copies``."""
    template_meta = (spec["jobTemplate"].get("metadata")) or {}
    runtime = runtime_copy(copies)
    return {
        "apiVersion": API_VERSION,
        "kind": Kind.JOB,
        "metadata": {
            "name": name,
            "labels": {
                **(template_meta.get("labels") or {}),
                Label.MANAGED_BY: MANAGED_BY_VALUE,
                Label.WORKFLOW: workflow,
                Label.GROUP: group["name"],
            },
            "annotations": {
                **(template_meta.get("annotations") or {}),
                Annotation.GROUP_NODES: ",".join(group["nodes"]),
                **({Annotation.GROUP_DOMAINS: ",".join(group["domains"])} if group.get("domains") else {}),
                **({Annotation.RUNTIME_COPY: runtime} if runtime else {}),
            },
            # The Job controller's own finalizer, set in the create: no write to add it after.
            "finalizers": [Finalizer.JOB],
        },
        "spec": copies.job_spec,
    }
