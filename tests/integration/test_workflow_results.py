"""The node-result ConfigMaps on the real API server: every node of every group ends in exactly
one of the succeeded-nodes and failed-nodes lists, whatever happened to its group's Job.

The test plays Kubeflow Trainer (it ends TrainJobs); the Workflow and Job controllers are real.
Kept: a Job deleted mid-run is placed exactly; a failure and a retry with real pods are in
tests/sandbox/test_behaviours.py.
"""

from __future__ import annotations

from typing import Any

from lightkube import Client

from nvcre import resources
from nvcre.testing import inspect
from nvcre.testing.builders import new_pool
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import finish_trainjob, workflow


def results(kube: Client, namespace: str, wf: dict[str, Any]) -> tuple[list[str], list[dict[str, str]]]:
    """The two lists, read through the Workflow's refs (an unset ref is an empty list)."""
    status = wf["status"]
    succeeded: list[str] = []
    failed: list[dict[str, str]] = []
    if status.get("succeededNodesRef"):
        payload = inspect.config_map_payload(
            kube, namespace, status["succeededNodesRef"]["name"], "succeeded-nodes.csv.gz"
        )
        succeeded = payload.decode().split(",")
    if status.get("failedNodesRef"):
        failed = inspect.failed_nodes_record(kube, namespace, status["failedNodesRef"]["name"])
    return succeeded, failed


def assert_every_node_in_exactly_one_list(kube: Client, namespace: str, wf: dict[str, Any]) -> None:
    succeeded, failed = results(kube, namespace, wf)
    failed_names = {e["name"] for e in failed}
    for group in wf["status"]["orchestration"]["groups"]:
        for node in group["nodes"]:
            assert (node in succeeded) != (node in failed_names), (
                f"{node} of {group['name']} ({group['phase']}): succeeded={succeeded}, failed={failed}"
            )


def two_groups(kube: Client, namespace: str, gpu_nodes: Any, name: str) -> list[str]:
    """A Workflow of two 2-node groups on 4 new nodes, once both its Jobs exist; the nodes."""
    pool, nodes = new_pool(gpu_nodes, 4)
    kube.create(resources.Workflow.from_dict(workflow(name, namespace, pool, 2)))
    wanted = [f"{name}-group-0-iter-1", f"{name}-group-1-iter-1"]
    wait_for(lambda: sorted(inspect.jobs_of(kube, namespace, name)) == wanted, 60, what="both Jobs")
    return nodes


