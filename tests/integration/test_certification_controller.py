"""The Certification controller on the real API server, with kwok GPU nodes.

Categories run one Workflow at a time in spec order; the test plays Kubeflow Trainer and ends
each TrainJob itself (kept: the category order and the restart-at-any-line sweep need each group
to end exactly when the test says). Targets carry a per-test pool label, since nodes are
cluster-wide.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap

from nvcre import resources
from nvcre.naming import certification_workflow_name, job_name
from nvcre.sandbox.faults import Fault
from nvcre.testing.audit import by_manager
from nvcre.testing.builders import Certification, category, new_pool, pool_nodes
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.history import Recorder
from nvcre.testing.inspect import (
    config_map_payload,
    controller_owner,
    events_for,
    failed_nodes_record,
    finish_workflow_jobs,
    get,
    jobs_of,
    kubectl_get,
    trainjob_of,
    true_condition,
    wait_event,
    wait_true,
)
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import POOL_LABEL, complete_measurements, finish_trainjob, pool_name, workflow

ALL_REDUCE = category("communication", "nccl-all-reduce")
LOOPBACK = category("communication", "nccl-loopback")
DCGM = category("diagnostics", "dcgm-level3")


def certification(name: str, namespace: str, pool: str, *categories: dict[str, Any]) -> dict[str, Any]:
    """Its TrainJobs are ended by hand and no pod writes a log in this plane, so the measurements
    are informational (``allowMissingData``): these tests are about the categories' sequencing."""
    return (
        Certification(name).namespace(namespace).pool(pool).allow_missing_data().categories(*categories).obj()
    )


def workflow_name(cert: str, category: dict[str, Any]) -> str:
    return certification_workflow_name(cert, category["domain"], category["variant"])


def workflows_of(kube: Client, namespace: str, cert: str) -> list[str]:
    found = kube.list(
        resources.Workflow, namespace=namespace, labels={"nvcre.nvidia.com/certification": cert}
    )
    return sorted(str(w.metadata.name) for w in found if w.metadata)


def statuses(kube: Client, name: str, namespace: str) -> list[dict[str, Any]]:
    cert = get(kube, resources.Certification, name, namespace)
    return list((cert.get("status") or {}).get("categoryStatuses") or [])


def two_categories(kube: Client, namespace: str, gpu_nodes: Any, name: str) -> tuple[list[str], str, str]:
    """Certification ``name``: all-reduce, then loopback, on a new pool of two nodes; its nodes
    and the names of its two Workflows."""
    pool, nodes = new_pool(gpu_nodes, 2)
    kube.create(resources.Certification.from_dict(certification(name, namespace, pool, ALL_REDUCE, LOOPBACK)))
    return nodes, workflow_name(name, ALL_REDUCE), workflow_name(name, LOOPBACK)


