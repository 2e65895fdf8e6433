"""Verdicts of a user's Certification on the simulated cluster: the catalog's NCCL all-reduce
category, groups of two aws H100 nodes, every bandwidth read by nvcre from the launcher logs the
simulated accelerator wrote.

One sandbox of 16 nodes, ``slow-nic:0.3`` on one of the upper eight (about 145 GB/s where its
healthy peers reach about 487). Each Certification targets eight nodes by name:

* the lower eight, healthy, no thresholds: Succeeded, a final measurement on every group;
* the upper eight with ``busBandwidthGBps: value >= 300``: the slow node's group fails
  ``ThresholdViolated`` naming the measured value and the expression, the other three pass,
  the failed-nodes ConfigMap names that group's two nodes, the Certification is Failed with
  ``WorkflowValidationFailed``;
* the upper eight again with no thresholds: the same group fails as a ``BandwidthOutlier``
  against the median of its three peers.

The first two run side by side (disjoint nodes); the third once the second has ended.
"""

from __future__ import annotations

import secrets
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from lightkube import Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from nvcre.api.v1alpha1.constants import Annotation
from nvcre.controllers import resources
from nvcre.sandbox import control
from nvcre.sandbox.state import StateDir
from nvcre.sandbox.supervisor import Options
from nvcre.testing import binaries as bins
from nvcre.testing.inspect import (
    failed_nodes_record,
    get,
    jobs_of,
    true_condition,
    wait_true,
)

NODES = 16
GROUP = 2
SLOW = "gpu-node-013"
HEALTHY_NODES = [f"gpu-node-{i:03d}" for i in range(8)]
SLOW_NODES = [f"gpu-node-{i:03d}" for i in range(8, 16)]
SIXTEEN_GIB = 17179869184
THRESHOLD = "value >= 300"  # between the slow group's ~145 GB/s and the healthy ~487 GB/s
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
FAILED_NODES_KEY = "failed-nodes.json.gz"


@dataclass
class Box:
    kube: Client
    namespaces: dict[str, str]
    """Certification name -> its namespace."""


def certify(kube: Client, name: str, nodes: list[str], **options: Any) -> str:
    """A Certification of ``nodes`` (by name) with the catalog's all-reduce in groups of two."""
    namespace = f"{name}-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    # one cycle of 20 iterations (the catalog's 10 x 100 runs about 5 simulated minutes, 15 when slow)
    sizing = {"nodesPerJob": GROUP, "numIterations": 20, "numCycles": 1}
    category = {**ALL_REDUCE, "options": {**sizing, **options}}
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"target": {"nodeNames": nodes}, "categories": [category]},
    }
    kube.create(resources.Certification.from_dict(document))
    return namespace


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    state = StateDir(tmp_path_factory.mktemp("sandbox") / "state")
    try:
        record = control.up(
            state,
            Options(
                nodes=NODES,
                platform="aws",
                product="NVIDIA-H100-80GB-HBM3",
                faults=[f"{SLOW}=slow-nic:0.3"],
            ),
        )
        kube = Client(KubeConfig.from_file(record.kubeconfig))
        namespaces = {
            "healthy": certify(kube, "healthy", HEALTHY_NODES),
            "strict": certify(kube, "strict", SLOW_NODES, thresholds={"busBandwidthGBps": THRESHOLD}),
        }
        yield Box(kube, namespaces)
    finally:
        control.down(state)


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == type_)


@dataclass
class Ended:
    cert: dict[str, Any]
    workflow: dict[str, Any]
    jobs: dict[str, dict[str, Any]]
    """Job name -> Job."""
    groups: dict[str, list[str]]
    """Job name -> the nodes of its group."""
    measurements: dict[str, dict[str, Any]]
    """Job name -> its BandwidthMeasurement."""

    def group_of(self, node: str) -> str:
        (job,) = [j for j, nodes in self.groups.items() if node in nodes]
        return job

    def failed_nodes(self, kube: Client) -> list[dict[str, str]]:
        (category,) = self.cert["status"]["categoryStatuses"]
        ref = category["failedNodesRef"]["name"]
        return failed_nodes_record(kube, self.cert["metadata"]["namespace"], ref)


def ended(kube: Client, name: str, namespace: str, phase: str) -> Ended:
    """The Certification once ``phase``, with its Workflow, Jobs and their final measurements."""
    cert = wait_true(kube, resources.Certification, name, namespace, phase, timeout=300)
    (category,) = cert["status"]["categoryStatuses"]
    workflow = get(kube, resources.Workflow, category["workflowRef"]["name"], namespace)
    jobs = jobs_of(kube, namespace, workflow["metadata"]["name"])
    groups = {j: job["metadata"]["annotations"][Annotation.GROUP_NODES].split(",") for j, job in jobs.items()}
    measurements = {j: get(kube, resources.BandwidthMeasurement, f"{j}-bandwidth", namespace) for j in jobs}
    return Ended(cert, workflow, jobs, groups, measurements)


