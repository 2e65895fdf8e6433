"""Diagnose mode in the Workflow controller on the real API server: the rounds it runs, what it
records (status, node-result ConfigMaps), the re-test of a transient failure, maxConcurrent,
the deadline, and convergence through 409s and SIGKILLs.

TrainJobs are ended by hand: a group "fails" when the test fails its TrainJob, so each test
chooses which Jobs (by name, and by attempt for a re-test) fail.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.types import PatchType

from nvcre import resources
from nvcre.testing.builders import pool_nodes
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.history import Recorder
from nvcre.testing.inspect import (
    config_map_payload,
    failed_nodes_record,
    get,
    group_phases,
    jobs_of,
    true_condition,
    wait_true,
)
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import finish_trainjob, pool_name, workflow

Fails = Callable[[str, int], bool]
"""(Job name, attempt) -> whether that attempt's TrainJob fails."""


class Driver:
    """Ends every TrainJob it has not ended yet, as ``fails`` says."""

    def __init__(self, kube: Client, namespace: str, fails: Fails) -> None:
        self.kube, self.namespace, self.fails = kube, namespace, fails
        self.ended: set[str] = set()
        self.attempts: dict[str, int] = {}

    def pending(self) -> bool:
        """A TrainJob is waiting to be ended."""
        return any(
            t.metadata.uid not in self.ended and not t.metadata.deletionTimestamp
            for t in self.kube.list(resources.TrainJob, namespace=self.namespace)
        )

    def step(self) -> None:
        for trainjob in self.kube.list(resources.TrainJob, namespace=self.namespace):
            meta = trainjob.metadata
            if meta.uid in self.ended or meta.deletionTimestamp:
                continue
            job = (meta.labels or {}).get("nvcre.nvidia.com/job", "")
            attempt = self.attempts.get(job, 0)
            finish_trainjob(self.kube, self.namespace, meta.name, succeeded=not self.fails(job, attempt))
            self.attempts[job] = attempt + 1
            self.ended.add(meta.uid)


def run_until_terminal(kube: Client, namespace: str, name: str, driver: Driver) -> dict[str, Any]:
    def terminal() -> dict[str, Any] | None:
        driver.step()
        wf = get(kube, resources.Workflow, name, namespace)
        return wf if (true_condition(wf) or ("",))[0] in ("Succeeded", "Failed") else None

    return dict(wait_for(terminal, 180, what=f"{name} to end", ignore=(Exception,)))


def node_results(kube: Client, namespace: str, wf: dict[str, Any]) -> tuple[list[tuple[str, str]], str]:
    uid8 = wf["metadata"]["uid"][:8]
    failed = wf["status"].get("failedNodesRef")
    entries = failed_nodes_record(kube, namespace, f"failed-nodes-{uid8}") if failed else []
    succeeded = config_map_payload(kube, namespace, f"succeeded-nodes-{uid8}", "succeeded-nodes.csv.gz")
    return [(e["name"], e["reason"]) for e in entries], succeeded.decode()


def two_racks(gpu_nodes: Any) -> tuple[str, list[str]]:
    pool = pool_name()
    nodes = pool_nodes(gpu_nodes, 2, pool, labels={"rack": "r1"}) + pool_nodes(
        gpu_nodes, 2, pool, labels={"rack": "r2"}
    )
    return pool, nodes


def diagnose_workflow(name: str, namespace: str, pool: str, **diagnose: Any) -> dict[str, Any]:
    execution = diagnose.pop("execution", {})
    return workflow(
        name,
        namespace,
        pool,
        2,
        orchestration={"diagnose": {"topologyKey": "rack", **diagnose}, "execution": execution},
    )


def run_diagnosis(
    kube: Client, namespace: str, pool: str, name: str, fails: Fails, **diagnose: Any
) -> tuple[dict[str, Any], Driver]:
    """The diagnose Workflow ``name`` on ``pool``, created and driven to its end with its
    TrainJobs failing as ``fails`` says: the ended Workflow, and the driver (its attempts)."""
    kube.create(resources.Workflow.from_dict(diagnose_workflow(name, namespace, pool, **diagnose)))
    driver = Driver(kube, namespace, fails)
    return run_until_terminal(kube, namespace, name, driver), driver