def test_categories_run_one_at_a_time_in_order(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, history: Recorder
) -> None:
    """§13.1: Workflow #2 does not exist until #1 is terminal; §13.2: all succeeded => Succeeded."""
    recording = history(resources.Certification, "seq", namespace)
    nodes, first, second = two_categories(kube, namespace, gpu_nodes, "seq")
    # Truncate("seq-communication-nccl-all-reduce", 31): 25 characters, "-", a 5-character hash
    assert len(first) == 31 and first.startswith("seq-communication-nccl-al-")

    wf = wait_for(
        lambda: get(kube, resources.Workflow, first, namespace), 30, what=first, ignore=(Exception,)
    )
    found = wait_for(lambda: statuses(kube, "seq", namespace), 10, what="categoryStatuses")
    cert = get(kube, resources.Certification, "seq", namespace)
    assert cert["metadata"]["finalizers"] == ["nvcre.nvidia.com/certification-finalizer"]
    assert wf["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "nvcre",
        "nvcre.nvidia.com/certification": "seq",
        "nvcre.nvidia.com/category-domain": "communication",
        "nvcre.nvidia.com/category-variant": "nccl-all-reduce",
    }
    assert controller_owner(wf) == ("Certification", "seq", cert["metadata"]["uid"], True)
    # once the Workflow has written its status, the entry also carries its provenance (test_provenance.py)
    assert [{k: v for k, v in entry.items() if k != "provenance"} for entry in found] == [
        {
            "domain": "communication",
            "variant": "nccl-all-reduce",
            "status": "InProgress",
            "workflowRef": {"name": first, "namespace": namespace},
        },
        {"domain": "communication", "variant": "nccl-loopback", "status": "Pending"},
    ]
    condition = true_condition(cert)
    assert condition is not None and condition[:2] in (
        ("InProgress", "WorkflowCreated"),
        ("InProgress", "WorkflowRunning"),
    )
    wait_event(
        kube,
        namespace,
        "seq",
        "Certification",
        ("Normal", "WorkflowCreated", "Created Workflow for category communication/nccl-all-reduce (1 of 2)"),
    )

    # the one Job of category 1 runs; category 2 has no Workflow for as long as it does
    wait_for(lambda: jobs_of(kube, namespace, first) or None, 30, what="the Job of category 1")
    wait_for(
        lambda: (
            true_condition(get(kube, resources.Certification, "seq", namespace))
            == ("InProgress", "WorkflowRunning", "Certification in progress")
        ),
        30,
        what="the Certification to follow the running Workflow of category 1",
    )
    assert workflows_of(kube, namespace, "seq") == [first]

    finish_workflow_jobs(kube, namespace, first, 1)
    wait_for(lambda: second in workflows_of(kube, namespace, "seq"), 30, what="the Workflow of category 2")
    assert statuses(kube, "seq", namespace)[0]["status"] == "Succeeded"
    finish_workflow_jobs(kube, namespace, second, len(nodes))

    cert = wait_true(kube, resources.Certification, "seq", namespace, "Succeeded", timeout=90)
    assert true_condition(cert) == (
        "Succeeded",
        "AllWorkflowsSucceeded",
        "All certification categories completed successfully",
    )
    final = cert["status"]["categoryStatuses"]
    assert [s["status"] for s in final] == ["Succeeded", "Succeeded"]
    for entry, name in zip(final, (first, second), strict=True):
        wf = get(kube, resources.Workflow, name, namespace)
        assert entry["succeededNodesRef"] == wf["status"]["succeededNodesRef"]
        payload = config_map_payload(
            kube, namespace, entry["succeededNodesRef"]["name"], "succeeded-nodes.csv.gz"
        )
        assert payload.decode() == ",".join(nodes)
    wait_event(
        kube,
        namespace,
        "seq",
        "Certification",
        ("Normal", "AllWorkflowsSucceeded", "All certification categories completed successfully"),
    )

    for version in recording.versions:
        found = [c["status"] for c in (version.get("status") or {}).get("categoryStatuses") or ()]
        assert found[1:] in ([], ["Pending"]) or found[0] in ("Succeeded", "Failed"), (
            f"category 2 started before category 1 ended: {found}"
        )

    # ordered teardown: the Certification waits for its Workflows to be gone
    kube.delete(resources.Certification, "seq", namespace=namespace)
    wait_for(
        lambda: (
            not workflows_of(kube, namespace, "seq")
            and not list(kube.list(resources.Certification, namespace=namespace))
        ),
        90,
        what="the Workflows, then the Certification, to be gone",
    )
    assert not list(kube.list(resources.Job, namespace=namespace))
    assert not list(kube.list(resources.TrainJob, namespace=namespace))


