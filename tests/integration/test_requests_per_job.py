"""What nvcre-manager asks of the real API server per Job of a Workflow's fan-out, from the
session's audit log (the manager's own requests, :mod:`nvcre.testing.audit`): each child is
created in one request, with its finalizer; the Job-scoped TrainingRuntime copy gets its Job owner
in one patch, never a read and a replace; the Job controller reconciles from its cache."""

from __future__ import annotations

from collections import Counter
from typing import Any

from lightkube import Client

from nvcre.controllers import resources
from nvcre.testing.audit import by_manager
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import jobs_of, true_condition
from nvcre.testing.nodes import GpuNodeSpec
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import POOL_LABEL, pool_name, workflow

GROUPS = 4


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


def test_a_fan_out_costs_each_job_its_creates_one_patch_and_its_status_writes(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool = pool_name()
    gpu_nodes(GROUPS, GpuNodeSpec(labels={POOL_LABEL: pool}))
    kube.create(resources.Workflow.from_dict(workflow("fan", namespace, pool, 1)))
    # Running is the Job controller's second write, after the TrainJob exists: the fan-out is over.
    wait_for(lambda: all_running(kube, namespace), 60, what=f"{GROUPS} Jobs WorkloadRunning")
    counts = requests_in(control_plane, namespace)
    expected = {
        ("create", "jobs"): GROUPS,
        ("create", "trainjobs"): GROUPS,
        ("create", "trainingruntimes"): GROUPS,  # one Job-scoped copy per Job
        ("patch", "trainingruntimes"): GROUPS,  # its Job owner, in one request
        ("get", "trainingruntimes"): 0,
        ("update", "trainingruntimes"): 0,
        ("update", "jobs"): 0,  # the finalizer comes with the create
    }
    assert {key: counts[key] for key in expected} == expected, counts
    writes = counts[("update", "jobs/status")]
    assert writes <= 2 * GROUPS, "WorkloadCreated, then WorkloadRunning (no 409 retried)"
    # The Job controller reads none (its cache answers, or its own last write while the cache lags
    # behind it). The Workflow controller reads a Job live when its cache does not hold it yet, a
    # cache miss being no proof of deletion: once per Job when its first pass after the launch
    # comes before the Jobs' watch events, at most once more if the next one does too.
    assert counts[("get", "jobs")] <= 2 * GROUPS, counts
