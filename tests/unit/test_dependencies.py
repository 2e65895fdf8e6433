"""Dependency scopes, creation order and Job-scoped copies."""

from __future__ import annotations

from typing import Any

from nvcre.naming import dependency_copy_suffix
from nvcre.orchestration.dependencies import creation_order, job_scoped, job_scoped_copies

RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainingRuntime",
    "metadata": {"name": "nccl-runtime"},
    "spec": {
        "template": {
            "spec": {"resourceClaims": [{"name": "channel", "resourceClaimTemplateName": "imex-claims"}]}
        }
    },
}
CLAIMS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "imex-claims"},
    "spec": {"spec": {"devices": {"config": [{"opaque": {"parameters": {"domainID": "imex-channel"}}}]}}},
}
DOMAIN = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "ComputeDomain",
    "metadata": {"name": "imex"},
    "spec": {"channel": {"resourceClaimTemplate": {"name": "imex-channel"}}},
}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "train-script"}, "data": {"a": "b"}}
CLUSTER_RT = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "shared-rt"},
}
JOB_SPEC: dict[str, Any] = {
    "workloadMetadata": {"labels": {"team": "nccl-runtime"}},
    "workload": {
        "trainJob": {
            "runtimeRef": {"name": "nccl-runtime", "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 2},
        }
    },
}


def test_runtime_and_what_it_references_are_job_scoped() -> None:
    deps = [CONFIG, RUNTIME, CLAIMS, DOMAIN, CLUSTER_RT]
    assert job_scoped(deps, JOB_SPEC) == [1, 2, 3]


def test_cluster_kinds_are_never_copied() -> None:
    spec = {"workload": {"trainJob": {"runtimeRef": {"name": "shared-rt", "kind": "ClusterTrainingRuntime"}}}}
    assert job_scoped([CLUSTER_RT], spec) == []


def test_referenced_objects_are_created_first() -> None:
    deps = [RUNTIME, CLAIMS, DOMAIN]
    assert creation_order(deps, [0, 1, 2]) == [1, 0, 2]
    cycle = [
        {"kind": "A", "metadata": {"name": "aaa"}, "x": "bbb"},
        {"kind": "B", "metadata": {"name": "bbb"}, "x": "aaa"},
    ]
    assert creation_order(cycle, [0, 1]) == [0, 1]


def test_copies_are_renamed_and_references_rewritten() -> None:
    suffix = dependency_copy_suffix("nccl-all-reduce", "group-1", 2, single=False)
    assert suffix.endswith("-group-1-iter-2")
    copies = job_scoped_copies([CONFIG, RUNTIME], JOB_SPEC, suffix)
    assert [c["metadata"]["name"] for c in copies.objects] == [f"nccl-runtime{suffix}"]
    assert copies.job_spec["workload"]["trainJob"]["runtimeRef"]["name"] == f"nccl-runtime{suffix}"
    assert copies.job_spec["workloadMetadata"] == JOB_SPEC["workloadMetadata"], "labels are never rewritten"
    assert JOB_SPEC["workload"]["trainJob"]["runtimeRef"]["name"] == "nccl-runtime", "input untouched"


def test_single_job_suffix() -> None:
    assert dependency_copy_suffix("wf", "group-0", 1, single=True).endswith("-job")
