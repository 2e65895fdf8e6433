"""Resolved transforms applied to a category's Workflow spec after its overrides.

* ``options.image`` replaces the workload image everywhere the entry runs it.
* Workload-object labels (``jobTemplate.spec.workloadMetadata.labels``) merge per key, in the
  order of the Certification contract: labels of the catalog job spec, global
  ``spec.workloadMetadata.labels``, per-category ``options.workloadMetadata.labels``, then the
  resolved ``gangScheduler`` queue label, which is only ever inserted: the same value is
  accepted, a different one fails naming the key, both values and the field path.
"""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.certification import CategoryOptions, CertificationSpec
from nvcre.api.v1alpha1.constants import Default
from nvcre.catalog.errors import BuildError
from nvcre.catalog.options import category_path, merge_labels


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for key in ("initContainers", "containers") for c in pod_spec.get(key) or [] if isinstance(c, dict)]


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
                if "image" in container and not container.get("restartPolicy") == "Always":
                    container["image"] = image


def _label_source(spec: CertificationSpec, index: int, key: str) -> str:
    own = spec.categories[index].options
    if own and own.workload_metadata and key in (own.workload_metadata.labels or {}):
        return f"{category_path(index)}.workloadMetadata.labels"
    if spec.workload_metadata and key in (spec.workload_metadata.labels or {}):
        return "spec.workloadMetadata.labels"
    return "spec.jobTemplate.spec.workloadMetadata.labels"


def apply_workload_labels(
    workflow_spec: dict[str, Any], spec: CertificationSpec, index: int, options: CategoryOptions
) -> None:
    """Merge the workload labels and the gang queue label into the job template; copy gangScheduler."""
    job_spec = workflow_spec["jobTemplate"]["spec"]
    catalog_labels = (job_spec.get("workloadMetadata") or {}).get("labels")
    labels = merge_labels(catalog_labels, options.workload_metadata.labels if options.workload_metadata else None)
    gang = spec.gang_scheduler
    if gang is not None:
        key = gang.queue_label_key or Default.QUEUE_LABEL_KEY
        queue = gang.queue or Default.QUEUE
        current = labels.get(key)
        if current is not None and current != queue:
            raise BuildError(
                f'{_label_source(spec, index, key)}["{key}"]: conflicting label value "{current}", expected '
                f'"{queue}" (the queue of spec.gangScheduler)',
                field=f"{_label_source(spec, index, key)}[{key}]",
            )
        labels[key] = queue
        workflow_spec["gangScheduler"] = {
            "schedulerName": gang.scheduler_name,
            "queue": queue,
            "queueLabelKey": key,
        }
    if len(labels) > Default.MAX_WORKLOAD_LABELS:
        path = f"{category_path(index)}.workloadMetadata.labels"
        raise BuildError(
            f"{path}: {len(labels)} workload labels after merging (global, per-category and the gang queue "
            f"label) exceed the maximum of {Default.MAX_WORKLOAD_LABELS}",
            field=path,
        )
    if labels:
        job_spec["workloadMetadata"] = {"labels": dict(sorted(labels.items()))}
