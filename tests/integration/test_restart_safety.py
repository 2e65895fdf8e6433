"""Kill the manager (SIGKILL) again and again during a multi-group Workflow: it converges to
the same result an uninterrupted run gives, with no duplicate Job, TrainJob or ConfigMap.
TrainJobs are ended by hand, so the kills land between exact writes (the sandbox cannot aim them)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap

from nvcre import resources
from nvcre.testing.builders import new_pool
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import (
    config_map_payload,
    failed_nodes_record,
    get,
    jobs_of,
    true_condition,
    workflow_status,
)
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import finish_trainjob, workflow

EXPECTED_JOBS = [
    *(f"chaos-group-{i}-iter-1" for i in range(4)),
    # isolation: each member of the failed group-1 re-tested with a node of a passing group
    *(f"chaos-isolate-{i}-iter-1" for i in range(2)),
]
FAILING = ("group-1", "isolate-0")
"""The workloads that fail: group-1, and the re-test of its first node (the second passes)."""
MAX_STEPS = 200


def test_killed_manager_converges_without_duplicates(
    kube: Client, namespace: str, gpu_nodes: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    rng = random.Random(7)
    pool, nodes = new_pool(gpu_nodes, 8)
    manager = ManagerProcess(control_plane, tmp_path).start()
    kills = 0
    try:
        kube.create(
            resources.Workflow.from_dict(
                workflow("chaos", namespace, pool, 2, orchestration={"execution": {"maxConcurrent": 2}})
            )
        )
        seen_jobs: dict[str, str] = {}
        seen_trainjobs: dict[str, str] = {}
        finished: set[str] = set()

        def check_and_finish() -> None:
            for name, job in jobs_of(kube, namespace, "chaos").items():
                assert seen_jobs.setdefault(name, job["metadata"]["uid"]) == job["metadata"]["uid"], (
                    f"Job {name} was recreated"
                )
            for trainjob in kube.list(resources.TrainJob, namespace=namespace):
                name, uid = trainjob.metadata.name, trainjob.metadata.uid
                assert seen_trainjobs.setdefault(name, uid) == uid, f"TrainJob {name} was recreated"
                if name not in finished:
                    failing = any(f"-{tag}-" in name for tag in FAILING)
                    finish_trainjob(kube, namespace, name, succeeded=not failing)
                    finished.add(name)

        def terminal() -> bool:
            wf = get(kube, resources.Workflow, "chaos", namespace)
            return (true_condition(wf) or ("",))[0] in ("Succeeded", "Failed")

        def written() -> tuple[Any, ...]:
            """What only the manager writes: the Workflow's and every Job's version, the TrainJobs."""
            jobs = jobs_of(kube, namespace, "chaos")
            return (
                get(kube, resources.Workflow, "chaos", namespace)["metadata"]["resourceVersion"],
                sorted((name, job["metadata"]["resourceVersion"]) for name, job in jobs.items()),
                sorted(t.metadata.name for t in kube.list(resources.TrainJob, namespace=namespace)),
            )

        def moved_on(before: tuple[Any, ...]) -> bool:
            now = written()
            return now != before or not set(now[2]) <= finished or terminal()

        # Each step waits for the manager to write something new, then maybe kills it (at once in
        # the first steps), ends the workloads that appeared (while it is down, if killed) and
        # starts it again: the kill points follow the run's progress, not a clock.
        for _ in range(MAX_STEPS):
            if terminal():
                break
            kill = kills < 3 or rng.random() < 0.5 or not manager.running()
            if kill:
                manager.kill()
                kills += 1
            check_and_finish()
            if kill:
                manager.start()
            before = written()
            wait_for(lambda: moved_on(before), 60, what="the manager to write something new")  # noqa: B023
        check_and_finish()
        wf = get(kube, resources.Workflow, "chaos", namespace)
        assert true_condition(wf) == (
            "Failed",
            "IterationsFailed",
            "1 groups failed across 1 iterations; Isolation complete: 1 nodes failed again with healthy "
            "partners, 1 cleared",
        ), manager.log_tail()
        assert kills >= 3
        assert sorted(jobs_of(kube, namespace, "chaos")) == EXPECTED_JOBS
        assert sorted(seen_jobs) == EXPECTED_JOBS
        assert sorted(seen_trainjobs) == sorted(f"{j}-workload" for j in EXPECTED_JOBS), (
            "one each, never again"
        )
        wait_for(
            lambda: not list(kube.list(resources.TrainJob, namespace=namespace)),
            60,
            what="the ended Workflow to release every TrainJob",
        )
        uid8 = wf["metadata"]["uid"][:8]
        config_maps = sorted(
            c.metadata.name
            for c in kube.list(ConfigMap, namespace=namespace)
            if c.metadata.name != "kube-root-ca.crt"
        )
        assert config_maps == [f"failed-nodes-{uid8}", f"succeeded-nodes-{uid8}"]
        succeeded = config_map_payload(
            kube, namespace, f"succeeded-nodes-{uid8}", "succeeded-nodes.csv.gz"
        ).decode()
        assert succeeded == ",".join(sorted([*nodes[:2], nodes[3], *nodes[4:]]))
        failed = failed_nodes_record(kube, namespace, f"failed-nodes-{uid8}")
        assert [(e["name"], e["reason"]) for e in failed] == [(nodes[2], "WorkloadFailed")]
        assert failed[0]["message"].endswith(f"(re-tested with healthy partner {nodes[0]})"), failed
        groups = workflow_status(kube, namespace, "chaos")["orchestration"]["groups"]
        assert [g["phase"] for g in groups] == ["Succeeded", "Failed", "Succeeded", "Succeeded"]
        assert not workflow_status(kube, namespace, "chaos").get("dependencyRefs"), (
            "every runtime copy was cleaned up"
        )
        assert not list(kube.list(resources.TrainingRuntime, namespace=namespace))
    finally:
        manager.stop()
