"""Bandwidth measured end to end on the sandbox: a WorkloadRun running NCCL all-reduce over healthy
simulated aws H100 nodes, each group's launcher log written by the simulated accelerator, read by
nvcre through the API, ends with final values on every BandwidthMeasurement.

The status must be exactly what ``nvcrectl analyze nccl`` reads from the same launcher log (one
parser, one aggregation), and the 16 GiB bus bandwidth must be what the sandbox's H100 model
gives (the expected table's 487 GB/s over EFA, within 10%), over the transport it says it used.

On the same sandbox, a fault added while it runs (``nvcrectl sandbox fault add``) slows one node
for the next run only: the group with that node measures ``slow-nic``'s fraction of what it
measured the run before, the other group the same, and each node's NodeRecord shows both runs
with those values; ``fault clear`` ends it and ``status`` shows no fault in force.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import Parser
from nvcre.measure.profile import compile_profile
from nvcre.sandbox import control
from nvcre.sandbox.control import Started as Box
from nvcre.sandbox.supervisor import Options
from nvcre.testing.inspect import get, jobs_of, wait_true
from nvcre.testing.kwok import KwokLogs, pod_log
from nvcre.testing.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workloadrun" / "basic.yaml"
NODES, GROUP = 4, 2
SIXTEEN_GIB = 17179869184
PROFILE = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth")
NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
SLOW, SLOWER = "gpu-node-001", 0.85


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    options = Options(nodes=NODES, platform="aws", product="NVIDIA-H100-80GB-HBM3")
    with control.started(tmp_path_factory.mktemp("sandbox"), options) as box:
        yield box


@pytest.fixture(scope="module")
def kube(box: Box) -> Client:
    return box.kube


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
        # The ended run's pods are gone (released); their logs stay where kwok served them from.
        workload = job["status"]["workloadRef"]["name"]
        (launcher,) = [
            str(logs.metadata.name)
            for logs in kube.list(KwokLogs, namespace=namespace)
            if logs.metadata and str(logs.metadata.name).startswith(f"{workload}-launcher-")
        ]
        offline = parser.aggregate()
        for line in pod_log(kube, namespace, launcher, timestamps=True):
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


def sandbox(box: Box, *args: str) -> str:
    """``nvcrectl sandbox ARGS --state-dir ...`` as a user runs it: its output (it must pass)."""
    result = subprocess.run(
        [NVCRECTL, "sandbox", *args, f"--state-dir={box.state.path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def busbw_by_group(kube: Client, namespace: str, name: str) -> dict[tuple[str, ...], float]:
    """examples/workloadrun/basic.yaml in 2-node groups, named ``name``, run to its end: each
    group's nodes -> the bus bandwidth its BandwidthMeasurement read at 16 GiB."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"] = {"name": name, "namespace": namespace}
    document["spec"]["numNodes"] = GROUP
    document["spec"]["bandwidthMeasurement"] = {"logProfileRef": "nccl-bandwidth", "testType": "all_reduce"}
    kube.create(resources.WorkloadRun.from_dict(document))
    run = wait_true(kube, resources.WorkloadRun, name, namespace, "Succeeded", timeout=600)
    jobs = jobs_of(kube, namespace, run["status"]["workflowRef"]["name"])

    def measured() -> list[dict[str, Any]] | None:
        found = [b for b in measurements(kube, namespace) if b["spec"]["jobRef"]["name"] in jobs]
        return found if len(found) == len(jobs) and all(complete(b) for b in found) else None

    out = {}
    for bm in wait_for(measured, 120, what=f"the BandwidthMeasurements of {name} Complete"):
        nodes = jobs[bm["spec"]["jobRef"]["name"]]["metadata"]["annotations"][Annotation.GROUP_NODES]
        (sixteen,) = [r for r in bm["status"]["results"] if r["sizeBytes"] == SIXTEEN_GIB]
        out[tuple(sorted(nodes.split(",")))] = float(sixteen["busBW"])
    return out


