"""The TrainJob adapter, as pure functions over plain dicts.

Everything nvcre changes on a TrainJob (node affinity, tolerations, the Job's pod label) goes
into one runtime patch owned by nvcre, so the user's own patches (and the TrainingRuntime)
are never edited.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    MANAGED_BY_VALUE,
    TRAINER_API_VERSION,
    Kind,
    Label,
    ReplicatedJob,
    TrainerKind,
    TrainJobCondition,
)
from nvcre.conditions import condition_of, condition_true
from nvcre.naming import trainjob_name

PATCH_MANAGER = "nvcre.nvidia.com/controller"
RUNTIME_NOT_FOUND = "specified trainingRuntime must be created before the TrainJob is created"
"""Trainer's validating webhook refusing a TrainJob whose runtime its own informer has not seen."""

Phase = Literal["Pending", "Running", "Succeeded", "Failed"]


class AdapterError(ValueError):
    pass


def trainjob_spec(job_spec: Mapping[str, Any]) -> dict[str, Any]:
    workload = job_spec.get("workload") or {}
    if "trainJob" not in workload:
        raise AdapterError("no workload type specified in WorkloadSpec")
    return copy.deepcopy(dict(workload["trainJob"]))


def nodes_required(spec: Mapping[str, Any]) -> int:
    num = (spec.get("trainer") or {}).get("numNodes")
    if num is None:
        raise AdapterError("TrainJob.Trainer.NumNodes not set")
    return int(num)


def _patched_jobs(spec: Mapping[str, Any]) -> list[str]:
    """Replicated jobs named in the TrainJob's runtime patches, in order (default: node)."""
    names: list[str] = []
    for patch in spec.get("runtimePatches") or ():
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        for job in (template.get("spec") or {}).get("replicatedJobs") or ():
            if job.get("name") and job["name"] not in names:
                names.append(job["name"])
    return names or [ReplicatedJob.NODE]


def has_launcher(spec: Mapping[str, Any]) -> bool:
    return ReplicatedJob.LAUNCHER in _patched_jobs(spec)


def worker_job(spec: Mapping[str, Any]) -> str:
    return next((n for n in _patched_jobs(spec) if n != ReplicatedJob.LAUNCHER), ReplicatedJob.NODE)


def _own_patch(spec: dict[str, Any]) -> dict[str, Any]:
    patches: list[dict[str, Any]] = spec.setdefault("runtimePatches", [])
    for patch in patches:
        if patch.get("manager") == PATCH_MANAGER:
            return patch
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": []}}}}
    patches.append(patch)
    return patch


def _pod_template(spec: dict[str, Any], job_name: str) -> dict[str, Any]:
    """The pod template of ``job_name`` inside nvcre's own runtime patch (created on demand)."""
    jobs: list[dict[str, Any]] = _own_patch(spec)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    entry = next((j for j in jobs if j.get("name") == job_name), None)
    if entry is None:
        entry = {"name": job_name, "template": {"spec": {"template": {}}}}
        jobs.append(entry)
    template: dict[str, Any] = (
        entry.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    )
    return template


def place(
    spec: Mapping[str, Any],
    *,
    affinity: Mapping[str, Any] | None,
    tolerations: Sequence[Mapping[str, Any]],
    num_nodes: int,
) -> dict[str, Any]:
    """A copy of the TrainJob spec pinned to a group: affinity and tolerations on every patched
    replicated job, ``trainer.numNodes`` set to the group size."""
    out = copy.deepcopy(dict(spec))
    for name in _patched_jobs(spec):
        pod = _pod_template(out, name).setdefault("spec", {})
        if affinity is not None:
            pod["affinity"] = copy.deepcopy(dict(affinity))
        if tolerations:
            pod.setdefault("tolerations", []).extend(copy.deepcopy(list(tolerations)))
    out.setdefault("trainer", {})["numNodes"] = num_nodes
    return out


def build(job: Mapping[str, Any]) -> dict[str, Any]:
    """The TrainJob a Job creates: named ``<job>-workload``, labelled, owned by the Job, with
    ``nvcre.nvidia.com/job`` injected through nvcre's runtime patch into the pods of every
    replicated job it names (the workers and, for MPI, the launcher, where ``mpirun`` fails):
    the failure log, the pod-drain barrier, node health and the unschedulable check find a
    Job's pods by that label."""
    meta = job["metadata"]
    spec = trainjob_spec(job["spec"])
    for name in dict.fromkeys([worker_job(spec), *_patched_jobs(spec)]):
        pod_meta = _pod_template(spec, name).setdefault("metadata", {})
        pod_meta.setdefault("labels", {})[Label.JOB] = meta["name"]
    user_labels = ((job["spec"].get("workloadMetadata") or {}).get("labels")) or {}
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": TrainerKind.TRAIN_JOB,
        "metadata": {
            "name": trainjob_name(meta["name"]),
            "namespace": meta.get("namespace"),
            "labels": {**user_labels, Label.MANAGED_BY: MANAGED_BY_VALUE, Label.JOB: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": Kind.JOB,
                    "name": meta["name"],
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


@dataclass(frozen=True)
class WorkloadStatus:
    phase: Phase
    message: str = ""


def status(trainjob: Mapping[str, Any]) -> WorkloadStatus:
    """Failed / Succeeded from the TrainJob's conditions; Pending while suspended (Kueue holds
    it) or not yet started; Running otherwise."""
    if condition_true(trainjob, TrainJobCondition.FAILED):
        failed = condition_of(trainjob, TrainJobCondition.FAILED) or {}
        return WorkloadStatus("Failed", str(failed.get("message") or ""))
    if condition_true(trainjob, TrainJobCondition.COMPLETE):
        complete = condition_of(trainjob, TrainJobCondition.COMPLETE) or {}
        return WorkloadStatus("Succeeded", str(complete.get("message") or ""))
    if (trainjob.get("spec") or {}).get("suspend") or condition_true(trainjob, "Suspended"):
        return WorkloadStatus("Pending", "suspended")
    return WorkloadStatus("Running")
