"""Bandwidth measured end to end on the sandbox: a WorkloadRun running NCCL all-reduce over healthy
simulated aws H100 nodes, each group's launcher log written by the simulated accelerator, read by
nvcre through the API, ends with final values on every BandwidthMeasurement.

The status must be exactly what ``nvcrectl analyze nccl`` reads from the same launcher log (one
parser, one aggregation), and the 16 GiB bus bandwidth must be what the sandbox's H100 model
gives (the expected table's 487 GB/s over EFA, within 10%), over the transport it says it used.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Pod

from nvcre import resources
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import Parser
from nvcre.measure.profile import compile_profile
from nvcre.sandbox import control
from nvcre.sandbox.state import StateDir
from nvcre.sandbox.supervisor import Options
from nvcre.testing.inspect import get, wait_true
from nvcre.testing.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workloadrun" / "basic.yaml"
NODES, GROUP = 4, 2
SIXTEEN_GIB = 17179869184
PROFILE = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth")


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    state = StateDir(tmp_path_factory.mktemp("sandbox") / "state")
    with control.running(
        state, Options(nodes=NODES, platform="aws", product="NVIDIA-H100-80GB-HBM3")
    ) as record:
        yield Client(KubeConfig.from_file(record.kubeconfig))


def measurements(kube: Client, namespace: str) -> list[dict[str, Any]]:
    return [dict(bm.to_dict()) for bm in kube.list(resources.BandwidthMeasurement, namespace=namespace)]


def complete(bm: dict[str, Any]) -> tuple[str, str] | None:
    for c in (bm.get("status") or {}).get("conditions") or ():
        if c["type"] == "Complete" and c["status"] == "True":
            return c["reason"], c["message"]
    return None


def test_every_group_completes_with_measured_bandwidth(kube: Client) -> None:
    namespace = "default"
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"]["namespace"] = namespace
    document["spec"]["numNodes"] = GROUP
    document["spec"]["bandwidthMeasurement"] = {
        "logProfileRef": "nccl-bandwidth",
        "testType": "all_reduce",
        "sampleInterval": "5s",
    }
    kube.create(resources.WorkloadRun.from_dict(document))
    name = document["metadata"]["name"]
    run = wait_true(kube, resources.WorkloadRun, name, namespace, "Succeeded", timeout=600)
    assert run["status"]["workflowRef"]["name"]

    def all_complete() -> list[dict[str, Any]] | None:
        found = measurements(kube, namespace)
        return found if found and all(complete(b) for b in found) else None

    bms = wait_for(all_complete, 120, what="every BandwidthMeasurement Complete")
    assert len(bms) == NODES // GROUP, "one measurement per group"
    parser = Parser(compile_profile(PROFILE))
    for bm in bms:
        status = bm["status"]
        reason, message = complete(bm) or ("", "")
        assert reason == "JobSucceeded", message
        job = get(kube, resources.Job, bm["spec"]["jobRef"]["name"], namespace)
        launcher = next(
            p
            for p in kube.list(
                Pod, namespace=namespace, labels={"nvcre.nvidia.com/job": job["metadata"]["name"]}
            )
            if p.metadata
            and (p.metadata.labels or {}).get("jobset.sigs.k8s.io/replicatedjob-name") == "launcher"
        )
        assert launcher.metadata is not None
        offline = parser.aggregate()
        for line in kube.log(
            str(launcher.metadata.name), namespace=namespace, container="node", timestamps=True
        ):
            offline.add(parser.parse_line(line))
        assert status["results"] == [r.to_status() for r in offline.results()], (
            "the controller read the whole log"
        )
        assert status["transport"] == offline.transport == ["AWS Libfabric"]
        assert status["wrongValues"] == 0
        assert {k: status[k] for k in offline.summary()} == offline.summary()
        assert (status["test"], status["complete"], status["failureLines"]["count"]) == (
            "all_reduce_perf_mpi",  # examples/workloadrun/basic.yaml runs it
            True,
            0,
        ), "the simulated launcher's log is read whole: its test, footer and every size"
        (sixteen,) = [r for r in status["results"] if r["sizeBytes"] == SIXTEEN_GIB]
        # the sandbox's 2-node H100 all_reduce over EFA: the expected table's 487 GB/s, 3% of noise
        assert 423.0 <= float(sixteen["busBW"]) <= 517.0, sixteen
        succeeded = next(c for c in job["status"]["conditions"] if c["type"] == "Succeeded")
        assert status["completionTime"] == succeeded["lastTransitionTime"]