def test_a_fault_added_between_two_runs_slows_its_node_in_the_second_only(box: Box) -> None:
    namespace = "faults"
    box.kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    assert sandbox(box, "status").splitlines()[-1] == "faults in force: none"
    before = busbw_by_group(box.kube, namespace, "before")

    added = sandbox(box, "fault", "add", f"{SLOW}=slow-nic:{SLOWER}")
    assert added == f"added {SLOW}=slow-nic:{SLOWER} (applies to groups that start from now on)\n"
    status = sandbox(box, "status")
    assert re.search(rf"^\s+{SLOW}\s+Ready=True\s+{SLOW}=slow-nic:{SLOWER}$", status, re.M), status
    assert re.search(
        rf"^faults in force .*:\n\s+{SLOW}\s+{SLOW}=slow-nic:{SLOWER}\s+added \d{{4}}-\d\d-\d\dT[\d:]+Z$",
        status,
        re.M,
    ), status
    after = busbw_by_group(box.kube, namespace, "after")

    assert set(before) == set(after) and len(before) == NODES // GROUP, "the same pairs both times"
    (slowed,) = [g for g in before if SLOW in g]
    # the first run is healthy: the expected table's 487 GB/s for 2 aws H100 nodes, 3% of noise
    assert 450.0 <= before[slowed] <= 520.0, before
    # the second gets slow-nic's fraction of that (each run's noise is 3% on each time)
    assert SLOWER - 0.07 <= after[slowed] / before[slowed] <= SLOWER + 0.07, (before, after)
    for other in set(before) - {slowed}:
        assert 0.93 <= after[other] / before[other] <= 1.07, (before, after)

    # Each node's NodeRecord holds both runs, each once, under its WorkloadRun's name, with the
    # bandwidth its pair measured (the highest over sizes: at least the 16 GiB reading).
    for group in before:
        for node in group:
            record = box.kube.get(resources.NodeRecord, node).to_dict()
            results = {h["name"]: h["results"] for h in record["status"]["categories"]}
            for name, measured in (("before", before), ("after", after)):
                [result] = results[f"workloadrun/{name}"]
                assert result["run"]["kind"] == "WorkloadRun" and result["run"]["name"] == name
                assert result["verdict"] == "Passed" and result["partners"] == [n for n in group if n != node]
                assert result["values"]["busBandwidthGBps"] >= measured[group], (node, name, result)
            ratio = (
                results["workloadrun/after"][0]["values"]["busBandwidthGBps"]
                / (results["workloadrun/before"][0]["values"]["busBandwidthGBps"])
            )
            if group == slowed:
                assert SLOWER - 0.1 <= ratio <= SLOWER + 0.1, (node, ratio)
            else:
                assert 0.9 <= ratio <= 1.1, (node, ratio)

    assert sandbox(box, "fault", "clear") == f"cleared {SLOW}=slow-nic:{SLOWER}\n"
    status = sandbox(box, "status")
    assert status.splitlines()[-1] == "faults in force: none"
    assert re.search(rf"^\s+{SLOW}\s+Ready=True\s+-$", status, re.M), status


def test_a_node_fault_added_and_cleared_is_on_the_node_when_the_command_returns(box: Box) -> None:
    """What a fault writes to the Node from the start (missing-gpus) is written when ``fault
    add`` returns, and taken back when ``fault clear`` returns."""

    def gpus() -> tuple[str, str, str]:
        node = box.kube.get(Node, "gpu-node-002")
        assert node.metadata is not None and node.status is not None
        return (
            (node.metadata.labels or {})["nvidia.com/gpu.count"],
            (node.status.capacity or {})["nvidia.com/gpu"],
            (node.status.allocatable or {})["nvidia.com/gpu"],
        )

    assert gpus() == ("8", "8", "8")
    sandbox(box, "fault", "add", "gpu-node-002=missing-gpus:1")
    assert gpus() == ("7", "7", "7")
    assert sandbox(box, "fault", "clear", "gpu-node-002") == "cleared gpu-node-002=missing-gpus:1\n"
    assert gpus() == ("8", "8", "8")
