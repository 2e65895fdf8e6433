"""Goodput and stall detection on the simulated cluster, as a user's Certification runs them.

One sandbox: 4 simulated aws H100 nodes, ``hang`` on gpu-node-003 90 s into its run. The
catalog's nemotron5-8b category (checkpoints every 2 iterations, a two-minute run: its first
iteration ends about 50 s in, each later one takes about 15 s on two nodes) makes two groups of
two nodes. The healthy group's GoodputMeasurement, read from the simulated Megatron
logs through the pod log API, completes JobSucceeded with a goodput in (0, 1]. The other group
stops logging steps; the Job controller, reading that measurement's status, sees the stall and
restarts the workload from its checkpoint, which the measurement counts as an interruption.
"""

from __future__ import annotations

import copy
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import HostPathVolumeSource, PersistentVolumeSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, PersistentVolume

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation
from nvcre.measure.builtin import builtin_profiles
from nvcre.testing import binaries as bins
from nvcre.testing.waiting import wait_for

HUNG = "gpu-node-003"
#: Events read as plain objects (some events of the chain have no eventTime, which the typed model refuses).
Events = create_namespaced_resource("events.k8s.io", "v1", "Event", "events")


def sandbox(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "nvcre.sandbox", *args], capture_output=True, text=True, timeout=400
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"sandbox {' '.join(args)} exited {result.returncode}:\n{result.stderr}{result.stdout}"
        )
    return result


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    state_dir = tmp_path_factory.mktemp("sandbox") / "state"
    try:
        # at the hardware's pace: the stall clock and the 10 s samples as this test was timed
        result = sandbox(
            "up", "--nodes=4", "--speed=1", f"--fault={HUNG}=hang@90s", f"--state-dir={state_dir}"
        )
        (kubeconfig,) = re.findall(r"^kubeconfig: (\S+)$", result.stdout, re.M)
        yield Client(KubeConfig.from_file(kubeconfig))
    finally:
        sandbox("down", f"--state-dir={state_dir}", check=False)


def certify(kube: Client, namespace: str, tmp: Path) -> None:
    """The built-in profile, a volume for the checkpoint claim, and the Certification."""
    profile = next(p for p in builtin_profiles() if p["metadata"]["name"] == "megatron-training")
    try:
        kube.create(resources.LogProfile.from_dict(copy.deepcopy(profile)))
    except ApiError as error:
        if error.status.code != 409:
            raise
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    for group in range(2):  # each group's Job-scoped copy of the checkpoint claim binds one
        volume = PersistentVolumeSpec(
            capacity={"storage": "10Ti"},
            accessModes=["ReadWriteMany"],
            hostPath=HostPathVolumeSource(path=str(tmp / str(group))),
        )
        kube.create(PersistentVolume(metadata=ObjectMeta(name=f"{namespace}-{group}"), spec=volume))
    options = {"nodesPerJob": 2, "enableCheckpoint": True, "saveInterval": 2, "exitDurationMins": 2}
    certification = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": "gp", "namespace": namespace},
        "spec": {
            "target": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "categories": [{"domain": "training", "variant": "nemotron5-8b", "options": options}],
        },
    }
    kube.create(resources.Certification.from_dict(certification))


def jobs_by_health(kube: Client, namespace: str) -> dict[str, dict[str, Any]]:
    def both() -> dict[str, dict[str, Any]] | None:
        jobs = [j.to_dict() for j in kube.list(resources.Job, namespace=namespace)]
        if len(jobs) != 2:
            return None
        return {
            "hung"
            if HUNG in (j["metadata"].get("annotations") or {}).get(Annotation.GROUP_NODES, "")
            else "healthy": j
            for j in jobs
        }

    return wait_for(both, 180, what="the two groups' Jobs")


def goodput(kube: Client, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    name = f"{job['metadata']['name']}-goodput"
    return dict(kube.get(resources.GoodputMeasurement, name, namespace=namespace).to_dict())


def test_a_healthy_run_measures_goodput_and_a_hang_restarts_from_its_checkpoint(
    kube: Client, tmp_path: Path
) -> None:
    namespace = f"goodput-{secrets.token_hex(3)}"
    certify(kube, namespace, tmp_path)
    jobs = jobs_by_health(kube, namespace)

    def complete(job: dict[str, Any]) -> dict[str, Any] | None:
        gm = goodput(kube, namespace, job)
        conds = {c["type"]: c for c in (gm.get("status") or {}).get("conditions") or ()}
        return gm if conds.get("Complete", {}).get("status") == "True" else None

    healthy = wait_for(
        lambda: complete(jobs["healthy"]), 400, what="the healthy group's goodput", ignore=(ApiError,)
    )
    status = healthy["status"]
    done = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert (done["reason"], done["message"]) == ("JobSucceeded", "Referenced Job completed successfully")
    assert 0 < float(status["result"]) <= 1
    assert float(status["avgStepTimeSec"]) > 0 and float(status["avgTFLOPSPerGPU"]) > 0
    assert status["lastCheckpointStep"] >= 2 and float(status["checkpointSaveTimeSec"]) > 0

    hung = jobs["hung"]["metadata"]["name"]

    def restarted() -> Any:
        for event in kube.list(Events, namespace=namespace):
            found = event.to_dict()
            if (
                found.get("reason") == "WorkloadRestarting"
                and (found.get("regarding") or {}).get("name") == hung
            ):
                return found
        return None

    event = wait_for(restarted, 400, what=f"Job {hung} restarted from its checkpoint")
    assert event["note"] == "Restarting workload from checkpoint (restart 1/3)"
    job = dict(kube.get(resources.Job, hung, namespace=namespace).to_dict())
    assert job["status"]["restartCount"] >= 1

    def interrupted() -> dict[str, Any] | None:
        gm = goodput(kube, namespace, jobs["hung"])
        return gm if (gm.get("status") or {}).get("interruptionCount", 0) >= 1 else None

    gm = wait_for(interrupted, 120, what="the restart counted as an interruption")["status"]
    assert gm["lastCheckpointStep"] == 2  # saved at iteration 2; the save at 4 never finished
    assert float(gm["lostWorkTimeSec"]) > 0
