"""The TrainJob adapter: names, labels, owner, nvcre's runtime patch, phases."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.testing.builders import runtime_patch
from nvcre.workload import trainjob

JOB: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "nccl-all-reduce-group-1-iter-1", "namespace": "team", "uid": "u-1"},
    "spec": {
        "workloadMetadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "workload": {
            "trainJob": {
                "runtimeRef": {"name": "rt", "kind": "TrainingRuntime"},
                "trainer": {"numNodes": 2},
                "runtimePatches": [
                    runtime_patch("nvcre.nvidia.com/catalog", {"name": "node"}, {"name": "launcher"})
                ],
            }
        },
    },
}


def own_patch_jobs(spec: dict[str, Any]) -> dict[str, Any]:
    patch = next(p for p in spec["runtimePatches"] if p["manager"] == trainjob.PATCH_MANAGER)
    return {
        j["name"]: j["template"]["spec"]["template"]
        for j in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    }


def test_build_names_labels_and_owns_the_trainjob() -> None:
    built = trainjob.build(JOB)
    assert built["metadata"]["name"] == "nccl-all-reduce-group-1-iter-1-workload"
    long = trainjob.build(
        {**JOB, "metadata": {**JOB["metadata"], "name": "a-very-long-certification-name-group-12-iter-3"}}
    )
    assert len(long["metadata"]["name"]) == 44
    assert built["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "q",
        "app.kubernetes.io/managed-by": "nvcre",
        "nvcre.nvidia.com/job": "nccl-all-reduce-group-1-iter-1",
    }
    owner = built["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Job",
        JOB["metadata"]["name"],
        "u-1",
        True,
    )


def test_pod_label_goes_to_the_workers_and_the_launcher_through_nvcres_own_patch() -> None:
    built = trainjob.build(JOB)
    labels = {name: pod["metadata"]["labels"] for name, pod in own_patch_jobs(built["spec"]).items()}
    assert labels == {
        "node": {"nvcre.nvidia.com/job": JOB["metadata"]["name"]},
        "launcher": {"nvcre.nvidia.com/job": JOB["metadata"]["name"]},
    }, "mpirun fails in the launcher: its pod must be found by the label too"
    user_patch = built["spec"]["runtimePatches"][0]
    assert user_patch == JOB["spec"]["workload"]["trainJob"]["runtimePatches"][0], (
        "user patches are not edited"
    )
    assert "workloadMetadata" not in str(own_patch_jobs(built["spec"])), "workload labels never reach pods"


def test_place_pins_every_patched_job_and_sets_num_nodes() -> None:
    affinity = {"nodeAffinity": {"x": 1}}
    spec = trainjob.place(
        JOB["spec"]["workload"]["trainJob"],
        affinity=affinity,
        tolerations=[{"operator": "Exists"}],
        num_nodes=4,
    )
    pods = own_patch_jobs(spec)
    assert set(pods) == {"node", "launcher"}
    for pod in pods.values():
        assert pod["spec"]["affinity"] == affinity
        assert pod["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert spec["trainer"]["numNodes"] == 4
    assert "affinity" not in str(JOB), "input untouched"


def test_default_target_is_the_node_job() -> None:
    spec = {"runtimeRef": {"name": "rt"}, "trainer": {"numNodes": 1}}
    assert set(own_patch_jobs(trainjob.place(spec, affinity={"a": 1}, tolerations=[], num_nodes=1))) == {
        "node"
    }
    assert not trainjob.has_launcher(spec)
    assert trainjob.has_launcher(JOB["spec"]["workload"]["trainJob"])


def test_nodes_required_and_missing_workload() -> None:
    assert trainjob.nodes_required({"trainer": {"numNodes": 3}}) == 3
    with pytest.raises(trainjob.AdapterError, match=r"TrainJob\.Trainer\.NumNodes not set"):
        trainjob.nodes_required({"trainer": {}})
    with pytest.raises(trainjob.AdapterError, match="no workload type specified in WorkloadSpec"):
        trainjob.trainjob_spec({"workload": {}})


@pytest.mark.parametrize(
    ("obj", "phase", "message"),
    [
        (
            {"status": {"conditions": [{"type": "Failed", "status": "True", "message": "oom"}]}},
            "Failed",
            "oom",
        ),
        ({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}, "Succeeded", ""),
        ({"spec": {"suspend": True}}, "Pending", "suspended"),
        ({"status": {"conditions": [{"type": "Complete", "status": "False"}]}}, "Running", ""),
        ({}, "Running", ""),
    ],
)
def test_status(obj: dict[str, Any], phase: str, message: str) -> None:
    assert trainjob.status(obj) == trainjob.WorkloadStatus(phase, message)  # type: ignore[arg-type]
