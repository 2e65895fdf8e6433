"""Outliers against the fleet, judged when an iteration ends (:mod:`nvcre.measure.outliers`).

Only then is every peer's data final: a group waits for its own Job's verdict, and every group of
the iteration is terminal. (Holding a group Running until its peers finish would stall the later
waves, which launch only once no group runs.) A ``Succeeded`` group is therefore provisional until
its iteration ends. For each outlier, in this order: its Job gets ``ValidationFailed=True`` and
failedNodes entries, the failed-nodes ConfigMap gets them, and the group turns ``Failed`` in the
iteration's status write. The inputs are frozen measurements and the group phases as last
written, so a restart at any point computes the same outliers and repeats only no-op writes.

An isolation round's re-tests are judged the same way when the round ends, with the iteration's
own groups as peers: a slow node stays an outlier beside a healthy partner, a cleared one does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre import failednodes, resources
from nvcre.api.v1alpha1.constants import (
    ConditionStatus,
    ConditionType,
    MeasurementReason,
)
from nvcre.conditions import condition_of
from nvcre.controllers import verdict_writes
from nvcre.controllers.children import get_live
from nvcre.controllers.workflow import isolating
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.measure import outliers, thresholds, verdicts
from nvcre.naming import bandwidth_measurement_name, goodput_measurement_name
from nvcre.objects import Obj


def _step_time(goodput: Obj | None) -> float | None:
    complete = condition_of(goodput or {}, ConditionType.COMPLETE) or {}
    if (
        complete.get("status") != ConditionStatus.TRUE
        or complete.get("reason") != MeasurementReason.JOB_SUCCEEDED
    ):
        return None
    return thresholds.goodput_values(goodput).get(thresholds.AVG_STEP_TIME)


async def _samples(
    state: WorkflowState, groups: Sequence[Mapping[str, Any]], judge: bool
) -> tuple[list[outliers.Sample], list[outliers.Sample], dict[str, Obj]]:
    """The final values of ``groups``; with ``judge``, those that passed may be flagged, else
    they are only peers."""
    client, namespace = state.ctx.client, state.namespace
    bandwidth, step_time, jobs = [], [], {}
    for group in groups:
        ref = group.get("jobRef")
        if not ref or group.get("phase") not in ("Succeeded", "Failed"):
            continue
        job = await get_live(client, resources.Job, ref["name"], namespace)
        if job is None:
            continue
        jobs[group["name"]] = job
        spec = job.get("spec") or {}
        judged = judge and group.get("phase") == "Succeeded"
        shape = outliers.shape_of(group)
        if spec.get("bandwidthMeasurement"):
            measurement = await get_live(
                client, resources.BandwidthMeasurement, bandwidth_measurement_name(ref["name"]), namespace
            )
            value = thresholds.bandwidth_values(measurement if verdicts.belongs(measurement, job) else None)
            if thresholds.BUS_BANDWIDTH in value:
                key = ("bandwidth", spec["bandwidthMeasurement"].get("testType"), *shape)
                bandwidth.append(outliers.Sample(group["name"], key, value[thresholds.BUS_BANDWIDTH], judged))
        if spec.get("goodputMeasurement"):
            goodput = await get_live(
                client, resources.GoodputMeasurement, goodput_measurement_name(ref["name"]), namespace
            )
            seconds = _step_time(goodput if verdicts.belongs(goodput, job) else None)
            if seconds is not None:
                step_time.append(outliers.Sample(group["name"], ("step", *shape), seconds, judged))
    return bandwidth, step_time, jobs


async def _fail_job(state: WorkflowState, job: Obj, found: outliers.Outlier) -> Obj:
    """The Job's ``ValidationFailed`` and failedNodes say why (one write; a no-op once done)."""
    first: list[bool] = []

    def change(status: dict[str, Any]) -> None:
        first.clear()
        current = condition_of({"status": status}, ConditionType.VALIDATION_FAILED) or {}
        if current.get("status") == ConditionStatus.TRUE and current.get("reason") == found.reason:
            return
        status["failedNodes"] = failednodes.merge(
            status.get("failedNodes") or (),
            failednodes.entries(verdicts.group_nodes(job), found.reason, found.message),
        )
        verdict_writes.set_validation(
            status, job, True, found.reason, found.message, at=state.ctx.clock.now()
        )
        first.append(True)

    written = await state.ctx.status.update(resources.Job, job, change)
    if written is not None and first:
        await verdict_writes.announce(state.ctx, job, True, found.reason, found.message)
    return written or job


@dataclass(frozen=True)
class Judged:
    jobs: dict[str, Obj]
    """The outliers' Jobs as written, by group name: fresher than the cache."""
    compared: frozenset[str]
    """The groups that passed and had enough peers of their shape to be judged at all."""


async def fail_outliers(state: WorkflowState, peers: Sequence[Mapping[str, Any]] = ()) -> Judged:
    """Fail the outliers among the current groups. ``peers``: groups that count only as peers (an
    isolation round's re-tests are judged against the iteration's own groups as well as against
    each other)."""
    performance = ((state.spec.get("validation") or {}).get("performance")) or {}
    fraction = outliers.fraction_of(performance)
    if fraction <= 0:
        return Judged({}, frozenset())
    bandwidth, step_time, jobs = await _samples(state, state.groups, judge=True)
    more_bandwidth, more_step_time, _ = await _samples(state, peers, judge=False)
    bandwidth, step_time = bandwidth + more_bandwidth, step_time + more_step_time
    found = outliers.bandwidth_outliers(bandwidth, fraction) + outliers.step_time_outliers(
        step_time, fraction
    )
    compared = outliers.compared(bandwidth) | outliers.compared(step_time)
    written: dict[str, Obj] = {}
    by_name = {g["name"]: g for g in state.groups}
    for outlier in found:
        if outlier.group in written:
            continue  # one reason per group is enough
        job = await _fail_job(state, jobs[outlier.group], outlier)
        written[outlier.group] = job
        group = by_name[outlier.group]
        entries = failednodes.entries(group.get("nodes") or (), outlier.reason, outlier.message)
        await isolating.record_or_set_aside(state, group, entries)
        group["phase"] = "Failed"
    return Judged(written, compared)