def test_faulty_node_confirmed_and_recorded(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, history: Recorder
) -> None:
    """rack r1 holds the faulty node: its screening fails (and its re-test), r2 passes; with one
    healthy domain there is no inter-domain round, r1's two nodes are confirmed each with a
    healthy r2 node; only the one that fails again is blamed."""
    pool, nodes = two_racks(gpu_nodes)
    faulty = nodes[1]
    recording = history(resources.Workflow, "diag", namespace)
    failing = ("diag-screen-0-iter-1", "diag-confirm-1-iter-2")
    wf, driver = run_diagnosis(kube, namespace, pool, "diag", lambda job, _: job in failing)
    confirmed = "Diagnosis complete: 1 faulty nodes confirmed"
    assert true_condition(wf) == ("Failed", "IterationsFailed", confirmed)
    diagnose = wf["status"]["orchestration"]["diagnose"]
    assert diagnose["stage"] == "complete" and diagnose["round"] == 2 and diagnose["outcome"] == "Faulty"
    assert diagnose["faultyNodes"] == [faulty]
    assert diagnose["screeningResults"] == {
        "r1": {"nodes": nodes[:2], "passed": False},
        "r2": {"nodes": nodes[2:], "passed": True},
    }
    assert sorted(diagnose["healthyNodes"]) == [nodes[0], *nodes[2:]]
    assert "transientFailures" not in diagnose, "both attempts failed: not transient"
    assert sorted(jobs_of(kube, namespace, "diag")) == [
        "diag-confirm-0-iter-2",
        "diag-confirm-1-iter-2",
        "diag-screen-0-iter-1",
        "diag-screen-1-iter-1",
    ]
    groups = wf["status"]["orchestration"]["groups"]
    assert [(g["name"], g["nodes"]) for g in groups] == [
        ("confirm-0", [nodes[0], nodes[2]]),
        ("confirm-1", [nodes[1], nodes[3]]),
    ]
    assert driver.attempts == {
        "diag-screen-0-iter-1": 2,
        "diag-screen-1-iter-1": 1,
        "diag-confirm-0-iter-2": 1,
        "diag-confirm-1-iter-2": 2,
    }, "each failure re-tested once, each pass run once"
    failed, succeeded = node_results(kube, namespace, wf)
    assert [n for n, _ in failed] == [faulty], "a failed round blames no node; the confirmation does"
    assert succeeded == ",".join(n for n in nodes if n != faulty)
    history_rounds = [it["iteration"] for it in wf["status"]["orchestration"]["iterationHistory"]]
    assert history_rounds == [1, 2]
    # Every version: the round's groups belong to the round the diagnose status records.
    for version in recording.versions:
        orchestration = (version.get("status") or {}).get("orchestration") or {}
        if not orchestration.get("diagnose"):
            continue
        round_ = orchestration["diagnose"]["round"]
        names = set(group_phases(version))
        assert names <= ({"screen-0", "screen-1"} if round_ == 1 else {"confirm-0", "confirm-1"}), version