def trio(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(type, reason, message) of the True one of Succeeded/Failed/Running."""
    found = true_condition(obj)
    assert found is not None, obj.get("status")
    return found


def bus_bandwidth(measurement: dict[str, Any]) -> float:
    """``busBandwidthGBps`` as spec/measurements.md 4.1 defines it: the largest final busBW."""
    return max(float(r["busBW"]) for r in measurement["status"]["results"])


def assert_measured(measurement: dict[str, Any], job: dict[str, Any]) -> float:
    """Final values from the job's own launcher log; returns the 16 GiB bus bandwidth."""
    assert measurement["metadata"]["labels"]["nvcre.nvidia.com/job-uid"] == job["metadata"]["uid"]
    complete = condition(measurement, "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "JobSucceeded"), complete
    status = measurement["status"]
    assert status["transport"] == ["AWS Libfabric"], "the catalog's aws entry runs over EFA"
    assert status["wrongValues"] == 0
    (sixteen,) = [r for r in status["results"] if r["sizeBytes"] == SIXTEEN_GIB]
    return float(sixteen["busBW"])


def test_healthy_nodes_pass_with_measured_bandwidth_on_every_group(box: Box) -> None:
    kube, namespace = box.kube, box.namespaces["healthy"]
    done = ended(kube, "healthy", namespace, "Succeeded")
    assert sorted(n for g in done.groups.values() for n in g) == HEALTHY_NODES
    assert len(done.jobs) == len(HEALTHY_NODES) // GROUP
    measured = {}
    for name, job in done.jobs.items():
        measured[name] = assert_measured(done.measurements[name], job)
        # the sandbox's 2-node H100 all_reduce over EFA: the expected table's 487 GB/s, 3% of noise
        assert 440.0 <= measured[name] <= 510.0, (name, measured[name])
        verdict = condition(job, "ValidationFailed")
        assert verdict["status"] == "False", verdict
    assert trio(done.workflow)[0] == "Succeeded"
    print(f"\nhealthy 16 GiB busBW: {measured}")


def test_a_threshold_fails_the_slow_group_and_the_certification(box: Box) -> None:
    kube, namespace = box.kube, box.namespaces["strict"]
    done = ended(kube, "strict", namespace, "Failed")
    assert trio(done.cert) == (
        "Failed",
        "WorkflowValidationFailed",
        "One or more certification categories failed",
    )
    assert condition(done.cert, "ValidationFailed")["reason"] == "WorkflowValidationFailed"
    assert trio(done.workflow)[:2] == ("Failed", "JobValidationFailed")
    slow = done.group_of(SLOW)
    measured = {j: assert_measured(done.measurements[j], job) for j, job in done.jobs.items()}
    value = bus_bandwidth(done.measurements[slow])
    message = f'Threshold "busBandwidthGBps" violated: measured {value:.4f}, expression: {THRESHOLD}'
    verdict = condition(done.jobs[slow], "ValidationFailed")
    assert (verdict["status"], verdict["reason"], verdict["message"]) == (
        "True",
        "ThresholdViolated",
        message,
    )
    assert value < 300.0 <= min(bus_bandwidth(done.measurements[j]) for j in done.jobs if j != slow)
    for other in set(done.jobs) - {slow}:
        verdict = condition(done.jobs[other], "ValidationFailed")
        assert (verdict["status"], verdict["reason"]) == ("False", "ThresholdsMet"), verdict
    phases = {g["jobRef"]["name"]: g["phase"] for g in done.workflow["status"]["orchestration"]["groups"]}
    assert phases == {j: "Failed" if j == slow else "Succeeded" for j in done.jobs}
    assert sorted((e["name"], e["reason"], e["message"]) for e in done.failed_nodes(kube)) == sorted(
        (node, "ThresholdViolation", message) for node in done.groups[slow]
    )
    print(f"\nthreshold 16 GiB busBW: {measured}; slow group {slow}: {value}")


def test_with_no_thresholds_the_slow_group_is_a_bandwidth_outlier(box: Box) -> None:
    kube = box.kube
    # the nodes are the threshold case's: it must have ended first
    ended(kube, "strict", box.namespaces["strict"], "Failed")
    namespace = certify(kube, "fleet", SLOW_NODES)
    done = ended(kube, "fleet", namespace, "Failed")
    assert trio(done.cert)[:2] == ("Failed", "WorkflowValidationFailed")
    slow = done.group_of(SLOW)
    measured = {j: assert_measured(done.measurements[j], job) for j, job in done.jobs.items()}
    value = bus_bandwidth(done.measurements[slow])
    median = statistics.median(bus_bandwidth(done.measurements[j]) for j in done.jobs if j != slow)
    message = (
        f"bus bandwidth {value:.2f} GB/s is below 0.8 of the median of its 3 peer groups ({median:.2f} GB/s)"
    )
    verdict = condition(done.jobs[slow], "ValidationFailed")
    assert (verdict["status"], verdict["reason"], verdict["message"]) == ("True", "BandwidthOutlier", message)
    for other in set(done.jobs) - {slow}:
        assert condition(done.jobs[other], "ValidationFailed")["status"] == "False"
    assert sorted(
        (e["name"], e["reason"], e["cause"], e["message"]) for e in done.failed_nodes(kube)
    ) == sorted((node, "ThresholdViolation", "BandwidthOutlier", message) for node in done.groups[slow])
    print(f"\noutlier 16 GiB busBW: {measured}; slow group {slow}: {value}, peers' median {median}")
