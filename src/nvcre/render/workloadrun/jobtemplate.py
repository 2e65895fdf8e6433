"""The Workflow's job template: the TrainJob, workload labels, health, checkpoint, measurements."""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.constants import Default, Label, ReplicatedJob, TrainerKind
from nvcre.api.v1alpha1.workloadrun import WorkloadRunSpec
from nvcre.naming import checkpoint_pvc_name, runtime_name
from nvcre.render.gang import GangIntent, GangSchedulingConflict, LabelLayer, merge_workload_labels
from nvcre.render.workloadrun import frameworks, placement
from nvcre.render.workloadrun.detection import Detection
from nvcre.render.workloadrun.errors import BuildError

RUNTIME_PATCH_MANAGER = "nvcre.nvidia.com/workloadrun"
WORKLOAD_LABELS_FIELD = "spec.workloadMetadata.labels"


def runtime_patches(spec: WorkloadRunSpec, kind: str) -> list[dict[str, Any]]:
    """Image pull secrets for every pod the run creates; MPI also names its launcher.

    The launcher entry lets the Workflow pin and tolerate the launcher like the workers.
    """
    jobs = [ReplicatedJob.NODE, ReplicatedJob.LAUNCHER] if kind == frameworks.MPI else [ReplicatedJob.NODE]
    secrets = [s.to_dict() for s in spec.image_pull_secrets or []]
    if not secrets and kind != frameworks.MPI:
        return []
    entries: list[dict[str, Any]] = []
    for job in jobs:
        entry: dict[str, Any] = {"name": job}
        if secrets:
            entry["template"] = {"spec": {"template": {"spec": {"imagePullSecrets": secrets}}}}
        entries.append(entry)
    return [
        {
            "manager": RUNTIME_PATCH_MANAGER,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": entries}}},
        }
    ]


def train_job(
    run_name: str,
    spec: WorkloadRunSpec,
    kind: str,
    det: Detection,
    merged_env: list[dict[str, Any]],
    pre_command: list[str],
    platform_mpi_args: list[str],
) -> dict[str, Any]:
    command, args = frameworks.command_args(
        spec.framework, kind, det.gpus_per_node, merged_env, spec.env or [], platform_mpi_args
    )
    command, args = frameworks.wrap_pre_command(pre_command, command, args)
    train_job: dict[str, Any] = {
        "runtimeRef": {"name": runtime_name(run_name), "kind": TrainerKind.TRAINING_RUNTIME},
        "trainer": {
            "image": spec.image,
            "command": command,
            "args": args,
            "numNodes": placement.nodes_per_job(spec),
            "numProcPerNode": det.gpus_per_node,
        },
    }
    patches = runtime_patches(spec, kind)
    if patches:
        train_job["runtimePatches"] = patches
    return train_job


def job_spec(
    run_name: str, spec: WorkloadRunSpec, train_job: dict[str, Any], labels: dict[str, str]
) -> dict[str, Any]:
    job: dict[str, Any] = {"workload": {"trainJob": train_job}}
    if labels:
        job["workloadMetadata"] = {"labels": labels}
    job["nodeHealthMonitor"] = {"cel": {"expression": Default.NODE_HEALTH_EXPRESSION}}
    if spec.checkpoint is not None:
        job["checkpoint"] = {
            "pvcName": checkpoint_pvc_name(run_name),
            "maxRestarts": spec.checkpoint.max_restarts or 0,
        }
    if spec.goodput_measurement is not None:
        job["goodputMeasurement"] = spec.goodput_measurement.to_dict()
    if spec.bandwidth_measurement is not None:
        job["bandwidthMeasurement"] = spec.bandwidth_measurement.to_dict()
    return job


def checkpoint_pvc(run_name: str, spec: WorkloadRunSpec) -> dict[str, Any] | None:
    if spec.checkpoint is None:
        return None
    pvc_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": spec.checkpoint.storage_size}},
    }
    if spec.checkpoint.storage_class_name is not None:
        pvc_spec["storageClassName"] = spec.checkpoint.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": checkpoint_pvc_name(run_name), "labels": {Label.APP: run_name}},
        "spec": pvc_spec,
    }


def validation(spec: WorkloadRunSpec) -> dict[str, Any] | None:
    if not spec.thresholds:
        return None
    return {
        "performance": {"enabled": True, "thresholds": {"thresholds": dict(sorted(spec.thresholds.items()))}}
    }


def workload_labels(spec: WorkloadRunSpec, gang: GangIntent | None) -> dict[str, str]:
    """``workloadMetadata.labels`` with the gang queue label inserted (a conflict or > 32 fails)."""
    user = spec.workload_metadata.labels if spec.workload_metadata else None
    try:
        return merge_workload_labels(
            [LabelLayer(WORKLOAD_LABELS_FIELD, user)], gang, target_path=WORKLOAD_LABELS_FIELD
        )
    except GangSchedulingConflict as error:
        raise BuildError(str(error)) from error
