"""Diagnose mode on the sandbox, the other faults: 40 simulated aws H100 nodes in 10 network
blocks of 4, each case on blocks of its own (a Workflow targets its nodes by name), so their
faults do not meet:

- blocks 0-3: two slow NICs in different blocks;
- blocks 4-6: a bad link between blocks 4 and 5, every node healthy;
- blocks 7-8: a ``flaky:0.5`` node whose groups fail and pass in turn (seed 2 draws 0.30, 0.53,
  0.37, 0.64 for its first four: a node's attempt counts the groups it ran as a member, so the
  node a launcher lands on does not change it);
- blocks 8-9: nothing wrong.

Isolation (on by default, outside diagnose mode) on the same faults, in pairs, first (the flaky
node's first group here fails, its re-test passes; in diagnose mode after it, its screening group
fails and passes when re-run):

- nodes 16-20 and 24-25, whose pairs include one across blocks 4 and 5: the link is named, and
  no node;
- blocks 7-8: the flaky node's pair fails; both its members pass their re-tests, so neither is
  blamed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client, KubeConfig

from nvcre import resources
from nvcre.sandbox import control
from nvcre.sandbox.model import unit
from nvcre.sandbox.state import StateDir
from nvcre.sandbox.supervisor import Options
from nvcre.testing.diagnose_runs import BLOCK, NAMESPACE, example_workflow, node_results
from nvcre.testing.inspect import get, true_condition, wait_ended
from nvcre.testing.nodes import domain_labels

PRODUCT = "NVIDIA-H100-80GB-HBM3"
NODES, DOMAIN = 40, 4
SEED = 2
SLOW = ("gpu-node-001", "gpu-node-010")
FLAKY = "gpu-node-029"


def block(index: int) -> str:
    return domain_labels("aws", PRODUCT, index)[BLOCK]


def nodes_of(*blocks: int) -> list[str]:
    return [f"gpu-node-{b * DOMAIN + i:03d}" for b in blocks for i in range(DOMAIN)]


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    assert unit(SEED, "flaky", FLAKY, 0) < 0.5 <= unit(SEED, "flaky", FLAKY, 1), "first attempt fails"
    state = StateDir(tmp_path_factory.mktemp("sandbox") / "state")
    faults = [f"{n}=slow-nic:0.3" for n in SLOW] + [f"link:{block(4)},{block(5)}:0.3", f"{FLAKY}=flaky:0.5"]
    options = Options(
        nodes=NODES, platform="aws", product=PRODUCT, domain_size=DOMAIN, faults=faults, seed=SEED
    )
    with control.running(state, options) as record:
        yield Client(KubeConfig.from_file(record.kubeconfig))


def run(kube: Client, name: str, blocks: tuple[int, ...], condition: str) -> dict[str, object]:
    example_workflow(
        kube,
        name,
        orchestration={"diagnose": {"minGroupSize": 2, "topologyKey": BLOCK}},
        target={"nodeNames": nodes_of(*blocks)},
    )
    workflow = wait_ended(kube, resources.Workflow, name, NAMESPACE, timeout=1200)
    assert true_condition(workflow)[0] == condition, workflow["status"]
    return workflow


def isolated(kube: Client, name: str, nodes: list[str]) -> dict[str, Any]:
    """A plain Workflow (isolation on, its default) of ``nodes`` in pairs, once it has ended, which
    must be Failed (a group failed)."""
    example_workflow(
        kube,
        name,
        orchestration={"topology": {"topologyKey": BLOCK}},
        target={"nodeNames": nodes},
        num_nodes=2,
    )
    workflow = wait_ended(kube, resources.Workflow, name, NAMESPACE, timeout=900)
    assert true_condition(workflow)[0] == "Failed", workflow["status"]
    return workflow


def pair_of(workflow: dict[str, Any], node: str) -> list[str]:
    (group,) = [g for g in workflow["status"]["orchestration"]["groups"] if g.get("phase") == "Failed"]
    assert node in group["nodes"], group
    return list(group["nodes"])


def test_isolation_names_a_bad_link_and_no_node(kube: Client) -> None:
    nodes = [f"gpu-node-{i:03d}" for i in (16, 17, 18, 19, 20, 24, 25)]
    workflow = isolated(kube, "iso-link", nodes)
    status = workflow["status"]
    crossing = pair_of(workflow, "gpu-node-020")  # the one pair across blocks 4 and 5
    isolation = status["orchestration"]["isolation"]
    assert (isolation.get("failedNodes"), isolation["clearedNodes"]) == (None, sorted(crossing))
    (link,) = isolation["links"]
    assert (link["domains"], link["nodes"]) == (sorted([block(4), block(5)]), crossing)
    partners = {r["suspect"]: r["partners"] for r in isolation["retests"]}
    assert {n // DOMAIN for p in partners.values() for n in (int(x[-3:]) for x in p)} <= {4, 6}, (
        "never re-tested across the same link"
    )
    assert true_condition(workflow)[2].endswith(f"links implicated: {' <-> '.join(link['domains'])}")
    failed, succeeded = node_results(kube, status)
    assert failed == [], "no node blamed"
    assert sorted(succeeded) == nodes


def test_isolation_does_not_blame_a_flaky_node(kube: Client) -> None:
    workflow = isolated(kube, "iso-flaky", nodes_of(7, 8))
    status = workflow["status"]
    pair = pair_of(workflow, FLAKY)
    isolation = status["orchestration"]["isolation"]
    assert (isolation.get("failedNodes"), isolation["clearedNodes"]) == (None, sorted(pair))
    assert all(r["passed"] for r in isolation["retests"]), "a re-test draws afresh"
    retest = next(r["jobName"] for r in isolation["retests"] if r["suspect"] == FLAKY)
    job = get(kube, resources.Job, retest, NAMESPACE)
    assert true_condition(job)[0] == "Succeeded"
    (link,) = isolation["links"]
    assert link["nodes"] == pair and link["message"].endswith(
        "the links between them, or an intermittent fault"
    )
    failed, succeeded = node_results(kube, status)
    assert failed == [], "the flaky node is not blamed"
    assert sorted(succeeded) == nodes_of(7, 8)


def test_two_faulty_nodes_in_different_domains(kube: Client) -> None:
    workflow = run(kube, "diag-two", (0, 1, 2, 3), "Failed")
    status = workflow["status"]
    diagnose = status["orchestration"]["diagnose"]
    assert true_condition(workflow)[1:] == (
        "IterationsFailed",
        "Diagnosis complete: 2 faulty nodes confirmed",
    )
    assert diagnose["faultyNodes"] == list(SLOW)
    failed, succeeded = node_results(kube, status)
    assert [e["name"] for e in failed] == list(SLOW), "no healthy node blamed"
    assert succeeded == [n for n in nodes_of(0, 1, 2, 3) if n not in SLOW]
    print(f"\ntwo faulty nodes: {diagnose['round']} rounds")
    assert diagnose["round"] <= 2 + 1 + 1  # screening, inter-domain, one halving of 4, confirmation


def test_bad_link_between_two_domains(kube: Client) -> None:
    workflow = run(kube, "diag-link", (4, 5, 6), "Failed")
    status = workflow["status"]
    diagnose = status["orchestration"]["diagnose"]
    assert true_condition(workflow)[1:] == (
        "IterationsFailed",
        "Diagnosis complete: 1 infrastructure faults detected",
    )
    (fault,) = diagnose["infrastructureFaults"]
    assert fault["domains"] == sorted([block(4), block(5)]) and fault["stage"] == "cross-boundary"
    assert diagnose["faultyNodes"] == []
    failed, succeeded = node_results(kube, status)
    assert failed == [], "no node blamed"
    assert succeeded == nodes_of(4, 5, 6)
    print(f"\nbad link between two domains: {diagnose['round']} rounds")


def test_flaky_node_is_retested_not_blamed(kube: Client) -> None:
    workflow = run(kube, "diag-flaky", (7, 8), "Succeeded")
    status = workflow["status"]
    diagnose = status["orchestration"]["diagnose"]
    assert true_condition(workflow)[1:] == ("JobCompleted", "All screening passed, no faults detected")
    assert diagnose["outcome"] == "Inconclusive"
    screen = next(g for g in diagnose["transientFailures"] if g["stage"] == "intra-screening")
    assert FLAKY in screen["nodes"] and screen["round"] == 1
    failed, succeeded = node_results(kube, status)
    assert failed == [] and succeeded == nodes_of(7, 8)
    print(f"\nflaky node: {diagnose['round']} rounds")


def test_healthy_fleet(kube: Client) -> None:
    workflow = run(kube, "diag-healthy", (8, 9), "Succeeded")
    diagnose = workflow["status"]["orchestration"]["diagnose"]
    assert true_condition(workflow)[1:] == ("JobCompleted", "All screening passed, no faults detected")
    assert diagnose["outcome"] == "Healthy" and "transientFailures" not in diagnose
    assert diagnose["round"] == 2
    print(f"\nhealthy fleet: {diagnose['round']} rounds (screening, inter-domain)")
