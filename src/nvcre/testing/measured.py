"""Playing nvcre's measurement controllers in integration tests: the final status each writes
once a Job's log was read, written through the status subresource as that controller does."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from lightkube import Client

from nvcre import resources
from nvcre.testing.inspect import finish_job, get, jobs_of
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import replace_status

BANDWIDTH = {"bandwidthMeasurement": {"logProfileRef": "nccl-bandwidth", "testType": "all_reduce"}}
"""A Job spec fragment asking for an all-reduce BandwidthMeasurement."""


def finish(kube: Client, namespace: str, job: str) -> None:
    """End the Job's TrainJob; its measurements are left to :func:`complete_bandwidth` and co."""
    finish_job(kube, namespace, job, measurements=False)


def made_for(kube: Client, namespace: str, resource: Any, name: str, job: str) -> dict[str, Any]:
    """The measurement once it exists for the Job as it is now (not an earlier attempt's)."""
    uid = get(kube, resources.Job, job, namespace)["metadata"]["uid"]

    def check() -> dict[str, Any] | None:
        found = get(kube, resource, name, namespace)
        return found if found["metadata"]["labels"]["nvcre.nvidia.com/job-uid"] == uid else None

    return dict(wait_for(check, 30, what=f"{resource.__name__} {name} of this Job", ignore=(Exception,)))


def write_status(kube: Client, namespace: str, resource: Any, job: str, suffix: str, status: Any) -> None:
    """Replace the Job's measurement status; the real controller also writes it, so a 409 means
    read again and retry (as any writer of a status does)."""
    name = f"{job}-{suffix}"

    def attempt() -> bool:
        live = made_for(kube, namespace, resource, name, job)
        live["status"] = status
        return replace_status(kube, resource, live)

    wait_for(attempt, 60, what=f"{resource.__name__} {name} written")


def complete_bandwidth(kube: Client, namespace: str, job: str, bus: list[str]) -> None:
    """What the BandwidthMeasurement controller writes after the final read of a good log."""
    now = "2026-01-01T00:00:00Z"
    status = {
        "results": [
            {"sizeBytes": 1 << (20 + 4 * i), "algBW": f"{float(b) / 1.875:.2f}", "busBW": b, "samples": 1}
            for i, b in enumerate(bus)
        ],
        "completionTime": now,
        "conditions": [
            {"type": t, "status": s, "reason": "JobSucceeded", "message": "", "lastTransitionTime": now}
            for t, s in (("Measuring", "False"), ("Complete", "True"))
        ],
    }
    write_status(kube, namespace, resources.BandwidthMeasurement, job, "bandwidth", status)


def complete_retests(
    kube: Client,
    namespace: str,
    workflow: str,
    retests: Mapping[str, Mapping[str, Any]],
    bus: Mapping[str, str],
) -> None:
    """For each suspect node of ``bus`` in turn, wait for the Workflow's isolation re-test Job of
    it (``retests``: :func:`~nvcre.testing.inspect.isolation_retests`), end it and complete its
    bandwidth measurement with ``bus[node]`` as its largest size's bus bandwidth."""

    def made(job: str) -> bool:
        return job in jobs_of(kube, namespace, workflow)

    for suspect, value in bus.items():
        job = f"{workflow}-{retests[suspect]['name']}-iter-1"
        wait_for(functools.partial(made, job), 60, what=f"Job {job}")
        finish(kube, namespace, job)
        complete_bandwidth(kube, namespace, job, ["1.20", value])


def complete_goodput(kube: Client, namespace: str, job: str, step_time: str) -> None:
    """What the GoodputMeasurement controller writes when a training Job succeeded."""
    now = "2026-01-01T00:00:00Z"
    status = {
        "result": "0.950000",
        "avgStepTimeSec": step_time,
        "avgTFLOPSPerGPU": "139.250000",
        "conditions": [
            {"type": t, "status": s, "reason": "JobSucceeded", "message": "", "lastTransitionTime": now}
            for t, s in (("Measuring", "False"), ("Complete", "True"))
        ],
    }
    write_status(kube, namespace, resources.GoodputMeasurement, job, "goodput", status)
