"""The MPI launcher Job's retries, in the WorkloadRun render and the catalog render alike.

A failed ``mpirun`` (the launcher's container ``node`` exiting non-zero) fails the group at once.
Under a gang scheduler the launcher's init container waits up to 20 minutes for the workers'
sshd; a worker slow to start (an image pull) gets the Job default's 6 more windows instead of
failing the group after the first one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nvcre.api.v1alpha1.certification import Certification
from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.catalog import render_category
from nvcre.platform import synthetic_nodes
from nvcre.render.workloadrun import build_workflow

GANG = {"schedulerName": "kai-scheduler", "queue": "team-a"}
FAIL_ON_MPIRUN = {
    "rules": [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "node", "operator": "NotIn", "values": [0]},
        }
    ]
}


def _launcher(workflow: dict[str, Any]) -> dict[str, Any]:
    def jobs() -> Iterator[dict[str, Any]]:
        for dependency in workflow["spec"].get("dependencies", []):
            if dependency["kind"] == "TrainingRuntime":
                yield from dependency["spec"]["template"]["spec"]["replicatedJobs"]

    (launcher,) = (job for job in jobs() if job["name"] == "launcher")
    spec: dict[str, Any] = launcher["template"]["spec"]
    return spec


def _workloadrun(gang: dict[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "image": "nvcr.io/nvidia/pytorch:26.01-py3",
        "framework": {
            "mpi": {"mpirunPath": "/usr/local/mpi/bin/mpirun", "binary": "/bin/all_reduce_perf_mpi"}
        },
        "numNodes": 2,
    }
    if gang:
        spec["gangScheduler"] = gang
    run = WorkloadRun.model_validate({"metadata": {"name": "nccl", "namespace": "ns"}, "spec": spec})
    return build_workflow(run, None, resolve=True, platform="onprem", gpu_arch="h100").workflow


def _category(gang: dict[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "categories": [{"domain": "communication", "variant": "nccl-all-reduce"}],
    }
    if gang:
        spec["gangScheduler"] = gang
    cert = Certification.model_validate({"metadata": {"name": "c1", "namespace": "team"}, "spec": spec})
    return render_category(cert, 0, synthetic_nodes("onprem", "h100"), offline=True).workflow


RENDERS = [pytest.param(_workloadrun, id="workloadrun"), pytest.param(_category, id="catalog")]


@pytest.mark.parametrize("render", RENDERS)
def test_under_a_gang_scheduler_a_slow_worker_gets_six_more_waits_and_a_failed_mpirun_none(
    render: Any,
) -> None:
    launcher = _launcher(render(GANG))
    assert launcher["backoffLimit"] == 6
    assert launcher["podFailurePolicy"] == FAIL_ON_MPIRUN
    pod = launcher["template"]["spec"]
    # A podFailurePolicy needs restartPolicy Never; the rule names the container mpirun runs in.
    assert pod["restartPolicy"] == "Never"
    assert [c["name"] for c in pod["containers"]] == ["node"]
    waits = [c for c in pod["initContainers"] if "not every worker answered sshd within 20 minutes" in str(c)]
    assert len(waits) == 1


@pytest.mark.parametrize("render", RENDERS)
def test_without_a_gang_scheduler_the_launcher_starts_after_the_workers_and_runs_once(render: Any) -> None:
    launcher = _launcher(render(None))
    assert launcher["backoffLimit"] == 0
    assert "podFailurePolicy" not in launcher
    assert launcher["template"]["spec"]["restartPolicy"] == "Never"
