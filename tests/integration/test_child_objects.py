"""The objects the manager creates for a Workflow besides its Jobs, through their whole life.

Every kind config/rbac lets a Workflow dependency be is created, handed to its Job, and deleted
with it; a foreign TrainJob holding a Job's workload name is refused and left alone. These are
also the suite's uses of those grants, which test_zz_rbac_used requires (they run on the shared
control plane, so the Job is ended by hand).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.codecs import resource_registry
from lightkube.generic_resource import load_in_cluster_generic_resources

from nvcre import resources
from nvcre.api.v1alpha1.constants import Label
from nvcre.controllers.rbac import DEPENDENCY_KINDS
from nvcre.testing.builders import pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import get, jobs_of, trainjob_of, true_condition, wait_true
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import COMPUTE_DOMAIN_CRD, finish_trainjob, pool_name, workflow

CHANNEL = "domain-channel"

DEPENDENCIES: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}},
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "scratch"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    },
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "roce"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "roce", "exactly": {"deviceClassName": "roce.networking.k8s.aws"}}]
                }
            }
        },
    },
    {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "domain"},
        "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": CHANNEL}}},
    },
]
"""One of each kind besides the TrainingRuntime; the runtime's pod names each (the
ComputeDomain through its channel), so every one is copied for, and owned by, the Job."""
RUNTIME = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime"}
"""The kind of the runtime every test Workflow has (nvcre.testing.workloads.workflow)."""


def with_dependencies_in_its_pod(spec: dict[str, Any]) -> dict[str, Any]:
    runtime = spec["spec"]["dependencies"][0]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["volumes"] = [
        {"name": "settings", "configMap": {"name": "settings"}},
        {"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}},
    ]
    pod["resourceClaims"] = [
        {"name": "roce", "resourceClaimTemplateName": "roce"},
        {"name": "channel", "resourceClaimTemplateName": CHANNEL},
    ]
    spec["spec"]["dependencies"] += copy.deepcopy(DEPENDENCIES)
    return spec


@pytest.fixture(scope="module")
def compute_domains(control_plane: ControlPlane) -> Iterator[None]:
    control_plane.install_crds([COMPUTE_DOMAIN_CRD])
    yield


def of_workflow(
    kube: Client, namespace: str, name: str, *, live_only: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """The Workflow's dependency objects (by its label), by kind; ``live_only`` leaves out those
    being deleted (a PVC keeps its pvc-protection finalizer: no controller-manager runs here)."""
    load_in_cluster_generic_resources(kube)
    found: dict[str, list[dict[str, Any]]] = {}
    for dep in [*DEPENDENCIES, RUNTIME]:
        resource = resource_registry.load(dep["apiVersion"], dep["kind"])
        objects = [
            o.to_dict() for o in kube.list(resource, namespace=namespace, labels={Label.WORKFLOW: name})
        ]
        found[dep["kind"]] = [
            o for o in objects if not (live_only and o["metadata"].get("deletionTimestamp"))
        ]
    return found


def test_every_dependency_kind_is_created_owned_by_its_job_and_deleted_with_it(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, compute_domains: None
) -> None:
    tested = {(d["apiVersion"].rpartition("/")[0], d["kind"].lower() + "s") for d in [*DEPENDENCIES, RUNTIME]}
    assert tested == {(group, plural) for group, plural, _ in DEPENDENCY_KINDS}, "one of every kind allowed"
    pool = pool_name()
    gpu_nodes(1, pool_spec(pool))
    kube.create(
        resources.Workflow.from_dict(with_dependencies_in_its_pod(workflow("deps", namespace, pool, 1)))
    )
    trainjob = trainjob_of(kube, namespace, "deps-job", timeout=60)
    job = get(kube, resources.Job, "deps-job", namespace)

    def owned_by_the_job(children: dict[str, list[dict[str, Any]]]) -> bool:
        return all(
            ("Job", job["metadata"]["uid"])
            in {(o["kind"], o["uid"]) for o in objects[0]["metadata"].get("ownerReferences") or ()}
            for objects in children.values()
        )

    children = wait_for(
        lambda: (c := of_workflow(kube, namespace, "deps")) and owned_by_the_job(c) and c,
        30,
        what="a copy of every dependency, owned by the Job (it cascades with it)",
    )
    assert {kind: len(objects) for kind, objects in children.items()} == dict.fromkeys(children, 1)

    finish_trainjob(kube, namespace, trainjob["metadata"]["name"], succeeded=True)
    assert (
        true_condition(wait_true(kube, resources.Workflow, "deps", namespace, "Succeeded"))[1]
        == "JobCompleted"
    )
    left = wait_for(
        lambda: (f := of_workflow(kube, namespace, "deps", live_only=True)) and not any(f.values()) and f,
        30,
        what="the Job-scoped copies to be deleted",
    )
    assert left == {kind: [] for kind in children}


def test_a_foreign_trainjob_holding_the_workload_name_fails_the_job_and_is_left_alone(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool = pool_name()
    gpu_nodes(1, pool_spec(pool))
    foreign = resources.TrainJob.from_dict(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "taken-job-workload", "namespace": namespace},
            "spec": {"runtimeRef": {"name": "someone-elses", "kind": "TrainingRuntime"}},
        }
    )
    uid = kube.create(foreign).metadata.uid
    kube.create(resources.Workflow.from_dict(workflow("taken", namespace, pool, 1)))
    job = wait_for(lambda: jobs_of(kube, namespace, "taken").get("taken-job"), 60, what="the Job")
    failed = wait_true(kube, resources.Job, job["metadata"]["name"], namespace, "Failed")
    assert true_condition(failed) == (
        "Failed",
        "WorkloadCreationError",
        "Failed to build workload: TrainJob/taken-job-workload already exists and is not controlled by Job taken-job",
    )
    assert kube.get(resources.TrainJob, "taken-job-workload", namespace=namespace).metadata.uid == uid


def test_a_refused_copy_fails_the_workflow_and_takes_its_job_with_it(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """A Job-scoped copy is created after its Job (whose UID it carries as owner). When the API
    server refuses one, the Workflow fails naming it, and the Job created for it is deleted
    rather than left waiting for a runtime that will never exist."""
    pool = pool_name()
    gpu_nodes(1, pool_spec(pool))
    spec = workflow("refused", namespace, pool, 1)
    runtime = spec["spec"]["dependencies"][0]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "settings", "configMap": {"name": "settings"}}]
    # a key the API server refuses in a ConfigMap's data (the Workflow's schema does not look inside)
    bad = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings"},
        "data": {"not a key": "x"},
    }
    spec["spec"]["dependencies"].append(bad)
    kube.create(resources.Workflow.from_dict(spec))
    reason, message = true_condition(wait_true(kube, resources.Workflow, "refused", namespace, "Failed"))[1:]
    assert reason == "DependencyCreationError"
    assert message.startswith("Failed to create dependency: ConfigMap/settings-"), message
    assert "not a key" in message
    wait_for(
        lambda: not jobs_of(kube, namespace, "refused"),
        30,
        what="the Job created for the refused copy to be deleted",
    )
    assert not [
        r
        for r in kube.list(resources.TrainingRuntime, namespace=namespace, labels={Label.WORKFLOW: "refused"})
        if r.metadata and not r.metadata.deletionTimestamp
    ]
