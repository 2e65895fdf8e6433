"""Resolved transforms of a category's Workflow spec.

* ``options.image`` replaces the workload image everywhere the entry runs it (after the
  overrides: the user's image wins over a platform's).
* Workload-object labels (``jobTemplate.spec.workloadMetadata.labels``) merge per key, in the
  order of the Certification contract: labels of the catalog job spec, global
  ``spec.workloadMetadata.labels``, per-category ``options.workloadMetadata.labels``, then the
  resolved ``gangScheduler`` queue label, which is only ever inserted: the same value is
  accepted, a different one fails naming the key, both values and the field path. They are
  placed before the overrides resolve, so the shared gang-scheduling contract checks the result.
"""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.certification import CertificationSpec
from nvcre.catalog.errors import BuildError
from nvcre.catalog.options import category_path
from nvcre.render.gang import (
    WORKLOAD_LABELS_PATH,
    GangIntent,
    GangSchedulingConflict,
    LabelLayer,
    merge_workload_labels,
)


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c for key in ("initContainers", "containers") for c in pod_spec.get(key) or [] if isinstance(c, dict)
    ]


def apply_image(spec: dict[str, Any], image: str, entry_name: str) -> None:
    """Run ``image`` instead of the catalog's: the trainer and every container of the entry's runtime.

    MPI workers must run the same image as the launcher, and the training clone step looks for
    a checkout shipped in the workload image, so the whole runtime follows the option.
    """
    trainer = spec["jobTemplate"]["spec"]["workload"]["trainJob"].setdefault("trainer", {})
    trainer["image"] = image
    for dependency in spec.get("dependencies") or []:
        if dependency.get("kind") != "TrainingRuntime" or dependency.get("metadata", {}).get("name") != (
            f"{entry_name}-runtime"
        ):
            continue
        template = dependency.get("spec", {}).get("template", {}).get("spec", {})
        for job in template.get("replicatedJobs") or []:
            pod = job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
            for container in _containers(pod):
                if "image" in container and container.get("restartPolicy") != "Always":
                    container["image"] = image


def apply_workload_labels(workflow_spec: dict[str, Any], spec: CertificationSpec, index: int) -> None:
    """Merge the workload labels (catalog, global, per-category, gang queue) into the job template.

    With a gang scheduler, also persist it as ``spec.gangScheduler`` (defaults written out) and
    place its queue label and scheduler name on the entry's runtime templates.
    """
    job_spec = workflow_spec["jobTemplate"]["spec"]
    own = spec.categories[index].options
    layers = [
        LabelLayer(WORKLOAD_LABELS_PATH, (job_spec.get("workloadMetadata") or {}).get("labels")),
        LabelLayer(
            "spec.workloadMetadata.labels", spec.workload_metadata.labels if spec.workload_metadata else None
        ),
        LabelLayer(
            f"{category_path(index)}.workloadMetadata.labels",
            own.workload_metadata.labels if own and own.workload_metadata else None,
        ),
    ]
    intent = GangIntent.resolve(spec.gang_scheduler)
    try:
        labels = merge_workload_labels(
            layers, intent, target_path=f"{category_path(index)}.workloadMetadata.labels"
        )
    except GangSchedulingConflict as exc:
        raise BuildError(str(exc), field=layers[-1].path) from exc
    if labels:
        job_spec["workloadMetadata"] = {"labels": dict(sorted(labels.items()))}
    if intent is not None:
        workflow_spec["gangScheduler"] = intent.to_spec()
        runtime_ref = job_spec["workload"]["trainJob"]["runtimeRef"]["name"]
        for dependency in workflow_spec.get("dependencies") or []:
            if dependency.get("kind") == "TrainingRuntime" and dependency["metadata"]["name"] == runtime_ref:
                place_gang_on_runtime(dependency, intent)


def place_gang_on_runtime(runtime: dict[str, Any], intent: GangIntent) -> None:
    """The runtime side of gang scheduling: every replicatedJob's Job and pod templates carry the
    queue label, every pod names the scheduler, and nothing is held back from the gang (the MPI
    launcher's dependsOn and a JobSet startupPolicy would keep part of the gang from ever being
    created while the rest waits for admission)."""
    template = runtime["spec"]["template"]
    template.setdefault("spec", {}).pop("startupPolicy", None)
    for job in template["spec"].get("replicatedJobs") or []:
        job.pop("dependsOn", None)
        job_template = job.setdefault("template", {})
        job_template.setdefault("metadata", {}).setdefault("labels", {})[intent.queue_label_key] = (
            intent.queue
        )
        pod_template = job_template.setdefault("spec", {}).setdefault("template", {})
        pod_template.setdefault("metadata", {}).setdefault("labels", {})[intent.queue_label_key] = (
            intent.queue
        )
        pod_template.setdefault("spec", {})["schedulerName"] = intent.scheduler_name