def test_a_failed_node_fails_its_category_and_later_ones_still_run(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, run_pod: Any
) -> None:
    """Three categories on 16 H100 nodes on aws; one node's workload fails in the second."""
    pool, nodes = new_pool(gpu_nodes, 16, platform="aws", product="NVIDIA-H100-80GB-HBM3")
    kube.create(
        resources.Certification.from_dict(certification("trio", namespace, pool, ALL_REDUCE, DCGM, LOOPBACK))
    )
    first, second, third = (workflow_name("trio", c) for c in (ALL_REDUCE, DCGM, LOOPBACK))

    wait_for(lambda: first in workflows_of(kube, namespace, "trio"), 30, what=first)
    assert finish_workflow_jobs(kube, namespace, first, 1) == [f"{first}-job"], "one Job of all 16 nodes"

    wait_for(lambda: second in workflows_of(kube, namespace, "trio"), 60, what=second)
    assert third not in workflows_of(kube, namespace, "trio")
    # dcgm runs one single-node Job per node: fail exactly one of them

    def sixteen() -> dict[str, dict[str, Any]] | None:
        found = jobs_of(kube, namespace, second)
        return found if len(found) == 16 else None

    jobs = wait_for(sixteen, 60, what="16 single-node Jobs")
    victim_job = job_name(second, "group-5", 1, single=False)
    (victim,) = jobs[victim_job]["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"].split(",")
    assert victim == nodes[5]
    # each node's dcgmi diag prints its report; an XID 79 on the victim's GPU 0 fails a test
    for name in jobs:
        trainjob_of(kube, namespace, name)
        run_pod(namespace, f"{name}-workload", [Fault("xid", victim, 79.0)] if name == victim_job else [])
    finish_workflow_jobs(kube, namespace, second, 16, failing=frozenset({victim_job}))

    wait_for(lambda: third in workflows_of(kube, namespace, "trio"), 60, what=third)
    failed_wf = get(kube, resources.Workflow, second, namespace)
    assert true_condition(failed_wf) == ("Failed", "IterationsFailed", "1 groups failed across 1 iterations")
    finish_workflow_jobs(kube, namespace, third, 16)

    cert = wait_true(kube, resources.Certification, "trio", namespace, "Failed", timeout=120)
    assert true_condition(cert) == ("Failed", "WorkflowFailed", "One or more certification categories failed")
    final = cert["status"]["categoryStatuses"]
    assert [(s["variant"], s["status"]) for s in final] == [
        ("nccl-all-reduce", "Succeeded"),
        ("dcgm-level3", "Failed"),
        ("nccl-loopback", "Succeeded"),
    ], "the third category ran although the second failed"
    ref = final[1]["failedNodesRef"]
    assert ref == failed_wf["status"]["failedNodesRef"]
    entries = failed_nodes_record(kube, namespace, ref["name"])
    assert [e["name"] for e in entries] == [victim]
    assert entries[0]["reason"] == "WorkloadFailed"
    assert re.fullmatch(
        r"Workload TrainJob/\S+ failed: jobset failed: dcgmi diag level 3: 1 of 8 tests failed: "
        r"\w+ on GPU 0 \(Detected XID 79 for GPU 0 Please consult the documentation for details of this XID\.\)",
        entries[0]["message"],
    ), "the test that the XID failed and the GPU, as the node's dcgmi report names them"
    survivors = config_map_payload(
        kube, namespace, final[1]["succeededNodesRef"]["name"], "succeeded-nodes.csv.gz"
    )
    assert survivors.decode().split(",") == [n for n in nodes if n != victim]
    events = wait_event(
        kube,
        namespace,
        "trio",
        "Certification",
        ("Warning", "WorkflowFailed", "One or more certification categories failed"),
    )
    assert [e for e in events if e[1] == "WorkflowCreated"] == [
        ("Normal", "WorkflowCreated", "Created Workflow for category communication/nccl-all-reduce (1 of 3)")
    ], "one transition event: later categories change the message, not the condition"


