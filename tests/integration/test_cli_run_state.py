"""``workloadrun status|cancel`` and ``certification list|status`` on what the real controllers wrote.

The test plays Kubeflow Trainer: it ends the TrainJobs of a run's Jobs itself, as
tests/integration/test_workloadrun_controller.py does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from lightkube import ApiError, Client

from nvcre import resources
from nvcre.testing.builders import Certification, WorkloadRun, category, pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_workflow_jobs, get, true_condition, wait_true
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name

BIN = Path(sys.executable).parent
MPI = {"mpi": {"mpirunPath": "/usr/local/mpi/bin/mpirun", "binary": "/usr/local/bin/all_reduce_perf_mpi"}}
ALL_REDUCE = category("communication", "nccl-all-reduce")
LOOPBACK = category("communication", "nccl-loopback")
RUNNING_REASONS = ("WorkflowCreated", "WorkflowRunning")


def nvcrectl(control_plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "nvcrectl"), *args, "--kubeconfig", str(control_plane.kubeconfig_path)],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=120,
    )


def pool_nodes(gpu_nodes: Any, count: int) -> tuple[str, list[str]]:
    pool = pool_name()
    nodes = gpu_nodes(count, pool_spec(pool))
    return pool, sorted(str(n.metadata.name) for n in nodes)


def create_run(kube: Client, name: str, namespace: str, pool: str, num_nodes: int) -> None:
    run = WorkloadRun(name).namespace(namespace).framework(MPI).nodes(num_nodes).pool(pool).obj()
    kube.create(resources.WorkloadRun.from_dict(run))


def test_workloadrun_status_follows_the_controller(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, nodes = pool_nodes(gpu_nodes, 2)
    create_run(kube, "breaks", namespace, pool, 2)
    wait_true(kube, resources.WorkloadRun, "breaks", namespace, "InProgress")
    running = nvcrectl(control_plane, "workloadrun", "status", "breaks", "-n", namespace)
    assert (running.returncode, running.stdout) == (0, "InProgress\n")

    finish_workflow_jobs(kube, namespace, "breaks", 1, failing=frozenset({"breaks-job"}))
    wait_true(kube, resources.WorkloadRun, "breaks", namespace, "Failed", timeout=90)
    failed = nvcrectl(control_plane, "workloadrun", "status", "breaks", "-n", namespace)
    assert (failed.returncode, failed.stdout) == (0, "Failed\n")  # every status exits 0
    as_json = nvcrectl(control_plane, "workloadrun", "status", "breaks", "-n", namespace, "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {
        "name": "breaks",
        "namespace": namespace,
        "status": "Failed",
        "failedNodes": nodes,
    }


def test_workloadrun_cancel_deletes_the_run_and_its_workflow(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = pool_nodes(gpu_nodes, 1)
    create_run(kube, "stop-me", namespace, pool, 1)
    run = wait_true(kube, resources.WorkloadRun, "stop-me", namespace, "InProgress")
    workflow = get(kube, resources.Workflow, run["status"]["workflowRef"]["name"], namespace)
    assert workflow["metadata"]["ownerReferences"][0]["name"] == "stop-me"

    done = nvcrectl(control_plane, "workloadrun", "cancel", "stop-me", "missing", "-n", namespace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Cancelled stop-me\n"
    assert done.stderr == f'WorkloadRun "missing" not found in namespace "{namespace}"\n'

    def gone() -> bool:
        try:
            kube.get(resources.WorkloadRun, "stop-me", namespace=namespace)
        except ApiError as error:
            return error.status.code == 404
        return False

    wait_for(gone, 60, what="the WorkloadRun to be deleted")
    again = nvcrectl(control_plane, "workloadrun", "status", "stop-me", "-n", namespace)
    assert again.returncode == 1
    assert again.stderr == f'Error: workloadrun "stop-me" not found in namespace "{namespace}"\n'


def test_certification_list_and_status(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = pool_nodes(gpu_nodes, 2)
    # TrainJobs ended by hand: no launcher log here
    cert = (
        Certification("c1")
        .namespace(namespace)
        .pool(pool)
        .allow_missing_data()
        .categories(ALL_REDUCE, LOOPBACK)
        .obj()
    )
    kube.create(resources.Certification.from_dict(cert))

    def first_running() -> dict[str, Any] | None:
        found = get(kube, resources.Certification, "c1", namespace)
        statuses = (found.get("status") or {}).get("categoryStatuses") or []
        condition = true_condition(found)
        return (
            found
            if statuses and statuses[0].get("workflowRef") and condition and condition[0] == "InProgress"
            else None
        )

    live = wait_for(first_running, 60, what="category 1 of c1 to start")
    workflow = live["status"]["categoryStatuses"][0]["workflowRef"]["name"]

    listed = nvcrectl(control_plane, "certification", "list", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "CATEGORIES", "STATUS", "REASON", "AGE"]
    assert row.split()[:3] == ["c1", "0/2", "InProgress"]
    assert row.split()[3] in RUNNING_REASONS
    everywhere = nvcrectl(control_plane, "certification", "list", "-A")
    assert everywhere.stdout.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert any(line.split()[:2] == [namespace, "c1"] for line in everywhere.stdout.splitlines())
    as_yaml = yaml.safe_load_all(  # one document per Certification, as the renders print several
        nvcrectl(control_plane, "certification", "list", "-n", namespace, "-o", "yaml").stdout
    )
    assert [(c["name"], c["status"]) for c in as_yaml] == [("c1", "InProgress")]

    status = nvcrectl(control_plane, "certification", "status", "c1", "-n", namespace, "-o", "json")
    assert status.returncode == 0, status.stderr
    summary = json.loads(status.stdout)
    assert summary["status"] == "InProgress"
    assert summary["reason"] in RUNNING_REASONS  # the controller moves on from WorkflowCreated meanwhile
    assert summary["categories"] == [
        {
            "domain": "communication",
            "variant": "nccl-all-reduce",
            "status": "InProgress",
            "workflow": workflow,
        },
        {"domain": "communication", "variant": "nccl-loopback", "status": "Pending"},
    ]
    text = nvcrectl(control_plane, "certification", "status", "c1", "-n", namespace)
    assert text.stdout.splitlines()[:3] == [
        "Name:        c1",
        f"Namespace:   {namespace}",
        "Status:      InProgress",
    ]
    assert f"communication/nccl-all-reduce   InProgress   {workflow}" in text.stdout

    missing = nvcrectl(control_plane, "certification", "status", "c1")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == 'Error: certification "c1" not found in namespace "default"\n'
    empty = nvcrectl(control_plane, "certification", "list", "-n", "no-such-namespace")
    assert (empty.returncode, empty.stdout) == (0, "")
    assert empty.stderr == "No certifications found in namespace no-such-namespace.\n"
