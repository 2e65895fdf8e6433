"""A workload pod is its TrainJob's only through the chain of controller ownerReferences
(Pod -> batch Job -> JobSet -> TrainJob), UIDs checked; labels alone never make it one."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nvcre.controllers.children import owner_reference
from nvcre.controllers.ownership import Ownership
from nvcre.testing.fakeclient import FakeClient
from nvcre.testing.workloads import create_chain, training_runtime
from nvcre.workload.ownership import OwnerRef, controller_of, parent

NS = "team"


def trainjob(name: str = "wf-job-workload") -> dict[str, Any]:
    labels = {"nvcre.nvidia.com/job": "wf-job"}
    patch = {
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": job, "template": {"spec": {"template": {"metadata": {"labels": labels}}}}}
                        for job in ("node", "launcher")
                    ]
                }
            }
        }
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"runtimeRef": {"name": "rt"}, "trainer": {"numNodes": 2}, "runtimePatches": [patch]},
    }


class World:
    def __init__(self) -> None:
        self.client = FakeClient()
        self.trainjob = self.client.put(trainjob())
        self.pods = create_chain(self.client.put, self.trainjob, training_runtime("rt", launcher=True))
        self.job = {"status": {"workloadRef": {"uid": self.trainjob["metadata"]["uid"]}}}
        self.ownership = Ownership(self.client)  # type: ignore[arg-type]

    def launcher(self) -> dict[str, Any]:
        return next(p for p in self.pods if "-launcher-" in p["metadata"]["name"])

    def forged(self, name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
        """A pod with the real launcher's labels; owned by ``owner`` when given."""
        pod = copy.deepcopy(self.launcher())
        pod["metadata"] = {"name": name, "namespace": NS, "labels": pod["metadata"]["labels"]}
        if owner is not None:
            pod["metadata"]["ownerReferences"] = [owner]
        return self.client.put(pod)


def test_controller_of_reads_the_one_controller_reference() -> None:
    pod = {
        "metadata": {
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u0"},
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": True},
            ]
        }
    }
    assert controller_of(pod) == OwnerRef("batch", "Job", "j", "u1")
    assert controller_of({"metadata": {}}) is None


def test_parent_checks_the_uid_and_the_next_kind() -> None:
    job_ref = OwnerRef("batch", "Job", "j", "u1")
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "uid": "u2"},
    }
    job = {"metadata": {"uid": "u1", "ownerReferences": [owner_reference(jobset)]}}
    assert parent(job, job_ref) == OwnerRef("jobset.x-k8s.io", "JobSet", "js", "u2")
    assert parent({**job, "metadata": {**job["metadata"], "uid": "other"}}, job_ref) is None
    trainjob_ref = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "t",
        "uid": "u3",
    }
    skipping = {"metadata": {"uid": "u1", "ownerReferences": [{**trainjob_ref, "controller": True}]}}
    assert parent(skipping, job_ref) is None, "a batch Job's controller must be a JobSet"


@pytest.mark.asyncio
async def test_only_the_chain_of_the_jobs_own_trainjob_counts() -> None:
    w = World()
    real = w.launcher()
    batch_job = controller_of(real)
    assert batch_job is not None
    jobset = w.client.objects[("jobset.x-k8s.io", "JobSet", NS, "wf-job-workload")]
    other_trainjob = w.client.put(trainjob("other-workload"))
    other_chain = create_chain(w.client.put, other_trainjob, training_runtime("rt", launcher=True))
    standalone = w.client.put(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "standalone", "namespace": NS}}
    )
    forged = [
        w.forged("a-no-owner"),
        w.forged(
            "b-wrong-uid",
            {**owner_reference(w.client.objects[("batch", "Job", NS, batch_job.name)]), "uid": "x"},
        ),
        w.forged("c-standalone-job", owner_reference(standalone)),
        w.forged("d-owned-by-the-jobset", owner_reference(jobset)),
        w.forged("e-gone-job", {**owner_reference(standalone), "name": "gone", "uid": "gone-uid"}),
        *[p for p in other_chain if "-launcher-" in p["metadata"]["name"]],
    ]
    mine = await w.ownership.pods_of(w.job, [*forged, *w.pods])
    assert [p["metadata"]["name"] for p in mine] == [p["metadata"]["name"] for p in w.pods]
    assert await w.ownership.pods_of({"status": {}}, w.pods) == [], "no TrainJob yet: no pod is its"


@pytest.mark.asyncio
async def test_each_owner_is_read_once() -> None:
    w = World()
    await w.ownership.pods_of(w.job, w.pods)
    reads = (w.client.count("get", "Job"), w.client.count("get", "JobSet"))
    assert reads == (2, 1), "the launcher's and the nodes' Jobs, their one JobSet"
    await w.ownership.pods_of(w.job, w.pods)
    assert (w.client.count("get", "Job"), w.client.count("get", "JobSet")) == reads


@pytest.mark.asyncio
async def test_the_memory_of_owners_is_bounded() -> None:
    w = World()
    w.ownership.capacity = 1
    assert await w.ownership.pods_of(w.job, w.pods) == w.pods
    assert len(w.ownership._parents) == 1
