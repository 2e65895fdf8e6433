"""A run keeps its promises, on the real API server with kwok GPU nodes: a run whose target resolves
to more nodes than its limit (``spec.maxNodes``, else the manager's ``--max-nodes-per-run``) is
refused before any Workflow exists, and a run past its ``spec.deadline`` stops what runs, starts
nothing more and ends Failed with what it judged before.

This module runs its own manager with ``--max-nodes-per-run=3`` (it replaces the shared
``manager`` fixture, so no other manager runs meanwhile). The test plays Kubeflow Trainer: it ends
the TrainJobs that must finish before the deadline and leaves the others running.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from lightkube import Client

from nvcre import resources
from nvcre.api.v1alpha1.meta import format_time, parse_time
from nvcre.cli.main import cli
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import Certification, WorkloadRun, category, new_pool
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_job, get, jobs_of, true_condition, wait_true
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess, running_manager
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name
from nvcre.testing.workloads import workflow as workflow_doc

LIMIT = 3
ALL_REDUCE = category("communication", "nccl-all-reduce")
LOOPBACK = category("communication", "nccl-loopback")
DCGM = category("diagnostics", "dcgm-level3")
MPI = {"mpi": {"mpirunPath": "/usr/local/mpi/bin/mpirun", "binary": "/usr/local/bin/all_reduce_perf_mpi"}}


@pytest.fixture(scope="module")
def manager(
    control_plane: ControlPlane, kwok: Kwok, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagerProcess]:
    yield from running_manager(
        control_plane, tmp_path_factory.mktemp("limits"), f"--max-nodes-per-run={LIMIT}", name="limits"
    )


def certification(name: str, namespace: str, pool: str, *categories: dict[str, Any], **spec: Any) -> Any:
    """TrainJobs are ended by hand and no pod writes a log here: measurements are informational."""
    cert = Certification(name).namespace(namespace).pool(pool).allow_missing_data().spec(**spec)
    return resources.Certification.from_dict(cert.categories(*categories).obj())


def workload_run(name: str, namespace: str, pool: str, num_nodes: int, **spec: Any) -> Any:
    run = WorkloadRun(name).namespace(namespace).framework(MPI).nodes(num_nodes).pool(pool).spec(**spec)
    return resources.WorkloadRun.from_dict(run.obj())


def nothing_created(kube: Client, namespace: str) -> None:
    for kind in (resources.Workflow, resources.Job, resources.TrainJob):
        assert not list(kube.list(kind, namespace=namespace)), kind


def refused_as_too_large(
    kube: Client, resource: Any, name: str, namespace: str, message: str
) -> dict[str, Any]:
    """Wait for the run ``name`` to fail as TooManyNodes with ``message``; the failed object."""
    failed = wait_true(kube, resource, name, namespace, "Failed", timeout=30)
    assert true_condition(failed) == ("Failed", "TooManyNodes", message)
    return failed


def deadline_message(run: dict[str, Any], deadline: str, seconds: int) -> str:
    at = format_time(parse_time(run["metadata"]["creationTimestamp"]) + timedelta(seconds=seconds))
    return (
        f"The run's deadline ({deadline}, spec.deadline) passed at {at}: nothing more starts and what "
        "was running is stopped; what was judged before keeps its result"
    )


def running_trainjobs(kube: Client, namespace: str, jobs: list[str]) -> list[str]:
    """The TrainJobs of ``jobs`` that still exist."""
    names = {f"{job}-workload" for job in jobs}
    found = kube.list(resources.TrainJob, namespace=namespace)
    return sorted(str(t.metadata.name) for t in found if t.metadata and t.metadata.name in names)


def test_a_certification_over_the_managers_node_limit_is_refused_before_any_workflow(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane
) -> None:
    pool, _ = new_pool(gpu_nodes, LIMIT + 1)
    kube.create(certification("big", namespace, pool, ALL_REDUCE))
    limit = (
        "the target resolves to 4 nodes, more than the run's limit of 3 (the manager's --max-nodes-per-run)"
    )
    failed = refused_as_too_large(kube, resources.Certification, "big", namespace, limit)
    assert [s["status"] for s in failed["status"]["categoryStatuses"]] == ["Pending"]
    nothing_created(kube, namespace)

    report = CliRunner().invoke(
        cli,
        [
            "certification",
            "report",
            "big",
            "-n",
            namespace,
            "--kubeconfig",
            str(control_plane.kubeconfig_path),
        ],
    )
    assert report.exit_code == 1, (report.output, report.exception)
    summary = report.stdout[report.stdout.index("│  Summary") :]
    assert "│  Stopped:      TooManyNodes " in summary
    assert "│                the target resolves to 4 nodes, more than the   │" in summary
    assert "│                --max-nodes-per-run)" in summary


def test_a_certifications_own_limit_wins_over_the_managers(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    kube.create(certification("small", namespace, pool, ALL_REDUCE, maxNodes=1))
    limit = "the target resolves to 2 nodes, more than the run's limit of 1 (spec.maxNodes)"
    refused_as_too_large(kube, resources.Certification, "small", namespace, limit)
    nothing_created(kube, namespace)


def test_a_workloadrun_over_its_node_limit_is_refused_and_one_within_it_runs(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, LIMIT + 1)
    kube.create(workload_run("over", namespace, pool, 1, maxNodes=2))
    limit = "the target resolves to 4 nodes, more than the run's limit of 2 (spec.maxNodes)"
    refused_as_too_large(kube, resources.WorkloadRun, "over", namespace, limit)
    nothing_created(kube, namespace)

    # spec.maxNodes above the manager's limit wins: the same 4 nodes run
    kube.create(workload_run("within", namespace, pool, 1, maxNodes=LIMIT + 1))
    running = wait_true(kube, resources.WorkloadRun, "within", namespace, "InProgress", timeout=30)
    assert true_condition(running) == ("InProgress", "WorkflowCreated", "Workflow within created")
    wait_for(lambda: len(jobs_of(kube, namespace, "within")) == LIMIT + 1 or None, 60, what="4 Jobs")


def test_a_workflow_keeps_its_runs_limit_at_its_own_discovery(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """A node that joins the target after the run counted it still counts: the Workflow checks
    the limit it carries again when it discovers its nodes."""
    pool, _ = new_pool(gpu_nodes, 2)
    doc = workflow_doc("grown", namespace, pool, 1, orchestration={"maxNodes": 1})
    kube.create(resources.Workflow.from_dict(doc))
    limit = "the target resolves to 2 nodes, more than the run's limit of 1 (spec.orchestration.maxNodes)"
    refused_as_too_large(kube, resources.Workflow, "grown", namespace, limit)
    assert not list(kube.list(resources.Job, namespace=namespace))


def test_a_certification_past_its_deadline_stops_and_keeps_what_was_judged(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Category 1 is judged before the deadline, category 2 runs at it (stopped: its Jobs and
    TrainJobs go), category 3 never starts; the report still shows category 1's result."""
    pool, _ = new_pool(gpu_nodes, 2)
    kube.create(certification("late", namespace, pool, ALL_REDUCE, LOOPBACK, DCGM, deadline="45s"))
    first, second, third = (
        certification_workflow_name("late", c["domain"], c["variant"]) for c in (ALL_REDUCE, LOOPBACK, DCGM)
    )
    workflow = wait_for(
        lambda: get(kube, resources.Workflow, first, namespace), 30, what=first, ignore=(Exception,)
    )
    cert = get(kube, resources.Certification, "late", namespace)
    expected = deadline_message(cert, "45s", 45)
    created = parse_time(cert["metadata"]["creationTimestamp"])
    stop = (
        f"Deadline {format_time(created + timedelta(seconds=45))} passed: 0 of 2 groups judged; "
        "running groups stopped, not judged: group-0, group-1"
    )
    promises = {k: workflow["spec"]["orchestration"].get(k) for k in ("deadlineTime", "maxNodes")}
    assert promises == {"deadlineTime": format_time(created + timedelta(seconds=45)), "maxNodes": LIMIT}

    (judged,) = wait_for(lambda: sorted(jobs_of(kube, namespace, first)) or None, 30, what="category 1's Job")
    finish_job(kube, namespace, judged)
    stopped = wait_for(
        lambda: (lambda found: sorted(found) if len(found) == 2 else None)(jobs_of(kube, namespace, second)),
        60,
        what="category 2's two Jobs",
    )
    wait_for(
        lambda: len(running_trainjobs(kube, namespace, stopped)) == 2 or None, 30, what="their TrainJobs"
    )

    failed = wait_true(kube, resources.Certification, "late", namespace, "Failed", timeout=120)
    assert true_condition(failed) == ("Failed", "DeadlineExceeded", expected)
    assert [s["status"] for s in failed["status"]["categoryStatuses"]] == ["Succeeded", "Failed", "Pending"]
    names = {str(w.metadata.name) for w in kube.list(resources.Workflow, namespace=namespace) if w.metadata}
    assert names == {first, second}, f"{third} must never start"
    ended = get(kube, resources.Workflow, second, namespace)
    assert true_condition(ended) == ("Failed", "DeadlineExceeded", stop)
    wait_for(
        lambda: not jobs_of(kube, namespace, second) and not running_trainjobs(kube, namespace, stopped),
        90,
        what="category 2's Jobs and TrainJobs to be gone",
    )
    kept = jobs_of(kube, namespace, first)
    assert list(kept) == [judged] and true_condition(kept[judged])[:2] == ("Succeeded", "WorkloadCompleted")  # type: ignore[index]

    results = tmp_path / "results.json"
    report = CliRunner().invoke(
        cli,
        [
            *("certification", "report", "late", "-n", namespace),
            *("--results-file", str(results), "--kubeconfig", str(control_plane.kubeconfig_path)),
        ],
    )
    assert report.exit_code == 1, (report.output, report.exception)
    data = json.loads(results.read_text())
    assert [(c["variant"], c["status"], c.get("failureReason")) for c in data["categories"]] == [
        ("nccl-all-reduce", "Succeeded", None),
        ("nccl-loopback", "Failed", stop),
        ("dcgm-level3", "Pending", None),
    ]
    assert data["categories"][0]["jobs"] == 1 and data["result"] == "FAILED"
    assert data["stopped"] == {"reason": "DeadlineExceeded", "message": expected}
    assert "│  Stopped:      DeadlineExceeded " in report.stdout
    assert "│  Status:    Succeeded " in report.stdout and "│  Categories:   1/3 passed " in report.stdout
    assert f"│  Reason:    {stop[:29]}" in report.stdout


