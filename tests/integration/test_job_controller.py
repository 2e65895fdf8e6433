"""The Job controller on the real API server: what the TrainJob CRD refuses, the MPI launcher's
pods, node health. Pods are the ones JobSet would run for the TrainJob nvcre rendered (kept: the
launcher among an MPI group's pods, and pods in exact phases on exact nodes, are set up here; the
sandbox's MPI launcher retries for minutes before it fails)."""

from __future__ import annotations

from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

from nvcre import resources
from nvcre.testing.builders import new_pool
from nvcre.testing.inspect import get, jobs_of, trainjob_of, true_condition, wait_true
from nvcre.testing.kwok import EXIT_CODE_ANNOTATION, PHASE_ANNOTATION, REASON_ANNOTATION
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import create_trainjob_pods, finish_trainjob, workflow


def phase(kube: Client, namespace: str, pod: str) -> str | None:
    found = kube.get(Pod, pod, namespace=namespace)
    return found.status.phase if found.status else None


def end_pod(kube: Client, namespace: str, pod: str, phase_: str, **why: str) -> None:
    """Have kwok end the pod as a kubelet would (exit code and reason for a failure)."""
    annotations = {PHASE_ANNOTATION: phase_}
    if "exit_code" in why:
        annotations[EXIT_CODE_ANNOTATION] = why["exit_code"]
    if "reason" in why:
        annotations[REASON_ANNOTATION] = why["reason"]
    kube.patch(Pod, pod, {"metadata": {"annotations": annotations}}, namespace=namespace)
    wait_for(lambda: phase(kube, namespace, pod) == phase_, 30, what=f"pod {pod} {phase_}")


def test_a_workload_the_trainjob_crd_refuses_fails_the_job_with_the_servers_message(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Workflow names may start with a digit; TrainJob names may not (a CEL rule of its CRD).
    The create can never succeed: the Job fails with the API server's words, once."""
    pool, _ = new_pool(gpu_nodes, 1)
    kube.create(resources.Workflow.from_dict(workflow("9lives", namespace, pool, 1)))
    wait_for(lambda: jobs_of(kube, namespace, "9lives"), 30, what="the Workflow's Job")
    job = wait_true(kube, resources.Job, "9lives-job", namespace, "Failed")
    kind, reason, message = true_condition(job) or ("", "", "")
    assert (kind, reason) == ("Failed", "WorkloadCreationError")
    assert message.startswith("Failed to create TrainJob/9lives-job-workload: ")
    assert "metadata.name must match RFC 1035 DNS label format" in message, message
    workflow_ = wait_true(kube, resources.Workflow, "9lives", namespace, "Failed")
    assert true_condition(workflow_) is not None


def test_the_launcher_where_mpirun_fails_is_found_by_the_failure_log(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    pool, nodes = new_pool(gpu_nodes, 2)
    kube.create(resources.Workflow.from_dict(workflow("mpi", namespace, pool, 2, mpi=True)))
    trainjob_of(kube, namespace, "mpi-job")
    created = create_trainjob_pods(kube, namespace, "mpi-job-workload")
    jobs = sorted(p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in created)
    assert jobs == ["launcher", "node", "node"]
    launcher = next(p["metadata"]["name"] for p in created if "launcher" in p["metadata"]["name"])
    for pod in created:
        name = pod["metadata"]["name"]
        wait_for(lambda name=name: phase(kube, namespace, name) == "Running", 30, what=f"pod {name} running")
    failure = "mpirun noticed that process rank 3 with PID 0 on node mpi-1 exited on signal 9 (Killed)."
    kwok.write_pod_logs(
        kube, namespace, launcher, ["Warning: Permanently added 'mpi-1'", failure], container="launcher"
    )
    wait_for(
        lambda: failure in "".join(kube.log(launcher, namespace=namespace)),
        30,
        what="the launcher's log served",
        ignore=(Exception,),
    )
    end_pod(kube, namespace, launcher, "Failed", exit_code="137")
    finish_trainjob(kube, namespace, "mpi-job-workload", succeeded=False)
    job = wait_true(kube, resources.Job, "mpi-job", namespace, "Failed")
    log = job["status"]["failureLog"]
    assert (log["podName"], log["nodeName"], log["exitCode"]) == (launcher, nodes[0], 137)
    assert failure in log.get("tail", "")


def test_node_health_sees_missing_fields_as_defaults_and_only_nodes_of_live_pods(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    """``spec.unschedulable`` is absent on a node never cordoned; the spec's defaults make it
    false, so the expression fires. A node whose pod has ended is no longer the Job's."""
    pool, nodes = new_pool(gpu_nodes, 2)
    lost = "nvcre.test/gpu-lost"
    expression = f"node.spec.unschedulable == false && '{lost}' in node.metadata.labels"
    doc = workflow(
        "cel", namespace, pool, 2, job_spec={"nodeHealthMonitor": {"cel": {"expression": expression}}}
    )
    kube.create(resources.Workflow.from_dict(doc))
    trainjob_of(kube, namespace, "cel-job")
    pods = {
        p["spec"]["nodeName"]: p["metadata"]["name"]
        for p in create_trainjob_pods(kube, namespace, "cel-job-workload")
    }
    for pod in pods.values():
        wait_for(lambda pod=pod: phase(kube, namespace, pod) == "Running", 30, what=f"pod {pod} running")
    end_pod(kube, namespace, pods[nodes[1]], "Succeeded")
    kube.patch(Node, nodes[1], {"metadata": {"labels": {lost: "true"}}})
    kube.patch(Node, nodes[0], {"metadata": {"labels": {lost: "true"}}})
    job = wait_for(
        lambda: (
            (j := get(kube, resources.Job, "cel-job", namespace)).get("status", {}).get("failedNodes") and j
        ),
        30,
        what="failedNodes",
    )
    assert [e["name"] for e in job["status"]["failedNodes"]] == [nodes[0]], (
        "the node whose pod ended was labelled first, and is not the Job's any more"
    )
    hardware = next(c for c in job["status"]["conditions"] if c["type"] == "HardwareFailed")
    assert hardware["message"] == f"Hardware failure detected on node(s): [{nodes[0]}]"
