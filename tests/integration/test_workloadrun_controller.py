"""The WorkloadRun controller on the real API server, with kwok GPU nodes.

The test plays Kubeflow Trainer: it ends TrainJobs by setting their Complete/Failed condition
(kept: each condition and event the run mirrors is checked; the whole chain runs in
tests/sandbox/test_full_chain.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client

from nvcre import resources
from nvcre.conditions import condition_of, condition_true
from nvcre.testing import inspect
from nvcre.testing.builders import WorkloadRun, new_pool
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name, workflow

MPI = {
    "mpi": {
        "mpirunPath": "/usr/local/mpi/bin/mpirun",
        "binary": "/usr/local/bin/all_reduce_perf_mpi",
        "args": ["-b", "8", "-e", "32G", "-f", "2", "-n", "100"],
    }
}


def workload_run(name: str, namespace: str, pool: str, num_nodes: int, **spec: Any) -> dict[str, Any]:
    return (
        WorkloadRun(name).namespace(namespace).framework(MPI).nodes(num_nodes).pool(pool).spec(**spec).obj()
    )


def create_run(kube: Client, run: dict[str, Any]) -> None:
    kube.create(resources.WorkloadRun.from_dict(run))


def run_status(kube: Client, name: str, namespace: str) -> dict[str, Any]:
    return inspect.get(kube, resources.WorkloadRun, name, namespace).get("status") or {}


def test_success_is_mirrored(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    """§13.12: the run creates its Workflow, the Workflow succeeds, the run mirrors it."""
    pool, nodes = new_pool(gpu_nodes, 4)
    create_run(
        kube,
        workload_run("allreduce", namespace, pool, 4, imagePullSecrets=[{"name": "ngc-pull"}]),
    )
    run = inspect.wait_true(kube, resources.WorkloadRun, "allreduce", namespace, "InProgress")
    assert inspect.true_condition(run) == ("InProgress", "WorkflowCreated", "Workflow allreduce created")
    assert run["status"]["workflowRef"] == {"name": "allreduce", "namespace": namespace}
    assert run["status"]["resolvedGpusPerNode"] == 8
    assert {c["type"]: (c["status"], c["reason"]) for c in run["status"]["conditions"]} == {
        "InProgress": ("True", "WorkflowCreated"),
        "Succeeded": ("False", "Superseded"),
        "Failed": ("False", "Superseded"),
    }

    wf = inspect.get(kube, resources.Workflow, "allreduce", namespace)
    assert wf["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "nvcre",
        "nvcre.nvidia.com/workload-run": "allreduce",
    }
    assert inspect.controller_owner(wf) == ("WorkloadRun", "allreduce", run["metadata"]["uid"], True)

    (job,) = inspect.finish_workflow_jobs(kube, namespace, "allreduce", 1)
    assert job == "allreduce-job"
    trainjob = inspect.get(kube, resources.TrainJob, "allreduce-job-workload", namespace)
    patches = {
        j["name"]: j.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
        for p in trainjob["spec"]["runtimePatches"]
        if p["manager"] == "nvcre.nvidia.com/workloadrun"
        for j in p["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    }
    assert patches["node"]["imagePullSecrets"] == [{"name": "ngc-pull"}]
    assert patches["launcher"]["imagePullSecrets"] == [{"name": "ngc-pull"}], "the MPI launcher pulls too"

    run = inspect.wait_true(kube, resources.WorkloadRun, "allreduce", namespace, "Succeeded", timeout=90)
    assert inspect.true_condition(run) == (
        "Succeeded",
        "WorkflowSucceeded",
        "Workflow completed successfully",
    )
    assert condition_of(run, "InProgress")["reason"] == "Superseded"  # type: ignore[index]
    status = run["status"]
    wf = inspect.get(kube, resources.Workflow, "allreduce", namespace)
    assert status["succeededNodesRef"] == wf["status"]["succeededNodesRef"]
    assert status["detectedPlatform"] == "aws"
    assert status["detectedGPUArchitecture"] == "h100"
    payload = inspect.config_map_payload(
        kube, namespace, status["succeededNodesRef"]["name"], "succeeded-nodes.csv.gz"
    )
    assert payload.decode() == ",".join(nodes)
    events = inspect.wait_event(
        kube,
        namespace,
        "allreduce",
        "WorkloadRun",
        ("Normal", "WorkflowSucceeded", "Workflow completed successfully"),
    )
    assert ("Normal", "WorkflowCreated", "Workflow allreduce created") in events


def test_failure_is_mirrored_with_the_workflow_message(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, nodes = new_pool(gpu_nodes, 2)
    create_run(kube, workload_run("breaks", namespace, pool, 2))
    inspect.finish_workflow_jobs(kube, namespace, "breaks", 1, failing=frozenset({"breaks-job"}))
    run = inspect.wait_true(kube, resources.WorkloadRun, "breaks", namespace, "Failed", timeout=90)
    assert inspect.true_condition(run) == ("Failed", "WorkflowFailed", "1 groups failed across 1 iterations")
    ref = run["status"]["failedNodesRef"]
    entries = inspect.failed_nodes_record(kube, namespace, ref["name"])
    assert [e["name"] for e in entries] == nodes
    inspect.wait_event(
        kube,
        namespace,
        "breaks",
        "WorkloadRun",
        ("Warning", "WorkflowFailed", "1 groups failed across 1 iterations"),
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"orchestration": {"placement": "Unpinned", "testScale": "intra-node"}},
            'workloadrun bad: orchestration.placement: Unpinned is incompatible with orchestration.testScale "intra-node": '
            "intra-node runs one job per target node, Unpinned runs exactly one job; drop one of the two",
        ),
        (
            {
                "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "team-a"},
                "workloadMetadata": {"labels": {"kai.scheduler/queue": "team-b"}},
            },
            'workloadrun bad: spec.workloadMetadata.labels["kai.scheduler/queue"]: conflicting label value '
            '"team-b", expected "team-a"',
        ),
        (
            {
                "volumes": [{"name": "dshm", "emptyDir": {}}],
                "volumeMounts": [{"name": "dshm", "mountPath": "/scratch"}],
            },
            'workloadrun bad: spec.volumes[0].name: "dshm" is reserved for the built-in /dev/shm volume',
        ),
    ],
    ids=["unpinned-intra-node", "queue-conflict", "reserved-volume"],
)
def test_render_errors_are_build_failed(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, spec: dict[str, Any], message: str
) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    create_run(kube, workload_run("bad", namespace, pool, 1, **spec))
    run = inspect.wait_true(kube, resources.WorkloadRun, "bad", namespace, "Failed")
    found = inspect.true_condition(run)
    assert found is not None and found[:2] == ("Failed", "BuildFailed")
    assert found[2] == message
    assert "workflowRef" not in run["status"]
    assert not list(kube.list(resources.Workflow, namespace=namespace)), "no Workflow for a broken run"


def test_foreign_workflow_is_never_adopted(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    # targets no node, so the foreign Workflow fails on its own and starts no Job
    foreign = workflow("taken", namespace, "nobody", 1)
    kube.create(resources.Workflow.from_dict(foreign))
    create_run(kube, workload_run("taken", namespace, pool, 1))
    run = inspect.wait_true(kube, resources.WorkloadRun, "taken", namespace, "Failed")
    assert inspect.true_condition(run) == (
        "Failed",
        "WorkflowNameCollision",
        f'Workflow "taken" already exists in namespace "{namespace}" and is not controlled by '
        'WorkloadRun "taken"; refusing to adopt it',
    )
    assert "ownerReferences" not in inspect.get(kube, resources.Workflow, "taken", namespace)["metadata"]


def test_deleted_workflow_fails_the_run(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    create_run(kube, workload_run("gone", namespace, pool, 1))
    inspect.wait_true(kube, resources.WorkloadRun, "gone", namespace, "InProgress")
    inspect.trainjob_of(kube, namespace, "gone-job")
    kube.delete(resources.Workflow, "gone", namespace=namespace)
    run = inspect.wait_true(kube, resources.WorkloadRun, "gone", namespace, "Failed", timeout=90)
    assert inspect.true_condition(run) == ("Failed", "WorkflowDeleted", "Workflow was deleted")
    wait_for(
        lambda: not list(kube.list(resources.Workflow, namespace=namespace)) or None,
        10,
        what="no Workflow rebuilt for a terminal run",
    )


def test_no_matching_node_fails_through_the_workflow(kube: Client, namespace: str, manager: Any) -> None:
    """§13.8: the run builds anyway; its Workflow fails NodeDiscoveryError and the run mirrors it."""
    create_run(kube, workload_run("lonely", namespace, pool_name(), 2))
    run = inspect.wait_true(kube, resources.WorkloadRun, "lonely", namespace, "Failed")
    assert inspect.true_condition(run) == (
        "Failed",
        "WorkflowFailed",
        "No target nodes found matching orchestration target",
    )
    wf = inspect.get(kube, resources.Workflow, "lonely", namespace)
    assert inspect.true_condition(wf)[:2] == ("Failed", "NodeDiscoveryError")  # type: ignore[index]


def test_unpinned_runs_exactly_one_job_of_num_nodes(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 12)
    create_run(kube, workload_run("four", namespace, pool, 4, orchestration={"placement": "Unpinned"}))
    jobs = wait_for(lambda: inspect.jobs_of(kube, namespace, "four") or None, 60, what="the Job")
    assert list(jobs) == ["four-job"]
    trainjob = inspect.trainjob_of(kube, namespace, "four-job")
    assert trainjob["spec"]["trainer"]["numNodes"] == 4
    for name, pod in inspect.own_patch(trainjob).items():
        terms = (
            pod["spec"]
            .get("affinity", {})
            .get("nodeAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {})
            .get("nodeSelectorTerms", [])
        )
        keys = {e["key"] for t in terms for e in t.get("matchExpressions", [])}
        assert "kubernetes.io/hostname" not in keys, f"{name} is pinned: {terms}"
    wf = inspect.get(kube, resources.Workflow, "four", namespace)
    assert wf["status"]["orchestration"]["totalGroups"] == 1
    assert len(inspect.jobs_of(kube, namespace, "four")) == 1

    create_run(kube, workload_run("thirteen", namespace, pool, 13, orchestration={"placement": "Unpinned"}))
    run = inspect.wait_true(kube, resources.WorkloadRun, "thirteen", namespace, "Failed")
    assert inspect.true_condition(run) == (
        "Failed",
        "WorkflowFailed",
        "Not enough schedulable nodes: need 13, found 12",
    )
    assert not inspect.jobs_of(kube, namespace, "thirteen"), "never clamped to the 12 nodes there are"


def test_terminal_run_is_left_alone(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    create_run(kube, workload_run("done", namespace, pool, 1))
    inspect.finish_workflow_jobs(kube, namespace, "done", 1)

    # Ended, with its TrainJob released (ResourcesReleased, its last write).
    def released() -> dict[str, Any] | None:
        run = inspect.get(kube, resources.WorkloadRun, "done", namespace)
        return run if condition_true(run, "ResourcesReleased") else None

    run = wait_for(released, 60, what="the run's ResourcesReleased")
    assert inspect.true_condition(run) == (
        "Succeeded",
        "WorkflowSucceeded",
        "Workflow completed successfully",
    )
    version = run["metadata"]["resourceVersion"]
    # Deleting the Workflow of a finished run is not "Workflow was deleted": the run is done.
    kube.delete(resources.Workflow, "done", namespace=namespace)
    wait_for(
        lambda: not list(kube.list(resources.Workflow, namespace=namespace)) or None,
        60,
        what="the Workflow to go",
    )
    assert (
        inspect.get(kube, resources.WorkloadRun, "done", namespace)["metadata"]["resourceVersion"] == version
    )


def test_nic_resource_detection_event(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    """On-prem GB200 without an RDMA resource: nothing requested, and a Normal event says why."""
    pool, _ = new_pool(gpu_nodes, 2, platform="onprem", product="NVIDIA-GB200", gpus=4)
    create_run(kube, workload_run("nic", namespace, pool, 2))
    inspect.wait_true(kube, resources.WorkloadRun, "nic", namespace, "InProgress")
    events = wait_for(
        lambda: [
            e
            for e in inspect.events_for(kube, namespace, "nic", "WorkloadRun")
            if e[1] == "NICResourceDetection"
        ],
        10,
        what="a NICResourceDetection event",
    )
    assert events[0][0] == "Normal"
