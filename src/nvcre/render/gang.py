"""The persisted gang-scheduling contract and the workload-label merge it relies on.

``Workflow.spec.gangScheduler`` records the resolved intent (scheduler name, queue, queue label
key). After every override resolves, and before any dependency or Job is created, the effective
manifests are checked against it:

- the workload object's queue label (``jobTemplate.spec.workloadMetadata.labels``) is nvcre's to
  write: an override that removed it gets it back, one that changed it fails;
- the runtime's queue labels (each replicatedJob's Job template and pod template metadata) and
  pod ``schedulerName`` are assertions over the TrainingRuntime dependency: missing or different
  values fail and are never repaired. TrainJob ``runtimePatches`` are folded in first;
- a ``runtimeRef`` that names a runtime which is not among the Workflow's dependencies fails:
  nvcre cannot vouch for a runtime it cannot see.

Every failure is a ``GangSchedulingConflict`` (condition reason ``GangSchedulingConflict``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre.api.v1alpha1.common import GangSchedulerSpec
from nvcre.api.v1alpha1.constants import TRAINER_GROUP, Default, TrainerKind, WorkflowReason

WORKLOAD_LABELS_PATH: Final = "spec.jobTemplate.spec.workloadMetadata.labels"
RUNTIME_REF_PATH: Final = "spec.jobTemplate.spec.workload.trainJob.runtimeRef"
JOB_TEMPLATE_LABELS: Final = "template.metadata.labels"
POD_TEMPLATE_LABELS: Final = "template.spec.template.metadata.labels"
POD_SPEC: Final = "template.spec.template.spec"


class GangSchedulingConflict(ValueError):
    """The effective manifests disagree with the gang-scheduling intent (or the label cap)."""

    reason: Final = WorkflowReason.GANG_SCHEDULING_CONFLICT

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class GangIntent:
    """A ``GangSchedulerSpec`` with its defaults filled in."""

    scheduler_name: str
    queue: str = Default.QUEUE
    queue_label_key: str = Default.QUEUE_LABEL_KEY

    @classmethod
    def resolve(cls, spec: GangSchedulerSpec | Mapping[str, Any] | None) -> GangIntent | None:
        if spec is None:
            return None
        model = spec if isinstance(spec, GangSchedulerSpec) else GangSchedulerSpec.model_validate(spec)
        return cls(
            scheduler_name=model.scheduler_name,
            queue=model.queue or Default.QUEUE,
            queue_label_key=model.queue_label_key or Default.QUEUE_LABEL_KEY,
        )

    def to_spec(self) -> dict[str, str]:
        """The persisted form (``Workflow.spec.gangScheduler``), defaults written out."""
        return {
            "schedulerName": self.scheduler_name,
            "queue": self.queue,
            "queueLabelKey": self.queue_label_key,
        }


def label_path(path: str, key: str) -> str:
    """``<path>["<key>"]``."""
    return f"{path}[{json.dumps(key)}]"


def conflict_message(path: str, key: str, actual: str, expected: str) -> str:
    """``<path>["<key>"]: conflicting label value "<actual>", expected "<expected>"``."""
    return f"{label_path(path, key)}: conflicting label value {json.dumps(actual)}, expected {json.dumps(expected)}"


# --- workloadMetadata merge --------------------------------------------------------------------


@dataclass(frozen=True)
class LabelLayer:
    """One source of workload labels and the field path it is read from."""

    path: str
    labels: Mapping[str, str] | None


def merge_workload_labels(
    layers: Sequence[LabelLayer],
    gang: GangIntent | None = None,
    *,
    target_path: str = WORKLOAD_LABELS_PATH,
    max_labels: int = Default.MAX_WORKLOAD_LABELS,
) -> dict[str, str]:
    """Merge label maps per key in order, then insert the gang queue label without overwriting.

    Later layers replace earlier values by key. The queue label is inserted when missing; the
    same value is accepted; a different value fails naming the key, both values and the path of
    the layer that set it. More than ``max_labels`` labels afterwards fails (nothing is dropped).
    """
    merged: dict[str, str] = {}
    origin: dict[str, str] = {}
    for layer in layers:
        for key, value in (layer.labels or {}).items():
            merged[key] = value
            origin[key] = layer.path
    if gang is not None:
        key = gang.queue_label_key
        if key not in merged:
            merged[key] = gang.queue
        elif merged[key] != gang.queue:
            raise GangSchedulingConflict([conflict_message(origin[key], key, merged[key], gang.queue)])
    if len(merged) > max_labels:
        inserted = f' and inserting the gangScheduler queue label "{gang.queue_label_key}"' if gang else ""
        raise GangSchedulingConflict(
            [f"{target_path}: {len(merged)} labels after merging{inserted}; at most {max_labels} are allowed"]
        )
    return merged


# --- the contract ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GangCheck:
    """The spec to run (queue label restored if an override removed it) and what was repaired."""

    spec: dict[str, Any]
    restored: bool = False

    @property
    def message(self) -> str:
        return "restored the workload queue label an override removed" if self.restored else ""


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _runtime_ref(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    ref = _get(spec, "jobTemplate", "spec", "workload", "trainJob", "runtimeRef")
    if not isinstance(ref, Mapping):
        return None
    return (str(ref.get("kind") or TrainerKind.TRAINING_RUNTIME), str(ref.get("name") or ""))


def _find_runtime(spec: Mapping[str, Any], kind: str, name: str) -> Mapping[str, Any] | None:
    for dependency in spec.get("dependencies") or []:
        if not isinstance(dependency, Mapping):
            continue
        group = str(dependency.get("apiVersion") or "").split("/")[0]
        if (
            group == TRAINER_GROUP
            and dependency.get("kind") == kind
            and _get(dependency, "metadata", "name") == name
        ):
            return dependency
    return None


def _replicated_jobs(runtime_spec: Any) -> list[Mapping[str, Any]]:
    jobs = _get(runtime_spec, "template", "spec", "replicatedJobs")
    return [job for job in jobs if isinstance(job, Mapping)] if isinstance(jobs, list) else []


@dataclass(frozen=True)
class _Value:
    value: Any
    source: str  # "" for the runtime itself, else the runtimePatches description


def _effective(
    job: Mapping[str, Any],
    patches: Sequence[tuple[str, Mapping[str, Any]]],
    *keys: str,
) -> _Value:
    """A value of a replicatedJob with the TrainJob's runtimePatches folded in (later wins)."""
    result = _Value(_get(job, *keys), "")
    for description, patched_job in patches:
        value = _get(patched_job, *keys)
        if value is not None:
            result = _Value(value, description)
    return result