def test_cross_boundary_probing_narrows_a_link_inside_a_rack(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Rack r1's six nodes fail together while its halves pass alone: the mixes of the halves'
    halves narrow the fault to the nodes that fail only together, not the two whole halves."""
    pool = pool_name()
    r1 = pool_nodes(gpu_nodes, 6, pool, labels={"rack": "r1"})
    r2 = pool_nodes(gpu_nodes, 2, pool, labels={"rack": "r2"})
    failing = ("mix-screen-0-iter-1", "mix-cross-0-mix1-iter-3")
    wf, _ = run_diagnosis(kube, namespace, pool, "mix", lambda job, _: job in failing)
    detected = "Diagnosis complete: 1 infrastructure faults detected"
    assert true_condition(wf) == ("Failed", "IterationsFailed", detected)
    diagnose = wf["status"]["orchestration"]["diagnose"]
    assert diagnose["infrastructureFaults"] == [
        {"domain": "r1", "groupA": r1[1:3], "groupB": r1[4:6], "stage": "cross-boundary"}
    ]
    assert diagnose["outcome"] == "Faulty" and "crossBoundaryState" not in diagnose
    groups = wf["status"]["orchestration"]["groups"]
    assert [(g["name"], g["nodes"], g["phase"]) for g in groups] == [
        ("cross-0-mix0", [r1[0], r1[3]], "Succeeded"),
        ("cross-0-mix1", [*r1[1:3], *r1[4:6]], "Failed"),
    ]
    assert sorted(jobs_of(kube, namespace, "mix")) == [
        "mix-bisect-2-0a-iter-2",
        "mix-bisect-2-0b-iter-2",
        "mix-cross-0-mix0-iter-3",
        "mix-cross-0-mix1-iter-3",
        "mix-screen-0-iter-1",
        "mix-screen-1-iter-1",
    ]
    failed, succeeded = node_results(kube, namespace, wf)
    assert failed == [], "a link is no node's fault"
    assert succeeded == ",".join(sorted(r1 + r2))


def test_transient_failure_is_not_blamed_and_max_concurrent_holds(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, history: Recorder
) -> None:
    pool, nodes = two_racks(gpu_nodes)
    recording = history(resources.Workflow, "flaky", namespace)
    wf, _ = run_diagnosis(
        kube,
        namespace,
        pool,
        "flaky",
        lambda job, attempt: job == "flaky-screen-0-iter-1" and attempt == 0,
        execution={"maxConcurrent": 1},
    )
    assert true_condition(wf) == ("Succeeded", "JobCompleted", "All screening passed, no faults detected")
    diagnose = wf["status"]["orchestration"]["diagnose"]
    assert diagnose["outcome"] == "Inconclusive"
    assert diagnose["transientFailures"] == [
        {"round": 1, "group": "screen-0", "nodes": nodes[:2], "stage": "intra-screening"}
    ]
    assert diagnose["round"] == 2 and diagnose["representativeNodes"] == {"r1": nodes[0], "r2": nodes[2]}
    failed, succeeded = node_results(kube, namespace, wf)
    assert failed == [] and succeeded == ",".join(nodes)
    assert "failedNodesRef" not in wf["status"]
    running = [list(group_phases(v).values()).count("Running") for v in recording.versions]
    assert max(running) == 1, "maxConcurrent 1 in every round"


def test_deadline_stops_the_round(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    pool, _ = two_racks(gpu_nodes)
    kube.create(resources.Workflow.from_dict(diagnose_workflow("late", namespace, pool, deadline="1s")))
    wf = wait_true(kube, resources.Workflow, "late", namespace, "Failed", timeout=60)
    assert true_condition(wf) == (
        "Failed",
        "DiagnoseLimitReached",
        "Diagnosis stopped: deadline 1s reached in stage intra-screening; no suspects",
    )
    assert wf["status"]["orchestration"]["diagnose"]["outcome"] == "LimitReached"
    wait_for(lambda: not jobs_of(kube, namespace, "late"), 60, what="the round's Jobs deleted")


def test_killed_manager_and_conflicts_converge(
    kube: Client, namespace: str, gpu_nodes: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """SIGKILLs between writes and a competing writer (a label patch before each step, so the
    manager's status writes meet 409s): the same verdict, no Job made twice."""
    rng = random.Random(14)
    pool, nodes = two_racks(gpu_nodes)
    manager = ManagerProcess(control_plane, tmp_path).start()
    kills = 0
    try:
        kube.create(resources.Workflow.from_dict(diagnose_workflow("chaos", namespace, pool)))
        driver = Driver(
            kube, namespace, lambda job, _: job in ("chaos-screen-0-iter-1", "chaos-confirm-1-iter-2")
        )

        def terminal() -> bool:
            wf = get(kube, resources.Workflow, "chaos", namespace)
            return (true_condition(wf) or ("",))[0] in ("Succeeded", "Failed")

        def version() -> str:
            return str(get(kube, resources.Workflow, "chaos", namespace)["metadata"]["resourceVersion"])

        for step in range(200):
            if terminal():
                break
            kube.patch(
                resources.Workflow,
                "chaos",
                {"metadata": {"labels": {"test.nvcre/step": str(step)}}},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
            kill = kills < 3 or rng.random() < 0.5
            if kill:
                manager.kill()
                kills += 1
            driver.step()
            if kill:
                manager.start()
            before = version()
            wait_for(
                lambda: version() != before or driver.pending() or terminal(),  # noqa: B023
                60,
                what="the manager to write, or a TrainJob to end",
            )
        wf = get(kube, resources.Workflow, "chaos", namespace)
        assert true_condition(wf) == (
            "Failed",
            "IterationsFailed",
            "Diagnosis complete: 1 faulty nodes confirmed",
        ), manager.log_tail()
        assert kills >= 3
        assert wf["status"]["orchestration"]["diagnose"]["faultyNodes"] == [nodes[1]]
        failed, succeeded = node_results(kube, namespace, wf)
        assert [n for n, _ in failed] == [nodes[1]]
        assert succeeded == ",".join(n for n in nodes if n != nodes[1])
        assert sorted(jobs_of(kube, namespace, "chaos")) == [
            "chaos-confirm-0-iter-2",
            "chaos-confirm-1-iter-2",
            "chaos-screen-0-iter-1",
            "chaos-screen-1-iter-1",
        ]
        assert driver.attempts == {
            "chaos-screen-0-iter-1": 2,
            "chaos-screen-1-iter-1": 1,
            "chaos-confirm-0-iter-2": 1,
            "chaos-confirm-1-iter-2": 2,
        }, "no Job or re-test run twice"
    finally:
        manager.stop()
