"""The Workflow and Job controllers on the real API server, with kwok GPU nodes.

The test plays Kubeflow Trainer: it ends TrainJobs by setting their Complete/Failed condition
(kept: partition, pinning and naming are proven without a chain; failures with real pods are
tests/sandbox/test_behaviours.py).
"""

from __future__ import annotations

from typing import Any

from lightkube import Client

from nvcre import resources
from nvcre.api.v1alpha1.constants import Default
from nvcre.testing.builders import new_pool
from nvcre.testing.inspect import (
    config_map_payload,
    events_for,
    finish_job,
    get,
    jobs_of,
    own_patch,
    trainjob_of,
    true_condition,
    wait_true,
)
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import workflow


def hostnames(pod_template: dict[str, Any]) -> list[str]:
    terms = pod_template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return next(e["values"] for e in terms[0]["matchExpressions"] if e["key"] == "kubernetes.io/hostname")


def test_partition_pin_and_succeed(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    """12 nodes, numNodes 2: six groups in name order, six pinned Jobs, success recorded per node."""
    pool, nodes = new_pool(gpu_nodes, 12)
    kube.create(resources.Workflow.from_dict(workflow("nccl", namespace, pool, 2)))

    wf = wait_true(kube, resources.Workflow, "nccl", namespace, "InProgress")
    orchestration = wait_for(
        lambda: (
            get(kube, resources.Workflow, "nccl", namespace)["status"].get("orchestration", {}).get("groups")
            and get(kube, resources.Workflow, "nccl", namespace)["status"]["orchestration"]
        ),
        30,
        what="groups in status",
    )
    assert (orchestration["totalNodes"], orchestration["nodesPerJob"], orchestration["totalGroups"]) == (
        12,
        2,
        6,
    )
    assert [g["name"] for g in orchestration["groups"]] == [f"group-{i}" for i in range(6)]
    assert [g["nodes"] for g in orchestration["groups"]] == [nodes[i : i + 2] for i in range(0, 12, 2)]
    assert orchestration["detectedPlatform"] == "aws"
    assert orchestration["detectedGPUArchitecture"] == "h100"

    jobs = wait_for(
        lambda: len(jobs_of(kube, namespace, "nccl")) == 6 and jobs_of(kube, namespace, "nccl"),
        60,
        what="6 Jobs",
    )
    assert sorted(jobs) == [f"nccl-group-{i}-iter-1" for i in range(6)]
    job = jobs["nccl-group-1-iter-1"]
    assert job["metadata"]["labels"]["nvcre.nvidia.com/group"] == "group-1"
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "nvcre"
    assert job["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"] == ",".join(nodes[2:4])
    assert job["spec"]["nodeHealthMonitor"] == {"cel": {"expression": Default.NODE_HEALTH_EXPRESSION}}

    trainjob = trainjob_of(kube, namespace, "nccl-group-1-iter-1")
    assert trainjob["metadata"]["labels"]["nvcre.nvidia.com/job"] == "nccl-group-1-iter-1"
    assert trainjob["spec"]["trainer"]["numNodes"] == 2
    pods = own_patch(trainjob)
    assert hostnames(pods["node"]) == nodes[2:4]
    assert pods["node"]["metadata"]["labels"] == {"nvcre.nvidia.com/job": "nccl-group-1-iter-1"}
    assert "tolerations" not in pods["node"]["spec"], "torch-style runtimes get no blanket toleration"
    runtime = trainjob["spec"]["runtimeRef"]["name"]
    assert runtime.startswith("nccl-rt-") and runtime.endswith("-group-1-iter-1"), (
        "each Job runs its own runtime copy"
    )

    for name in jobs:
        finish_job(kube, namespace, name, succeeded=True)
    wf = wait_true(kube, resources.Workflow, "nccl", namespace, "Succeeded", timeout=90)
    assert true_condition(wf) == ("Succeeded", "JobCompleted", "All 1 iterations completed successfully")
    for name in jobs:
        assert true_condition(get(kube, resources.Job, name, namespace))[:2] == (
            "Succeeded",
            "WorkloadCompleted",
        )
    ref = wf["status"]["succeededNodesRef"]
    assert ref["name"] == f"succeeded-nodes-{wf['metadata']['uid'][:8]}"
    assert config_map_payload(kube, namespace, ref["name"], "succeeded-nodes.csv.gz").decode() == ",".join(
        nodes
    )
    # the transition event is written right after the status the test has just seen
    reasons = wait_for(
        lambda: "JobCompleted" in (found := [r for _, r, _ in events_for(kube, namespace, "nccl")]) and found,
        10,
        what="the JobCompleted event",
    )
    assert reasons.count("GroupsPartitioned") == 1 and reasons.count("JobCompleted") == 1