def _patches_for(train_job: Mapping[str, Any], job_name: str) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    patches = train_job.get("runtimePatches")
    if not isinstance(patches, list):
        return found
    for index, patch in enumerate(patches):
        if not isinstance(patch, Mapping):
            continue
        for job in _replicated_jobs(patch.get("trainingRuntimeSpec")):
            if job.get("name") == job_name:
                manager = patch.get("manager")
                who = f' (manager "{manager}")' if manager else ""
                found.append((f"TrainJob runtimePatches[{index}]{who}", job))
    return found


def _where(runtime: str, job: str, source: str, field: str) -> str:
    if source:
        return f'{source} sets {field} for TrainingRuntime "{runtime}" replicatedJob "{job}"'
    return f'TrainingRuntime "{runtime}" replicatedJob "{job}" sets {field}'


def _check_runtime(
    runtime_name: str, runtime: Mapping[str, Any], train_job: Mapping[str, Any], gang: GangIntent
) -> list[str]:
    problems: list[str] = []
    queue_intent = f'gangScheduler is configured with queue "{gang.queue}" but'
    scheduler_intent = f'gangScheduler is configured with schedulerName "{gang.scheduler_name}" but'
    key = gang.queue_label_key
    jobs = _replicated_jobs(runtime.get("spec"))
    if not jobs:
        return [f'{queue_intent} TrainingRuntime "{runtime_name}" has no replicatedJobs to label']
    label = f'label "{key}"'
    checks = (  # (intent, the field, the value it needs, where in a replicatedJob, its key there)
        (queue_intent, label, gang.queue, JOB_TEMPLATE_LABELS, key),
        (queue_intent, label, gang.queue, POD_TEMPLATE_LABELS, key),
        (scheduler_intent, "schedulerName", gang.scheduler_name, POD_SPEC, "schedulerName"),
    )
    for job in jobs:
        job_name = str(job.get("name") or "")
        patches = _patches_for(train_job, job_name)
        for intent, field, expected, where, leaf in checks:
            found = _effective(job, patches, *where.split("."), leaf)
            if found.value is None:
                problems.append(
                    f'{intent} TrainingRuntime "{runtime_name}" replicatedJob "{job_name}" '
                    f"does not set {field} on {where}"
                )
            elif found.value != expected:
                setting = f"{field} to {json.dumps(found.value)}"
                problems.append(
                    f"{intent} {_where(runtime_name, job_name, found.source, setting)} on {where}"
                )
    return problems


