"""What nvcre-manager asks of the real API server per Job of a Workflow's fan-out, from the
session's audit log (the manager's own requests, :mod:`nvcre.testing.audit`): three creates (the
Job, then its Job-scoped TrainingRuntime copy with the Job as owner, then the TrainJob) and one
status write, the Job's finalizer in its create; no patch, read or replace of the copy, no live
read of a Job the cache has not seen yet, no event per Job."""

from __future__ import annotations

from collections import Counter
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Event

from nvcre import resources
from nvcre.testing.audit import by_manager
from nvcre.testing.builders import pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import jobs_of, true_condition
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name, workflow

GROUPS = 4
PER_JOB = 4
"""The target: 3 creates and 1 status write."""


def requests_in(control_plane: ControlPlane, namespace: str) -> Counter[tuple[str, str]]:
    """The manager's requests on objects of ``namespace``, by (verb, resource[/subresource])."""
    counts: Counter[tuple[str, str]] = Counter()
    for event in by_manager(control_plane.audit_events()):
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != namespace or not ref.get("name"):
            continue  # lists and watches name no object
        resource = str(ref.get("resource")) + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        counts[(str(event["verb"]), resource)] += 1
    return counts


def all_running(kube: Client, namespace: str) -> bool:
    jobs = jobs_of(kube, namespace, "fan")
    running = [j for j in jobs.values() if (true_condition(j) or ("", "", ""))[1] == "WorkloadRunning"]
    return len(running) == GROUPS


def test_a_fan_out_costs_each_job_three_creates_and_one_status_write(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool = pool_name()
    gpu_nodes(GROUPS, pool_spec(pool))
    kube.create(resources.Workflow.from_dict(workflow("fan", namespace, pool, 1)))
    # Running comes with the write that records the TrainJob: once every Job says so, the
    # fan-out is over.
    wait_for(lambda: all_running(kube, namespace), 60, what=f"{GROUPS} Jobs WorkloadRunning")
    counts = requests_in(control_plane, namespace)
    expected = {
        ("create", "jobs"): GROUPS,
        ("create", "trainingruntimes"): GROUPS,  # one Job-scoped copy per Job, with its owner
        ("create", "trainjobs"): GROUPS,
        ("update", "jobs/status"): GROUPS,  # the TrainJob and Running, in one write
        ("patch", "trainingruntimes"): 0,
        ("get", "trainingruntimes"): 0,
        ("update", "trainingruntimes"): 0,
        ("update", "jobs"): 0,  # the finalizer comes with the create
        ("get", "jobs"): 0,  # a Job just created is not read while the cache catches up
        ("get", "trainjobs"): 0,
    }
    assert {key: counts[key] for key in expected} == expected, counts
    per_job = {key: n for key, n in counts.items() if not key[1].startswith(("workflows", "events"))}
    assert sum(per_job.values()) <= PER_JOB * GROUPS, per_job
    # No Normal event per Job: the Workflow announces its Jobs once (JobCreated).
    job_events = [e for e in kube.list(Event, namespace=namespace) if e.involvedObject.kind == "Job"]
    assert job_events == [], [(e.involvedObject.name, e.reason) for e in job_events]
