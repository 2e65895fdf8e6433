"""Diagnose mode on the sandbox: 32 simulated aws H100 nodes in 4 network blocks of 8, one with a
slow NIC (``slow-nic:0.3``). The Workflow is the one nvcre renders for a WorkloadRun (NCCL
all-reduce with a bandwidth measurement and a ``busBandwidthGBps`` threshold), given
``orchestration.diagnose``; the simulated accelerator decides every group's bandwidth.

The three cases share the sandbox (one fault, run one after the other on the same nodes): the
diagnosis by topology domain, the same stopped by ``maxRounds: 2``, and the sqrt(N) chunking
without a topology key.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node

from nvcre import resources
from nvcre.sandbox import control
from nvcre.sandbox.state import StateDir
from nvcre.sandbox.supervisor import Options
from nvcre.testing.diagnose_runs import BLOCK, NAMESPACE, example_workflow, node_results
from nvcre.testing.inspect import get, true_condition, wait_true

NODES, DOMAIN = 32, 8
SLOW = "gpu-node-013"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    state = StateDir(tmp_path_factory.mktemp("sandbox") / "state")
    options = Options(
        nodes=NODES,
        platform="aws",
        product="NVIDIA-H100-80GB-HBM3",
        domain_size=DOMAIN,
        faults=[f"{SLOW}=slow-nic:0.3"],
    )
    with control.running(state, options) as record:
        yield Client(KubeConfig.from_file(record.kubeconfig))


def domains(kube: Client) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for node in kube.list(Node):
        assert node.metadata is not None
        found.setdefault((node.metadata.labels or {})[BLOCK], []).append(str(node.metadata.name))
    return found


def test_one_slow_node_in_four_domains(kube: Client) -> None:
    assert sorted(len(v) for v in domains(kube).values()) == [8, 8, 8, 8]
    name = example_workflow(
        kube, "diag-one", orchestration={"diagnose": {"minGroupSize": 2, "topologyKey": BLOCK}}
    )["metadata"]["name"]
    workflow = wait_true(kube, resources.Workflow, name, NAMESPACE, "Failed", timeout=1500)
    status = workflow["status"]
    diagnose = status["orchestration"]["diagnose"]
    assert true_condition(workflow)[1:] == (
        "IterationsFailed",
        "Diagnosis complete: 1 faulty nodes confirmed",
    )
    assert diagnose["faultyNodes"] == [SLOW]
    assert diagnose["outcome"] == "Faulty"
    failed, succeeded = node_results(kube, status)
    assert [e["name"] for e in failed] == [SLOW]
    assert sorted(succeeded) == sorted(n for nodes in domains(kube).values() for n in nodes if n != SLOW)
    rounds = diagnose["round"]
    print(f"\none slow node, 4 domains of 8: {rounds} rounds")
    assert rounds <= 2 + math.ceil(math.log2(8)) + 1
    jobs = [
        j["metadata"]["name"]
        for j in (dict(x.to_dict()) for x in kube.list(resources.Job, namespace=NAMESPACE))
    ]
    assert f"{name}-screen-0-iter-1" in jobs and f"{name}-inter-domain-iter-2" in jobs


def test_max_rounds_ends_failed_with_the_suspects(kube: Client) -> None:
    name = example_workflow(
        kube, "diag-limit", orchestration={"diagnose": {"topologyKey": BLOCK, "maxRounds": 2}}
    )["metadata"]["name"]
    workflow = wait_true(kube, resources.Workflow, name, NAMESPACE, "Failed", timeout=900)
    diagnose = workflow["status"]["orchestration"]["diagnose"]
    slow_domain = next(nodes for nodes in domains(kube).values() if SLOW in nodes)
    assert true_condition(workflow)[1:] == (
        "DiagnoseLimitReached",
        "Diagnosis stopped: round limit 2 reached in stage inter-screening; "
        f"8 suspect nodes: {', '.join(sorted(slow_domain))}",
    )
    assert diagnose["outcome"] == "LimitReached"
    assert diagnose["round"] == 2
    failed, _ = node_results(kube, workflow["status"])
    assert failed == [], "no suspect is blamed"
    print(f"\nmaxRounds 2: {diagnose['round']} rounds")


def test_without_topology_sqrt_chunks_find_the_node(kube: Client) -> None:
    name = example_workflow(kube, "diag-sqrt", orchestration={"diagnose": {"minGroupSize": 2}})["metadata"][
        "name"
    ]
    workflow = wait_true(kube, resources.Workflow, name, NAMESPACE, "Failed", timeout=1500)
    diagnose = workflow["status"]["orchestration"]["diagnose"]
    assert diagnose["faultyNodes"] == [SLOW]
    assert sorted(len(r["nodes"]) for r in diagnose["screeningResults"].values()) == [2, 6, 6, 6, 6, 6]
    failed, _ = node_results(kube, workflow["status"])
    assert [e["name"] for e in failed] == [SLOW]
    print(f"\nno topology (sqrt chunks): {diagnose['round']} rounds")
    assert (
        get(kube, resources.Workflow, name, NAMESPACE)["status"]["orchestration"]["diagnose"]["stage"]
        == "complete"
    )
