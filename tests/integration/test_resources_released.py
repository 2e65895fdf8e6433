"""ResourcesReleased on the real API server: an ended run deletes its TrainJobs and Job-scoped
runtime copies and says Released only once the last of its pods, JobSets, TrainJobs and copies
is gone; a pod held by a finalizer makes it time out, loudly.

The control plane runs no Trainer, JobSet or garbage collector: the test creates the JobSet and
pods a TrainJob gets (:func:`~nvcre.testing.workloads.create_trainjob_pods`) and deletes them as
the garbage collector would, one by one, watching the condition in between.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod

from nvcre import resources
from nvcre.conditions import condition_of
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import WorkloadRun, category, new_pool
from nvcre.testing.certifications import start_category
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import events_for, finish_workflow_jobs, get, trainjob_of, wait_true
from nvcre.testing.manager import ManagerProcess, running_manager
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import create_trainjob_pods

NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
RELEASED = (
    "True",
    "Released",
    "No pod, JobSet, TrainJob or Job-scoped TrainingRuntime copy of the run remains",
)


@pytest.fixture
def default_manager(control_plane: ControlPlane, kwok: Any, tmp_path: Path) -> Iterator[ManagerProcess]:
    yield from running_manager(control_plane, tmp_path)


@pytest.fixture
def impatient_manager(control_plane: ControlPlane, kwok: Any, tmp_path: Path) -> Iterator[ManagerProcess]:
    yield from running_manager(control_plane, tmp_path, "--release-timeout=3")


def run_with_cleanup(
    control_plane: ControlPlane, workdir: Path, document: dict[str, Any]
) -> subprocess.Popen[str]:
    """``nvcrectl workloadrun run --wait --cleanup`` of ``document``, started (not waited for)."""
    (workdir / "run.yaml").write_text(yaml.safe_dump(document))
    return subprocess.Popen(
        [NVCRECTL, "workloadrun", "run", "--kubeconfig", str(control_plane.kubeconfig_path),
         "--wait", "--cleanup", "run.yaml"],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def two_node_run(gpu_nodes: Any, namespace: str, name: str) -> dict[str, Any]:
    """A torch WorkloadRun ``name`` on a new pool of two nodes."""
    pool, _ = new_pool(gpu_nodes, 2)
    return WorkloadRun(name).namespace(namespace).torch().nodes(2).pool(pool).obj()


def trainjob_pods(
    kube: Client, namespace: str, run: str, *, bind: bool = True
) -> tuple[dict[str, Any], list[str]]:
    """The TrainJob of the run ``run``'s Job, once made, and the names of the pods created for it
    as its JobSet would (``bind``: on their nodes)."""
    trainjob = trainjob_of(kube, namespace, f"{run}-job")
    pods = create_trainjob_pods(kube, namespace, trainjob["metadata"]["name"], bind=bind)
    return trainjob, sorted(p["metadata"]["name"] for p in pods)


@contextlib.contextmanager
def cleanup_run(
    control_plane: ControlPlane,
    kube: Client,
    namespace: str,
    gpu_nodes: Any,
    workdir: Path,
    name: str,
    *,
    bind: bool = True,
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """:func:`run_with_cleanup` of the two-node run ``name``, with the pods of its TrainJob created
    (``bind``: on their nodes): the command and the pods' names. The command is killed when the
    block ends (the block has waited for it by then, unless it failed)."""
    command = run_with_cleanup(control_plane, workdir, two_node_run(gpu_nodes, namespace, name))
    try:
        yield command, trainjob_pods(kube, namespace, name, bind=bind)[1]
    finally:
        command.kill()


def released(kube: Client, resource: Any, name: str, namespace: str) -> tuple[str, str, str] | None:
    c = condition_of(get(kube, resource, name, namespace), "ResourcesReleased")
    return None if c is None else (c["status"], c["reason"], c["message"])


def wait_released(
    kube: Client, resource: Any, name: str, namespace: str, want: tuple[str, str, str], timeout: float = 60
) -> None:
    wait_for(lambda: released(kube, resource, name, namespace) == want, timeout, what=f"{name}: {want}")


def gone(kube: Client, resource: Any, name: str, namespace: str) -> bool:
    try:
        kube.get(resource, name, namespace=namespace)
    except ApiError as error:
        return error.status.code == 404
    return False


def delete_pod(kube: Client, name: str, namespace: str) -> None:
    kube.delete(Pod, name, namespace=namespace, grace_period=0)


def collect_garbage(kube: Client, namespace: str, jobset: str, pods: list[str]) -> None:
    """Delete what the garbage collector would once the TrainJob is gone: its JobSet and pods."""
    kube.delete(resources.JobSet, jobset, namespace=namespace)
    for pod in pods:
        delete_pod(kube, pod, namespace)


def test_released_only_after_the_last_pod_is_gone(
    kube: Client, namespace: str, gpu_nodes: Any, default_manager: ManagerProcess
) -> None:
    kube.create(resources.WorkloadRun.from_dict(two_node_run(gpu_nodes, namespace, "rel")))
    trainjob, pods = trainjob_pods(kube, namespace, "rel")
    copy = trainjob["spec"]["runtimeRef"]["name"]
    assert pods == ["rel-job-workload-node-0-0", "rel-job-workload-node-0-1"]
    finish_workflow_jobs(kube, namespace, "rel", 1)
    wait_true(kube, resources.WorkloadRun, "rel", namespace, "Succeeded", timeout=90)

    # The run ended: its TrainJob and runtime copy are deleted by nvcre; the JobSet and pods
    # (the garbage collector's to delete) remain, and the condition names them.
    waiting = (
        "False",
        "Releasing",
        "3 of the run's objects remain: 2 Pods (rel-job-workload-node-0-0, rel-job-workload-node-0-1), "
        "1 JobSet (rel-job-workload)",
    )
    wait_released(kube, resources.WorkloadRun, "rel", namespace, waiting)
    assert released(kube, resources.Workflow, "rel", namespace) == waiting
    assert gone(kube, resources.TrainJob, "rel-job-workload", namespace)
    assert gone(kube, resources.TrainingRuntime, copy, namespace)
    assert get(kube, resources.Job, "rel-job", namespace), "the Job stays for the report"

    kube.delete(resources.JobSet, "rel-job-workload", namespace=namespace)
    delete_pod(kube, pods[0], namespace)
    last = ("False", "Releasing", "1 of the run's objects remain: 1 Pod (rel-job-workload-node-0-1)")
    wait_released(kube, resources.WorkloadRun, "rel", namespace, last)

    delete_pod(kube, pods[1], namespace)
    wait_released(kube, resources.WorkloadRun, "rel", namespace, RELEASED)
    assert released(kube, resources.Workflow, "rel", namespace) == RELEASED


def test_a_pod_held_by_a_finalizer_times_out_loudly(
    kube: Client, namespace: str, gpu_nodes: Any, impatient_manager: ManagerProcess
) -> None:
    kube.create(resources.WorkloadRun.from_dict(two_node_run(gpu_nodes, namespace, "held")))
    workflow = "held"
    # Not bound to a node: kwok, which stands in for the kubelet, would drop the finalizer.
    trainjob, pods = trainjob_pods(kube, namespace, "held", bind=False)
    held = pods[-1]
    kube.patch(Pod, held, {"metadata": {"finalizers": ["example.com/hold"]}}, namespace=namespace)
    finish_workflow_jobs(kube, namespace, workflow, 1)
    wait_true(kube, resources.WorkloadRun, "held", namespace, "Succeeded", timeout=90)

    collect_garbage(kube, namespace, trainjob["metadata"]["name"], pods)
    stuck = (
        f"Pod {namespace}/{held} still exists 3s after the run ended; it has finalizer example.com/hold; "
        f"1 of the run's objects remain: 1 Pod ({held})"
    )
    wait_released(kube, resources.WorkloadRun, "held", namespace, ("False", "ReleaseTimedOut", stuck))
    assert released(kube, resources.Workflow, workflow, namespace) == ("False", "ReleaseTimedOut", stuck)
    announced = (
        f"Pod {namespace}/{held} still exists 3s after the run ended; it has finalizer example.com/hold"
    )
    for name, kind in (("held", "WorkloadRun"), (workflow, "Workflow")):
        warnings = wait_for(
            lambda name=name, kind=kind: [
                e for e in events_for(kube, namespace, name, kind) if e[:2] == ("Warning", "ReleaseTimedOut")
            ],
            10,
            what=f"the ReleaseTimedOut event of {kind} {name}",
        )
        assert len(warnings) == 1 and warnings[0][2].startswith(announced), warnings

    # Once the finalizer is lifted the pod goes, and with it the last of the run.
    kube.patch(Pod, held, {"metadata": {"finalizers": None}}, namespace=namespace)
    wait_released(kube, resources.WorkloadRun, "held", namespace, RELEASED)


def test_run_cleanup_waits_for_the_release_and_the_report_says_it(
    control_plane: ControlPlane,
    kube: Client,
    namespace: str,
    gpu_nodes: Any,
    default_manager: ManagerProcess,
    tmp_path: Path,
) -> None:
    with cleanup_run(control_plane, kube, namespace, gpu_nodes, tmp_path, "cli") as (command, pods):
        finish_workflow_jobs(kube, namespace, "cli", 1)
        waiting = (
            "False",
            "Releasing",
            f"3 of the run's objects remain: 2 Pods ({', '.join(pods)}), 1 JobSet (cli-job-workload)",
        )
        wait_released(kube, resources.WorkloadRun, "cli", namespace, waiting)
        collect_garbage(kube, namespace, "cli-job-workload", pods)
        # Then the command deletes the run; the garbage collector would delete its Workflow.
        wait_for(lambda: gone(kube, resources.WorkloadRun, "cli", namespace), 60, what="the run deleted")
        kube.delete(resources.Workflow, "cli", namespace=namespace)
        _, err = command.communicate(timeout=120)
    assert command.returncode == 0, err
    lines = err.splitlines()
    waited = lines.index(
        "[cleanup] Waiting for the run's pods, JobSets, TrainJobs and runtime copies to go..."
    )
    assert lines[waited + 1] == "[cleanup] Resources released."
    assert "│  Released:     yes" in err[err.index("Summary") :]
    assert lines[-1] == "[cleanup] Done."


def test_a_certification_says_what_its_workflows_say(
    kube: Client, namespace: str, gpu_nodes: Any, default_manager: ManagerProcess
) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    all_reduce = category("communication", "nccl-all-reduce")
    job = start_category(kube, namespace, "cert", pool, all_reduce)
    workflow = certification_workflow_name("cert", "communication", "nccl-all-reduce")
    trainjob = trainjob_of(kube, namespace, job)["metadata"]["name"]
    pods = sorted(p["metadata"]["name"] for p in create_trainjob_pods(kube, namespace, trainjob))
    assert len(pods) == 3, "the MPI launcher and two workers"
    finish_workflow_jobs(kube, namespace, workflow, 1)
    wait_true(kube, resources.Certification, "cert", namespace, "Succeeded", timeout=90)

    waiting = (
        "False",
        "Releasing",
        f"4 of the run's objects remain: 3 Pods ({', '.join(pods)}), 1 JobSet ({trainjob})",
    )
    wait_released(kube, resources.Certification, "cert", namespace, waiting)
    assert released(kube, resources.Workflow, workflow, namespace) == waiting
    collect_garbage(kube, namespace, trainjob, pods)
    wait_released(kube, resources.Certification, "cert", namespace, RELEASED)


def test_run_cleanup_fails_a_passed_run_whose_release_timed_out(
    control_plane: ControlPlane,
    kube: Client,
    namespace: str,
    gpu_nodes: Any,
    impatient_manager: ManagerProcess,
    tmp_path: Path,
) -> None:
    stuck_run = cleanup_run(control_plane, kube, namespace, gpu_nodes, tmp_path, "stuck", bind=False)
    with stuck_run as (command, pods):
        held = pods[-1]
        kube.patch(Pod, held, {"metadata": {"finalizers": ["example.com/hold"]}}, namespace=namespace)
        finish_workflow_jobs(kube, namespace, "stuck", 1)
        # The command reports, then deletes the run; the test lets the pod go and plays the
        # garbage collector for the Workflow, so that the command's cleanup ends.
        wait_for(lambda: gone(kube, resources.WorkloadRun, "stuck", namespace), 120, what="the run deleted")
        kube.patch(Pod, held, {"metadata": {"finalizers": None}}, namespace=namespace)
        collect_garbage(kube, namespace, "stuck-job-workload", pods)
        kube.delete(resources.Workflow, "stuck", namespace=namespace)
        _, err = command.communicate(timeout=120)
    assert command.returncode == 1, err
    stuck = f"Pod {namespace}/{held} still exists 3s after the run ended; it has finalizer example.com/hold"
    summary = err[err.index("Summary") :]
    assert "│  Released:     no (ReleaseTimedOut)" in summary and "Result:       PASSED" in summary
    assert err.splitlines()[-1].startswith(f"Error: WorkloadRun stuck: resources not released: {stuck}"), err


def test_run_cleanup_of_a_run_refused_before_its_workflow_ends_at_once(
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: Any,
    default_manager: ManagerProcess,
    tmp_path: Path,
) -> None:
    """A run that made no Workflow holds nothing: it says Released, and ``--cleanup`` need not
    wait out its release timeout for a Workflow that will never say it."""
    document = two_node_run(gpu_nodes, namespace, "refused")
    document["spec"]["maxNodes"] = 1
    command = run_with_cleanup(control_plane, tmp_path, document)
    try:
        _, err = command.communicate(timeout=120)
    finally:
        command.kill()
    assert command.returncode == 1, err
    lines = err.splitlines()
    waited = lines.index(
        "[cleanup] Waiting for the run's pods, JobSets, TrainJobs and runtime copies to go..."
    )
    assert lines[waited + 1] == "[cleanup] Resources released.", err
    assert "TooManyNodes" in err and "│  Released:     yes" in err[err.index("Summary") :]


def test_a_run_whose_workflow_was_deleted_cannot_say_its_pods_are_gone(
    kube: Client, namespace: str, gpu_nodes: Any, default_manager: ManagerProcess
) -> None:
    kube.create(resources.WorkloadRun.from_dict(two_node_run(gpu_nodes, namespace, "orphaned")))
    trainjob_of(kube, namespace, "orphaned-job")  # the run is under way
    kube.delete(resources.Workflow, "orphaned", namespace=namespace)
    failed = wait_true(kube, resources.WorkloadRun, "orphaned", namespace, "Failed", timeout=60)
    assert condition_of(failed, "Failed")["reason"] == "WorkflowDeleted"  # type: ignore[index]
    wait_released(
        kube,
        resources.WorkloadRun,
        "orphaned",
        namespace,
        (
            "Unknown",
            "WorkflowDeleted",
            "Workflow orphaned was deleted before it proved the run's pods gone (a Workflow goes once "
            "its Jobs have; a Job once its pods stopped or 5m0s passed); pods of the run, labelled "
            "nvcre.nvidia.com/job, may remain",
        ),
    )