def enforce_gang_contract(
    spec: Mapping[str, Any],
    gang: GangIntent | GangSchedulerSpec | Mapping[str, Any] | None = None,
    *,
    base_spec: Mapping[str, Any] | None = None,
) -> GangCheck:
    """Check an effective (post-override) Workflow spec against its gang-scheduling intent.

    ``gang`` defaults to ``spec.gangScheduler``. ``base_spec`` is the spec before overrides; when
    given, a runtimeRef that differs from it is reported as repointed by an override. Pure:
    returns a new spec (the workload queue label restored when missing) or raises
    ``GangSchedulingConflict`` listing every problem.
    """
    intent = gang if isinstance(gang, GangIntent) else GangIntent.resolve(gang or spec.get("gangScheduler"))
    result = copy.deepcopy(dict(spec))
    if intent is None:
        return GangCheck(result)
    problems: list[str] = []
    restored = False

    job_spec = result.setdefault("jobTemplate", {}).setdefault("spec", {})
    labels = _get(job_spec, "workloadMetadata", "labels")
    current = dict(labels) if isinstance(labels, Mapping) else {}
    key = intent.queue_label_key
    if key in current and current[key] != intent.queue:
        problems.append(conflict_message(WORKLOAD_LABELS_PATH, key, current[key], intent.queue))
    elif key not in current:
        try:
            merged = merge_workload_labels([LabelLayer(WORKLOAD_LABELS_PATH, current)], intent)
        except GangSchedulingConflict as error:
            problems.extend(error.problems)
        else:
            metadata = job_spec.get("workloadMetadata")
            job_spec["workloadMetadata"] = {
                **(metadata if isinstance(metadata, Mapping) else {}),
                "labels": merged,
            }
            restored = True

    train_job = _get(job_spec, "workload", "trainJob")
    ref = _runtime_ref(result)
    if isinstance(train_job, Mapping) and ref is not None:
        kind, name = ref
        runtime = _find_runtime(result, kind, name)
        if runtime is None:
            base_ref = _runtime_ref(base_spec) if base_spec is not None else None
            if base_ref is not None and base_ref != ref:
                problems.append(
                    f"{RUNTIME_REF_PATH}: an override repoints the runtime from {base_ref[0]} "
                    f'"{base_ref[1]}" to {kind} "{name}", which is not among the Workflow\'s dependencies; '
                    "gangScheduler cannot be verified on a runtime nvcre was not given"
                )
            else:
                problems.append(
                    f'{RUNTIME_REF_PATH}: {kind} "{name}" is not among the Workflow\'s dependencies; '
                    "gangScheduler cannot be verified on a runtime nvcre was not given"
                )
        else:
            problems.extend(_check_runtime(name, runtime, train_job, intent))
    if problems:
        raise GangSchedulingConflict(problems)
    return GangCheck(result, restored)