def test_a_deleted_job_lists_its_group_nodes_as_failed(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    nodes = two_groups(kube, namespace, gpu_nodes, "gone")
    kube.delete(resources.Job, "gone-group-1-iter-1", namespace=namespace)
    inspect.finish_job(kube, namespace, "gone-group-0-iter-1", succeeded=True)
    wf = inspect.wait_true(kube, resources.Workflow, "gone", namespace, "Failed", timeout=60)
    assert inspect.true_condition(wf) == ("Failed", "IterationsFailed", "1 groups failed across 1 iterations")
    assert [g["phase"] for g in wf["status"]["orchestration"]["groups"]] == ["Succeeded", "Failed"]
    succeeded, failed = results(kube, namespace, wf)
    assert succeeded == nodes[:2]
    assert failed == [
        {
            "name": n,
            "reason": "WorkloadFailed",
            "cause": "JobDeleted",
            "message": 'Job "gone-group-1-iter-1" was deleted before it finished',
        }
        for n in nodes[2:]
    ]
    assert_every_node_in_exactly_one_list(kube, namespace, wf)


def test_a_second_failure_is_merged_into_the_existing_failed_nodes_list(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    nodes = two_groups(kube, namespace, gpu_nodes, "twice")
    kube.delete(resources.Job, "twice-group-1-iter-1", namespace=namespace)

    def first_failure_recorded() -> bool:
        return bool(
            inspect.get(kube, resources.Workflow, "twice", namespace).get("status", {}).get("failedNodesRef")
        )

    wait_for(first_failure_recorded, 60, what="the failed-nodes ConfigMap of the deleted Job's group")
    inspect.finish_job(kube, namespace, "twice-group-0-iter-1", succeeded=False)
    wf = inspect.wait_true(kube, resources.Workflow, "twice", namespace, "Failed", timeout=60)
    assert inspect.true_condition(wf) == ("Failed", "IterationsFailed", "2 groups failed across 1 iterations")
    succeeded, failed = results(kube, namespace, wf)
    assert succeeded == []
    by_node = {e["name"]: e["cause"] for e in failed}
    # The second group's nodes were merged into the ConfigMap the first failure created.
    assert sorted(by_node) == nodes
    assert {by_node[n] for n in nodes[2:]} == {"JobDeleted"}
    assert {by_node[n] for n in nodes[:2]} == {"WorkloadFailed"}


def test_isolation_fails_only_the_member_that_fails_again_with_a_healthy_partner(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Two pairs, one fails: each of its members is re-tested with a node of the passing pair;
    the member whose re-test fails is the only node failed, with that re-test's evidence, and
    the other is succeeded."""
    pool, nodes = new_pool(gpu_nodes, 4)
    kube.create(resources.Workflow.from_dict(workflow("iso", namespace, pool, 2)))
    first = ["iso-group-0-iter-1", "iso-group-1-iter-1"]
    wait_for(lambda: sorted(inspect.jobs_of(kube, namespace, "iso")) == first, 60, what="both Jobs")
    by_nodes = {
        tuple(g["nodes"]): g
        for g in inspect.get(kube, resources.Workflow, "iso", namespace)["status"]["orchestration"]["groups"]
    }
    healthy, bad = by_nodes[tuple(nodes[:2])], by_nodes[tuple(nodes[2:])]
    for group, ok in ((healthy, True), (bad, False)):
        job = f"iso-{group['name']}-iter-1"
        inspect.finish_job(kube, namespace, job, succeeded=ok)

    def round_() -> list[dict[str, Any]] | None:
        orchestration = inspect.get(kube, resources.Workflow, "iso", namespace)["status"]["orchestration"]
        running = (orchestration.get("isolation") or {}).get("stage") == "Running"
        return orchestration["groups"] if running else None

    groups = wait_for(round_, 60, what="the isolation round")
    assert [(g["name"], g["suspect"], g["nodes"]) for g in groups] == [
        ("isolate-0", nodes[2], [nodes[2], nodes[0]]),
        ("isolate-1", nodes[3], [nodes[3], nodes[1]]),
    ], "each suspect with a node of the passing pair"
    wf = inspect.get(kube, resources.Workflow, "iso", namespace)
    message = (
        "Iteration 1: re-testing 2 suspect nodes of 1 failed groups, 2 with healthy partners from the "
        "passing groups"
    )
    assert not wf["status"].get("failedNodesRef"), "nothing is recorded before the re-tests end"
    retests = ["iso-isolate-0-iter-1", "iso-isolate-1-iter-1"]
    wait_for(
        lambda: set(retests) <= set(inspect.jobs_of(kube, namespace, "iso")), 60, what="the re-test Jobs"
    )
    trainjobs = [inspect.trainjob_of(kube, namespace, job)["metadata"]["name"] for job in retests]
    for trainjob, ok in zip(trainjobs, (False, True), strict=True):
        finish_trainjob(kube, namespace, trainjob, succeeded=ok, message="x")

    wf = inspect.wait_true(kube, resources.Workflow, "iso", namespace, "Failed", timeout=60)
    assert inspect.true_condition(wf) == (
        "Failed",
        "IterationsFailed",
        "1 groups failed across 1 iterations; Isolation complete: 1 nodes failed again with healthy "
        "partners, 1 cleared",
    )
    orchestration = wf["status"]["orchestration"]
    assert [g["name"] for g in orchestration["groups"]] == [healthy["name"], bad["name"]], "restored"
    assert {k: v for k, v in orchestration["isolation"].items() if k != "suspects"} == {
        "iteration": 1,
        "stage": "Complete",
        "failedNodes": [nodes[2]],
        "clearedNodes": [nodes[3]],
        "retests": [
            {"suspect": nodes[2], "partners": [nodes[0]], "jobName": retests[0], "passed": False},
            {"suspect": nodes[3], "partners": [nodes[1]], "jobName": retests[1], "passed": True},
        ],
        "message": "Isolation complete: 1 nodes failed again with healthy partners, 1 cleared",
    }
    succeeded, failed = results(kube, namespace, wf)
    assert succeeded == [nodes[0], nodes[1], nodes[3]]
    trainjob = trainjobs[0]
    assert failed == [
        {
            "name": nodes[2],
            "reason": "WorkloadFailed",
            "cause": "WorkloadFailed",
            "message": f'Job "{retests[0]}" failed: Workload TrainJob/{trainjob} failed: x '
            f"(re-tested with healthy partner {nodes[0]})",
        }
    ]
    assert ("Normal", "IsolatingFailures", message) in inspect.events_for(kube, namespace, "iso", "Workflow")
    inspect.wait_event(
        kube,
        namespace,
        "iso",
        "Workflow",
        (
            "Warning",
            "IsolationCompleted",
            "Isolation complete: 1 nodes failed again with healthy partners, 1 cleared",
        ),
    )


def test_a_lone_failed_group_is_screened_in_pairs_and_only_its_bad_node_is_failed(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """One group of three fails and no group passed: its members are re-tested among themselves,
    each in two pairs with its neighbours (Jobs named per round group, not the lone group's
    ``<wf>-job``); the node whose two pairs fail is the only one failed."""
    pool, nodes = new_pool(gpu_nodes, 3)
    kube.create(resources.Workflow.from_dict(workflow("ring", namespace, pool, 3)))
    wait_for(
        lambda: sorted(inspect.jobs_of(kube, namespace, "ring")) == ["ring-job"], 60, what="the lone Job"
    )
    inspect.finish_job(kube, namespace, "ring-job", succeeded=False, message="slow")

    def round_() -> list[dict[str, Any]] | None:
        orchestration = inspect.get(kube, resources.Workflow, "ring", namespace)["status"]["orchestration"]
        running = (orchestration.get("isolation") or {}).get("stage") == "Running"
        return orchestration["groups"] if running else None

    groups = wait_for(round_, 60, what="the isolation round")
    pairs = [[nodes[0], nodes[1]], [nodes[1], nodes[2]], [nodes[2], nodes[0]]]
    assert [(g["name"], g["nodes"], g.get("screen")) for g in groups] == [
        (f"isolate-{i}", pair, True) for i, pair in enumerate(pairs)
    ]
    retests = [f"ring-isolate-{i}-iter-1" for i in range(3)]
    for job, pair in zip(retests, pairs, strict=True):  # nodes[1] is the bad one
        # every two pairs share a node: they run one after another
        wait_for(lambda job=job: job in inspect.jobs_of(kube, namespace, "ring"), 60, what=f"Job {job}")
        inspect.finish_job(kube, namespace, job, succeeded=nodes[1] not in pair, message="slow")

    wf = inspect.wait_true(kube, resources.Workflow, "ring", namespace, "Failed", timeout=60)
    isolation = wf["status"]["orchestration"]["isolation"]
    assert (isolation["failedNodes"], isolation["clearedNodes"]) == ([nodes[1]], [nodes[0], nodes[2]])
    succeeded, failed = results(kube, namespace, wf)
    assert succeeded == [nodes[0], nodes[2]]
    (entry,) = failed
    assert entry["name"] == nodes[1]
    assert entry["message"].startswith(f'Job "{retests[0]}" failed: Workload TrainJob/')
    assert entry["message"].endswith(f"(re-tested in pairs, failing with each of {nodes[0]} and {nodes[2]})")