def test_a_deadline_ends_the_wait_for_nodes(kube: Client, namespace: str, manager: Any) -> None:
    """No node matches: the Certification would wait five minutes; its deadline ends it sooner."""
    kube.create(certification("waits", namespace, pool_name(), ALL_REDUCE, deadline="3s"))
    failed = wait_true(kube, resources.Certification, "waits", namespace, "Failed", timeout=60)
    assert true_condition(failed) == ("Failed", "DeadlineExceeded", deadline_message(failed, "3s", 3))
    assert [s["status"] for s in failed["status"]["categoryStatuses"]] == ["Pending"]
    nothing_created(kube, namespace)


def test_a_workloadrun_past_its_deadline_stops_its_running_group(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Two groups of one node: group 0 is judged before the deadline, group 1 runs at it."""
    pool, _ = new_pool(gpu_nodes, 2)
    kube.create(workload_run("late", namespace, pool, 1, deadline="30s"))
    found = wait_for(
        lambda: (lambda jobs: sorted(jobs) if len(jobs) == 2 else None)(jobs_of(kube, namespace, "late")),
        60,
        what="the run's two Jobs",
    )
    judged, stopped = found
    finish_job(kube, namespace, judged)
    wait_for(lambda: running_trainjobs(kube, namespace, [stopped]) or None, 30, what="the running TrainJob")

    failed = wait_true(kube, resources.WorkloadRun, "late", namespace, "Failed", timeout=120)
    assert true_condition(failed) == ("Failed", "DeadlineExceeded", deadline_message(failed, "30s", 30))
    workflow = get(kube, resources.Workflow, "late", namespace)
    assert [(g["name"], g["phase"]) for g in workflow["status"]["orchestration"]["groups"]] == [
        ("group-0", "Succeeded"),
        ("group-1", "Pending"),
    ]
    at = format_time(parse_time(failed["metadata"]["creationTimestamp"]) + timedelta(seconds=30))
    assert true_condition(workflow) == (
        "Failed",
        "DeadlineExceeded",
        f"Deadline {at} passed: 1 of 2 groups judged; running groups stopped, not judged: group-1",
    )
    wait_for(
        lambda: (
            list(jobs_of(kube, namespace, "late")) == [judged]
            and not running_trainjobs(kube, namespace, [stopped])
        ),
        90,
        what="the stopped group's Job and TrainJob to be gone",
    )