def test_kubectl_get_shows_the_state_the_running_category_and_the_failed_one(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """The printer columns, as ``kubectl get`` asks for them (a Table the API server renders)."""
    nodes, first, second = two_categories(kube, namespace, gpu_nodes, "shown")
    wait_for(lambda: jobs_of(kube, namespace, first), 30, what=f"the Job of {first}")
    wait_true(kube, resources.Certification, "shown", namespace, "InProgress")

    running = kubectl_get(kube, resources.Certification, namespace)["shown"]
    assert {
        k: running[k] for k in ("NAME", "STATUS", "PROGRESS", "RUNNING", "FAILED-CATEGORY", "FAILED-NODES")
    } == {
        "NAME": "shown",
        "STATUS": "InProgress",
        "PROGRESS": "0/2",
        "RUNNING": "nccl-all-reduce",
        "FAILED-CATEGORY": None,
        "FAILED-NODES": 0,
    }
    assert running["REASON"] and re.fullmatch(r"\d+s", running["AGE"])
    assert list(running) == [
        *("NAME", "STATUS", "REASON", "PROGRESS", "RUNNING", "FAILED-CATEGORY", "FAILED-NODES", "AGE")
    ]
    workflow = wait_for(
        lambda: (
            (w := kubectl_get(kube, resources.Workflow, namespace, wide=True).get(first))
            and w["GROUPS"]
            and w
        ),
        30,
        what=f"{first} partitioned",
    )
    assert {k: workflow[k] for k in ("STATUS", "NODES", "GROUPS", "NODES/JOB", "ITERATION")} == {
        "STATUS": "InProgress",
        "NODES": 2,
        "GROUPS": 1,
        "NODES/JOB": 2,
        "ITERATION": 1,
    }
    job = wait_for(
        lambda: (
            (j := kubectl_get(kube, resources.Job, namespace, wide=True).get(f"{first}-job"))
            and j["STATUS"]
            and j
        ),
        30,
        what=f"{first}-job started",
    )
    assert {k: job[k] for k in ("STATUS", "GROUP", "NODES", "WORKFLOW")} == {
        "STATUS": "InProgress",
        "GROUP": "group-0",
        "NODES": 2,
        "WORKFLOW": first,
    }

    finish_workflow_jobs(kube, namespace, first, 1, failing=frozenset({f"{first}-job"}))
    wait_for(lambda: second in workflows_of(kube, namespace, "shown"), 60, what=second)
    # loopback: a Job per node; its first node fails again, in a second category
    finish_workflow_jobs(
        kube, namespace, second, len(nodes), failing=frozenset({job_name(second, "group-0", 1, single=False)})
    )
    wait_true(kube, resources.Certification, "shown", namespace, "Failed", timeout=120)
    done = kubectl_get(kube, resources.Certification, namespace, wide=True)["shown"]
    assert {k: v for k, v in done.items() if k != "AGE"} == {
        "NAME": "shown",
        "STATUS": "Failed",
        "REASON": "WorkflowFailed",
        "PROGRESS": "2/2",
        "RUNNING": None,
        "FAILED-CATEGORY": "nccl-all-reduce",
        "FAILED-NODES": len(nodes),  # 2 + 1 failed, one node in both: each counted once
        "MESSAGE": "One or more certification categories failed",
    }
    workflows = kubectl_get(kube, resources.Workflow, namespace)
    assert (workflows[first]["STATUS"], workflows[second]["STATUS"]) == ("Failed", "Failed")
    assert (workflows[first]["FAILED-NODES"], workflows[second]["FAILED-NODES"]) == (len(nodes), 1)
    assert kubectl_get(kube, resources.Job, namespace)[f"{first}-job"]["STATUS"] == "Failed"


def test_waits_for_nodes_then_starts(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    """§13.8: no matching node => InProgress/WaitingForNodes (not Failed), until nodes come."""
    pool = pool_name()
    kube.create(resources.Certification.from_dict(certification("waits", namespace, pool, ALL_REDUCE)))
    cert = wait_true(kube, resources.Certification, "waits", namespace, "InProgress")
    condition = true_condition(cert)
    assert condition is not None and condition[1] == "WaitingForNodes"
    assert re.fullmatch(
        rf"No schedulable nodes match {POOL_LABEL}={pool}; retrying for up to 4m[0-9]+s more\. "
        r"Nodes that are cordoned or unschedulable do not count\.",
        condition[2],
    ), condition[2]
    assert cert["status"]["categoryStatuses"] == [
        {"domain": "communication", "variant": "nccl-all-reduce", "status": "Pending"}
    ]
    assert not workflows_of(kube, namespace, "waits")

    pool_nodes(gpu_nodes, 2, pool)
    name = workflow_name("waits", ALL_REDUCE)
    wait_for(lambda: name in workflows_of(kube, namespace, "waits"), 10, what="the Workflow once nodes exist")
    cert = wait_for(
        lambda: (
            (c := get(kube, resources.Certification, "waits", namespace))
            and (true_condition(c) or ("", "", ""))[1] != "WaitingForNodes"
            and c
        ),
        10,
        what="the wait to end",
    )
    assert cert["status"]["categoryStatuses"][0]["status"] == "InProgress"


def test_unknown_category_fails(kube: Client, namespace: str, manager: Any) -> None:
    bogus = {"domain": "communication", "variant": "nccl-telepathy"}
    kube.create(
        resources.Certification.from_dict(certification("unknown", namespace, pool_name(), ALL_REDUCE, bogus))
    )
    cert = wait_true(kube, resources.Certification, "unknown", namespace, "Failed")
    assert true_condition(cert) == (
        "Failed",
        "CategoryNotFound",
        "Unknown certification category: communication/nccl-telepathy",
    )
    assert not workflows_of(kube, namespace, "unknown"), "nothing runs when a category is unknown"


def test_foreign_workflow_is_never_adopted(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    name = workflow_name("clash", ALL_REDUCE)
    kube.create(resources.Workflow.from_dict(workflow(name, namespace, "nobody", 1)))
    kube.create(resources.Certification.from_dict(certification("clash", namespace, pool, ALL_REDUCE)))
    cert = wait_true(kube, resources.Certification, "clash", namespace, "Failed")
    assert true_condition(cert) == (
        "Failed",
        "WorkflowNameCollision",
        f'Workflow "{name}" already exists in namespace "{namespace}" and is not controlled by '
        'Certification "clash"; refusing to adopt it',
    )
    assert "ownerReferences" not in get(kube, resources.Workflow, name, namespace)["metadata"]
    # deleting the Certification leaves the foreign Workflow alone
    kube.delete(resources.Certification, "clash", namespace=namespace)
    wait_for(
        lambda: not list(kube.list(resources.Certification, namespace=namespace)),
        30,
        what="the Certification to go",
    )
    assert get(kube, resources.Workflow, name, namespace)


def test_restart_safety_from_the_top(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, manager: Any, run_pod: Any
) -> None:
    """SIGKILL the manager at several points of a Certification: same result, nothing duplicated.

    Tests run one at a time against the one session manager, so this test crashes and restarts
    that same process: at no moment do two managers write (no leader election needed).
    """
    pool, nodes = new_pool(gpu_nodes, 6)
    kube.create(
        resources.Certification.from_dict(certification("crash", namespace, pool, LOOPBACK, ALL_REDUCE, DCGM))
    )
    first, second, third = (workflow_name("crash", c) for c in (LOOPBACK, ALL_REDUCE, DCGM))
    victim_job = job_name(first, "group-2", 1, single=False)

    def crash_and_restart() -> None:
        manager.kill()
        manager.start()

    try:
        # 1. killed while the first category's six Jobs run; three of them end while it is down
        wait_for(lambda: len(jobs_of(kube, namespace, first)) == 6, 60, what="six Jobs of category 1")
        jobs = sorted(jobs_of(kube, namespace, first))
        for name in jobs:
            trainjob_of(kube, namespace, name)
        manager.kill()
        for name in jobs[:3]:
            # their measurements may not exist yet: completed once the manager is back
            finish_trainjob(
                kube, namespace, f"{name}-workload", succeeded=name != victim_job, measurements=False
            )
        manager.start()
        for name in jobs[:3]:
            if name != victim_job:
                complete_measurements(kube, namespace, name)
        # 2. killed right after the rest end: mid-way through failing the Workflow and advancing
        for name in jobs[3:]:
            finish_trainjob(kube, namespace, f"{name}-workload", succeeded=name != victim_job)
        wait_for(
            lambda: all(
                (true_condition(get(kube, resources.Job, name, namespace)) or ("",))[0]
                in ("Succeeded", "Failed")
                for name in jobs[3:]
            ),
            30,
            what="the last three Jobs to take their ends in",
        )
        crash_and_restart()
        # 3. killed as soon as the second Workflow exists (its status write may not have happened)
        wait_for(lambda: second in workflows_of(kube, namespace, "crash"), 60, what=second)
        crash_and_restart()
        finish_workflow_jobs(kube, namespace, second, 1)
        wait_for(lambda: third in workflows_of(kube, namespace, "crash"), 60, what=third)
        wait_for(lambda: len(jobs_of(kube, namespace, third)) == 6, 60, what="six Jobs of category 3")
        crash_and_restart()
        for name in jobs_of(kube, namespace, third):  # each node's dcgmi diag prints a passing report
            trainjob_of(kube, namespace, name)
            run_pod(namespace, f"{name}-workload")
        finish_workflow_jobs(kube, namespace, third, 6)
        cert = wait_true(kube, resources.Certification, "crash", namespace, "Failed", timeout=120)
    finally:
        if not manager.running():
            manager.start()

    assert true_condition(cert) == ("Failed", "WorkflowFailed", "One or more certification categories failed")
    final = cert["status"]["categoryStatuses"]
    assert [s["status"] for s in final] == ["Failed", "Succeeded", "Succeeded"]
    entries = failed_nodes_record(kube, namespace, final[0]["failedNodesRef"]["name"])
    assert [(e["name"], e["reason"]) for e in entries] == [(nodes[2], "WorkloadFailed")]

    # nothing was created twice
    assert workflows_of(kube, namespace, "crash") == sorted([first, second, third])
    all_jobs = sorted(
        str(j.metadata.name) for j in kube.list(resources.Job, namespace=namespace) if j.metadata
    )
    assert len(all_jobs) == 13 == len(set(all_jobs))
    for wf, count in ((first, 6), (second, 1), (third, 6)):
        assert len(jobs_of(kube, namespace, wf)) == count
    created = Counter(
        str(e["objectRef"]["name"])
        for e in by_manager(control_plane.audit_events())
        if e["verb"] == "create"
        and e["objectRef"].get("resource") == "trainjobs"
        and e["objectRef"].get("namespace") == namespace
        and (e.get("responseStatus") or {}).get("code") == 201
    )
    # Each Job's TrainJob existed: the test ended every one. No TrainJob was created twice, and
    # none but the Jobs' own. (A create the SIGKILL cut short can make its TrainJob without a 201
    # in the audit log, so "every Job's create answered 201" is not what a kill leaves behind.)
    assert set(created) <= {f"{j}-workload" for j in all_jobs}, created
    assert set(created.values()) == {1}, f"a TrainJob created twice: {created}"
    trainjobs = [t for t in kube.list(resources.TrainJob, namespace=namespace) if t.metadata]
    assert trainjobs == [], "the ended Certification released every TrainJob"
    results = sorted(
        str(c.metadata.name)
        for c in kube.list(ConfigMap, namespace=namespace)
        if c.metadata and str(c.metadata.name).startswith(("succeeded-nodes-", "failed-nodes-"))
    )
    uids = {
        get(kube, resources.Workflow, w, namespace)["metadata"]["uid"][:8] for w in (first, second, third)
    }
    assert results == sorted(
        [f"failed-nodes-{get(kube, resources.Workflow, first, namespace)['metadata']['uid'][:8]}"]
        + [f"succeeded-nodes-{u}" for u in uids]
    )
    events = wait_event(
        kube,
        namespace,
        "crash",
        "Certification",
        ("Warning", "WorkflowFailed", "One or more certification categories failed"),
    )
    created = [e for e in events if e[1] == "WorkflowCreated"]
    assert len(created) == 1, created


def test_a_deleted_workflow_fails_its_category_and_the_next_one_runs(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    nodes, first, second = two_categories(kube, namespace, gpu_nodes, "lost")
    wait_for(lambda: jobs_of(kube, namespace, first) or None, 60, what="the Job of category 1")
    kube.delete(resources.Workflow, first, namespace=namespace)
    wait_for(lambda: second in workflows_of(kube, namespace, "lost"), 60, what="category 2 to start")
    assert statuses(kube, "lost", namespace)[0]["status"] == "Failed"
    finish_workflow_jobs(kube, namespace, second, len(nodes))
    cert = wait_true(kube, resources.Certification, "lost", namespace, "Failed", timeout=90)
    assert true_condition(cert) == ("Failed", "WorkflowFailed", "One or more certification categories failed")
    assert [s["status"] for s in cert["status"]["categoryStatuses"]] == ["Failed", "Succeeded"]


def test_a_stale_failure_is_recovered(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    """§2.6: a finished Certification whose failed category's Workflow still runs resumes it."""
    pool, _ = new_pool(gpu_nodes, 2)
    kube.create(resources.Certification.from_dict(certification("stale", namespace, pool, ALL_REDUCE)))
    name = workflow_name("stale", ALL_REDUCE)
    wait_for(lambda: jobs_of(kube, namespace, name) or None, 60, what="the Job")
    wait_for(lambda: statuses(kube, "stale", namespace)[0]["status"] == "InProgress", 10, what="InProgress")

    # record a failure that is not true (the category's Workflow is still running) while the
    # manager is down, so that no reconcile in flight overwrites it
    manager.stop()
    try:
        live = get(kube, resources.Certification, "stale", namespace)
        live["status"]["categoryStatuses"][0]["status"] = "Failed"
        for c in live["status"]["conditions"]:
            c["status"] = "True" if c["type"] == "Failed" else "False"
            c["reason"] = "WorkflowFailed" if c["type"] == "Failed" else "NotApplicable"
        kube.replace(resources.Certification.Status.from_dict(live), "stale", namespace=namespace)
    finally:
        manager.start()

    wait_for(
        lambda: (
            ("Normal", "WorkflowRunning", "Recovered: Workflow still running")
            in events_for(kube, namespace, "stale", "Certification")
        ),
        30,
        what="the recovery",
    )
    assert statuses(kube, "stale", namespace)[0]["status"] == "InProgress"
    finish_workflow_jobs(kube, namespace, name, 1)
    cert = wait_true(kube, resources.Certification, "stale", namespace, "Succeeded", timeout=60)
    assert cert["status"]["categoryStatuses"][0]["status"] == "Succeeded"


def test_a_category_listed_twice_with_its_own_options_runs_twice(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """The second entry's options are in its Workflow's name: each entry runs its own Workflow
    and reports its own result."""
    pool, _ = new_pool(gpu_nodes, 1)
    again = category("communication", "nccl-all-reduce", nodesPerJob=1, numIterations=1)
    kube.create(resources.Certification.from_dict(certification("twice", namespace, pool, ALL_REDUCE, again)))
    first = certification_workflow_name("twice", "communication", "nccl-all-reduce")
    second = certification_workflow_name("twice", "communication", "nccl-all-reduce", "-n1")
    assert (first, second) == ("twice-communication-nccl-f8587", "twice-communication-nccl-66276")
    finish_workflow_jobs(kube, namespace, first, 1)
    finish_workflow_jobs(kube, namespace, second, 1)
    cert = wait_true(kube, resources.Certification, "twice", namespace, "Succeeded", timeout=60)
    assert [(s["status"], s["workflowRef"]["name"]) for s in cert["status"]["categoryStatuses"]] == [
        ("Succeeded", first),
        ("Succeeded", second),
    ]
    assert workflows_of(kube, namespace, "twice") == sorted([first, second])


def test_a_category_listed_twice_alike_is_refused_before_anything_runs(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Options that are not in the name (numIterations) cannot tell the two runs apart."""
    pool, _ = new_pool(gpu_nodes, 1)
    again = category("communication", "nccl-all-reduce", numIterations=5)
    kube.create(resources.Certification.from_dict(certification("alike", namespace, pool, ALL_REDUCE, again)))
    cert = wait_true(kube, resources.Certification, "alike", namespace, "Failed")
    assert true_condition(cert) == (
        "Failed",
        "WorkflowNameCollision",
        "categories communication/nccl-all-reduce (spec.categories[0]) and communication/nccl-all-reduce "
        '(spec.categories[1]) would both run as Workflow "alike-communication-nccl-c055e"; a category '
        "listed twice needs its own options that tell the runs apart (spec.categories[1].options: "
        "nodesPerJob, enableMNNVL, testScale, enableCheckpoint, maxSteps, exitDurationMins, gpusPerNode)",
    )
    assert not workflows_of(kube, namespace, "alike"), (
        "nothing runs when two categories would share a Workflow"
    )
