"""The persisted gang-scheduling contract and the workload-label merge, message by message."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nvcre.api.v1alpha1.common import GangSchedulerSpec
from nvcre.api.v1alpha1.constants import WorkflowReason
from nvcre.render.gang import (
    GangIntent,
    GangSchedulingConflict,
    LabelLayer,
    enforce_gang_contract,
    merge_workload_labels,
)
from nvcre.render.overrides import OverrideContext, apply_overrides
from nvcre.testing.builders import job_overlay, override, runtime_overlay, runtime_patch

KAI = GangIntent("kai-scheduler", "team-a", "kai.scheduler/queue")
TEAM_A = {"kai.scheduler/queue": "team-a"}
INTENT = 'gangScheduler is configured with queue "team-a" but'
SCHED = 'gangScheduler is configured with schedulerName "kai-scheduler" but'


def replicated_job(
    name: str,
    queue: str | None = "team-a",
    pod_queue: str | None = "team-a",
    scheduler: str | None = "kai-scheduler",
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": name,
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}},
    }
    if queue is not None:
        job["template"]["metadata"] = {"labels": {"kai.scheduler/queue": queue}}
    if pod_queue is not None:
        job["template"]["spec"]["template"]["metadata"] = {"labels": {"kai.scheduler/queue": pod_queue}}
    if scheduler is not None:
        job["template"]["spec"]["template"]["spec"]["schedulerName"] = scheduler
    return job


def workflow_spec(*jobs: dict[str, Any], runtime_name: str = "nccl-runtime") -> dict[str, Any]:
    return {
        "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "team-a"},
        "orchestration": {},
        "jobTemplate": {
            "spec": {
                "workloadMetadata": {"labels": {"kai.scheduler/queue": "team-a", "env": "burn-in"}},
                "workload": {
                    "trainJob": {
                        "runtimeRef": {"name": runtime_name, "kind": "TrainingRuntime"},
                        "trainer": {},
                    }
                },
            }
        },
        "dependencies": [
            runtime_overlay(runtime_name, *(jobs or [replicated_job("launcher"), replicated_job("node")]))
        ],
    }


def labels(spec: dict[str, Any]) -> dict[str, str]:
    result: dict[str, str] = spec["jobTemplate"]["spec"]["workloadMetadata"]["labels"]
    return result


def conflict(spec: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(GangSchedulingConflict) as error:
        enforce_gang_contract(spec, **kwargs)
    assert error.value.reason == WorkflowReason.GANG_SCHEDULING_CONFLICT == "GangSchedulingConflict"
    return str(error.value)


# --- intent --------------------------------------------------------------------------------------


def test_intent_defaults() -> None:
    intent = GangIntent.resolve({"schedulerName": "kai-scheduler"})
    assert intent == GangIntent("kai-scheduler", "default-queue", "kai.scheduler/queue")
    assert intent.to_spec() == {
        "schedulerName": "kai-scheduler",
        "queue": "default-queue",
        "queueLabelKey": "kai.scheduler/queue",
    }
    runai = GangIntent.resolve(
        GangSchedulerSpec(scheduler_name="runai-scheduler", queue="team-a", queue_label_key="runai/queue")
    )
    assert runai == GangIntent("runai-scheduler", "team-a", "runai/queue")
    assert GangIntent.resolve(None) is None


# --- the workload object label -------------------------------------------------------------------


def test_consistent_spec_passes_unchanged() -> None:
    spec = workflow_spec()
    check = enforce_gang_contract(spec)
    assert check.spec == spec
    assert not check.restored
    assert check.spec is not spec


def test_no_gang_scheduler_checks_nothing() -> None:
    spec = workflow_spec(replicated_job("node", queue="x", scheduler=None))
    del spec["gangScheduler"]
    assert enforce_gang_contract(spec).spec == spec


def test_removed_workload_label_is_restored() -> None:
    spec = workflow_spec()
    del labels(spec)["kai.scheduler/queue"]
    before = copy.deepcopy(spec)
    check = enforce_gang_contract(spec)
    assert check.restored
    assert labels(check.spec) == {"env": "burn-in", "kai.scheduler/queue": "team-a"}
    assert spec == before  # pure


def test_missing_workload_metadata_is_created() -> None:
    spec = workflow_spec()
    del spec["jobTemplate"]["spec"]["workloadMetadata"]
    check = enforce_gang_contract(spec)
    assert labels(check.spec) == {"kai.scheduler/queue": "team-a"}


def test_changed_workload_label_fails_with_exact_message() -> None:
    spec = workflow_spec()
    labels(spec)["kai.scheduler/queue"] = "team-b"
    assert conflict(spec) == (
        'spec.jobTemplate.spec.workloadMetadata.labels["kai.scheduler/queue"]: '
        'conflicting label value "team-b", expected "team-a"'
    )


def test_override_moving_the_queue_fails_and_unrelated_label_passes() -> None:
    spec = workflow_spec()
    spec["overrides"] = [
        override(
            {"platform": {"equals": "aws"}},
            job_template={"spec": {"workloadMetadata": {"labels": {"cost-center": "hpc"}}}},
        ),
        override(
            {"platform": {"equals": "gcp"}},
            job_template={"spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": "team-b"}}}},
        ),
        override(
            {"platform": {"equals": "azure"}},
            job_template={"spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": None}}}},
        ),
    ]
    aws = apply_overrides(spec, OverrideContext(platform="aws", gpu_architecture="h100")).spec
    assert labels(enforce_gang_contract(aws).spec)["cost-center"] == "hpc"
    gcp = apply_overrides(spec, OverrideContext(platform="gcp", gpu_architecture="h100")).spec
    assert conflict(gcp) == (
        'spec.jobTemplate.spec.workloadMetadata.labels["kai.scheduler/queue"]: '
        'conflicting label value "team-b", expected "team-a"'
    )
    azure = apply_overrides(spec, OverrideContext(platform="azure", gpu_architecture="h100")).spec
    assert "kai.scheduler/queue" not in labels(azure)
    repaired = enforce_gang_contract(azure)
    assert repaired.restored and labels(repaired.spec)["kai.scheduler/queue"] == "team-a"


def test_runai_key_and_value() -> None:
    spec = workflow_spec(replicated_job("node"))
    spec["gangScheduler"] = {
        "schedulerName": "kai-scheduler",
        "queue": "team-a",
        "queueLabelKey": "runai/queue",
    }
    labels(spec)["runai/queue"] = "other"
    message = conflict(spec)
    assert message.startswith(
        'spec.jobTemplate.spec.workloadMetadata.labels["runai/queue"]: conflicting label value "other", expected "team-a"'
    )
    # the runtime carries kai.scheduler/queue, not runai/queue
    assert (
        f'{INTENT} TrainingRuntime "nccl-runtime" replicatedJob "node" does not set label "runai/queue" on template.metadata.labels'
        in message
    )


def test_restoring_past_the_label_cap_fails() -> None:
    spec = workflow_spec()
    labels(spec).clear()
    labels(spec).update({f"l{i}": "v" for i in range(32)})
    assert conflict(spec) == (
        "spec.jobTemplate.spec.workloadMetadata.labels: 33 labels after merging and inserting the "
        'gangScheduler queue label "kai.scheduler/queue"; at most 32 are allowed'
    )


# --- the runtime ---------------------------------------------------------------------------------


def test_runtime_job_template_label_conflict_exact_message() -> None:
    spec = workflow_spec(replicated_job("launcher"), replicated_job("node", queue="team-b"))
    assert conflict(spec) == (
        'gangScheduler is configured with queue "team-a" but TrainingRuntime "nccl-runtime" replicatedJob "node" '
        'sets label "kai.scheduler/queue" to "team-b" on template.metadata.labels'
    )


def test_runtime_pod_label_conflict() -> None:
    spec = workflow_spec(replicated_job("launcher", pod_queue="team-b"), replicated_job("node"))
    assert conflict(spec) == (
        f'{INTENT} TrainingRuntime "nccl-runtime" replicatedJob "launcher" sets label "kai.scheduler/queue" '
        'to "team-b" on template.spec.template.metadata.labels'
    )


def test_runtime_missing_labels_and_scheduler_all_reported() -> None:
    spec = workflow_spec(
        replicated_job("launcher", queue=None, pod_queue=None, scheduler=None), replicated_job("node")
    )
    message = conflict(spec)
    assert message.split("; ") == [
        f'{INTENT} TrainingRuntime "nccl-runtime" replicatedJob "launcher" does not set label "kai.scheduler/queue" on template.metadata.labels',
        f'{INTENT} TrainingRuntime "nccl-runtime" replicatedJob "launcher" does not set label "kai.scheduler/queue" on template.spec.template.metadata.labels',
        f'{SCHED} TrainingRuntime "nccl-runtime" replicatedJob "launcher" does not set schedulerName on template.spec.template.spec',
    ]


def test_runtime_scheduler_conflict_is_never_repaired() -> None:
    spec = workflow_spec(replicated_job("launcher"), replicated_job("node", scheduler="default-scheduler"))
    assert conflict(spec) == (
        f'{SCHED} TrainingRuntime "nccl-runtime" replicatedJob "node" sets schedulerName to "default-scheduler" '
        "on template.spec.template.spec"
    )


def test_dependency_override_breaking_runtime_label_fails() -> None:
    spec = workflow_spec()
    spec["overrides"] = [
        override(
            dependencies=[
                runtime_overlay("nccl-runtime", job_overlay("node", labels={"kai.scheduler/queue": "team-b"}))
            ]
        )
    ]
    effective = apply_overrides(spec, OverrideContext()).spec
    assert conflict(effective) == (
        f'{INTENT} TrainingRuntime "nccl-runtime" replicatedJob "node" sets label "kai.scheduler/queue" to "team-b" '
        "on template.metadata.labels"
    )


def test_runtime_patches_are_folded_in_for_launcher_and_worker() -> None:
    spec = workflow_spec(
        replicated_job("launcher", queue=None, pod_queue=None), replicated_job("node", pod_queue=None)
    )
    spec["jobTemplate"]["spec"]["workload"]["trainJob"]["runtimePatches"] = [
        runtime_patch("site", job_overlay("launcher", labels=TEAM_A, pod_labels=TEAM_A)),
        runtime_patch("site2", job_overlay("node", pod_labels=TEAM_A)),
    ]
    assert not enforce_gang_contract(spec).restored


def test_runtime_patch_conflict_names_the_patch() -> None:
    spec = workflow_spec()
    spec["jobTemplate"]["spec"]["workload"]["trainJob"]["runtimePatches"] = [
        runtime_patch("nvcre.nvidia.com/catalog", job_overlay("node")),
        runtime_patch("site", job_overlay("node", pod_labels={"kai.scheduler/queue": "team-b"})),
    ]
    assert conflict(spec) == (
        f'{INTENT} TrainJob runtimePatches[1] (manager "site") sets label "kai.scheduler/queue" to "team-b" '
        'for TrainingRuntime "nccl-runtime" replicatedJob "node" on template.spec.template.metadata.labels'
    )


def test_runtime_patch_scheduler_conflict() -> None:
    spec = workflow_spec()
    spec["jobTemplate"]["spec"]["workload"]["trainJob"]["runtimePatches"] = [
        runtime_patch("site", job_overlay("launcher", schedulerName="default-scheduler")),
    ]
    assert (
        'TrainJob runtimePatches[0] (manager "site") sets schedulerName to "default-scheduler"'
        in conflict(spec)
    )


def test_repointed_runtime_ref_fails() -> None:
    base = workflow_spec()
    base["overrides"] = [
        override(job_template={"spec": {"workload": {"trainJob": {"runtimeRef": {"name": "other-runtime"}}}}})
    ]
    effective = apply_overrides(base, OverrideContext()).spec
    assert conflict(effective, base_spec=base) == (
        "spec.jobTemplate.spec.workload.trainJob.runtimeRef: an override repoints the runtime from "
        'TrainingRuntime "nccl-runtime" to TrainingRuntime "other-runtime", which is not among the '
        "Workflow's dependencies; gangScheduler cannot be verified on a runtime nvcre was not given"
    )


def test_runtime_not_among_dependencies_fails() -> None:
    spec = workflow_spec()
    spec["dependencies"] = []
    assert conflict(spec) == (
        'spec.jobTemplate.spec.workload.trainJob.runtimeRef: TrainingRuntime "nccl-runtime" is not among the '
        "Workflow's dependencies; gangScheduler cannot be verified on a runtime nvcre was not given"
    )


def test_repointing_to_a_runtime_that_is_a_dependency_is_checked_normally() -> None:
    base = workflow_spec()
    second = copy.deepcopy(base["dependencies"][0])
    second["metadata"]["name"] = "second-runtime"
    base["dependencies"].append(second)
    effective = copy.deepcopy(base)
    effective["jobTemplate"]["spec"]["workload"]["trainJob"]["runtimeRef"]["name"] = "second-runtime"
    assert not enforce_gang_contract(effective, base_spec=base).restored


def test_runtime_matched_by_kind_and_group() -> None:
    spec = workflow_spec()
    spec["dependencies"][0]["kind"] = "ConfigMap"
    spec["dependencies"][0]["apiVersion"] = "v1"
    assert "is not among the Workflow's dependencies" in conflict(spec)


# --- workloadMetadata merge ----------------------------------------------------------------------


def test_label_layers_merge_per_key_in_order() -> None:
    merged = merge_workload_labels(
        [
            LabelLayer("catalog", {"a": "1", "b": "1"}),
            LabelLayer("spec.workloadMetadata.labels", {"b": "2", "c": "2"}),
            LabelLayer(
                "spec.categories[0].options.workloadMetadata.labels",
                {"c": "3", "kueue.x-k8s.io/queue-name": "q"},
            ),
        ],
        KAI,
    )
    assert merged == {
        "a": "1",
        "b": "2",
        "c": "3",
        "kueue.x-k8s.io/queue-name": "q",
        "kai.scheduler/queue": "team-a",
    }
    assert list(merged)[-1] == "kai.scheduler/queue"


def test_same_queue_value_is_accepted() -> None:
    merged = merge_workload_labels(
        [LabelLayer("spec.workloadMetadata.labels", {"kai.scheduler/queue": "team-a"})], KAI
    )
    assert merged == {"kai.scheduler/queue": "team-a"}


def test_different_queue_value_fails_naming_key_values_and_layer() -> None:
    with pytest.raises(GangSchedulingConflict) as error:
        merge_workload_labels(
            [
                LabelLayer("spec.workloadMetadata.labels", {"kai.scheduler/queue": "team-a"}),
                LabelLayer(
                    "spec.categories[1].options.workloadMetadata.labels", {"kai.scheduler/queue": "burn-in"}
                ),
            ],
            KAI,
        )
    assert str(error.value) == (
        'spec.categories[1].options.workloadMetadata.labels["kai.scheduler/queue"]: '
        'conflicting label value "burn-in", expected "team-a"'
    )


def test_empty_value_is_a_real_label() -> None:
    with pytest.raises(GangSchedulingConflict, match='conflicting label value "", expected "team-a"'):
        merge_workload_labels([LabelLayer("p", {"kai.scheduler/queue": ""})], KAI)


def test_cap_counts_the_inserted_queue_label_and_never_drops() -> None:
    full = {f"k{i}": "v" for i in range(31)}
    assert len(merge_workload_labels([LabelLayer("p", full)], KAI)) == 32
    full["k31"] = "v"
    with pytest.raises(GangSchedulingConflict) as error:
        merge_workload_labels([LabelLayer("p", full)], KAI, target_path="spec.workloadMetadata.labels")
    assert str(error.value) == (
        "spec.workloadMetadata.labels: 33 labels after merging and inserting the gangScheduler queue label "
        '"kai.scheduler/queue"; at most 32 are allowed'
    )
    assert len(merge_workload_labels([LabelLayer("p", full)])) == 32
    full["k32"] = "v"
    with pytest.raises(
        GangSchedulingConflict,
        match=r"^spec\.jobTemplate\.spec\.workloadMetadata\.labels: 33 labels after merging; at most 32",
    ):
        merge_workload_labels([LabelLayer("p", full)])


def test_no_gang_merges_only() -> None:
    assert merge_workload_labels([LabelLayer("a", None), LabelLayer("b", {"x": "1"})]) == {"x": "1"}
