"""Failures that compare a group's measurement with others, judged when an iteration ends: with
the fleet's peer groups (outliers, :mod:`nvcre.measure.outliers`) and with each member's own past
(regressions against its NodeRecord's baseline, :mod:`nvcre.fleet.baselines`).

Only then is every peer's data final: a group waits for its own Job's verdict, and every group of
the iteration is terminal. (Holding a group Running until its peers finish would stall the later
waves, which launch only once no group runs.) A ``Succeeded`` group is therefore provisional until
its iteration ends. Regressions are judged first (a node's own past is the more specific
evidence), then outliers among the groups still passing; a failed group counts as a peer. For
each failure, in this order: its Job gets ``ValidationFailed=True`` and failedNodes entries, the
failed-nodes ConfigMap gets them, and the group turns ``Failed`` in the iteration's status write.
The inputs are frozen measurements, the group phases as last written and the NodeRecords (written
only after the Workflow ends, so never with this run's results), so a restart at any point
computes the same failures and repeats only no-op writes.

An isolation round's re-tests are judged the same way when the round ends, with the iteration's
own groups as peers: a slow node stays an outlier beside a healthy partner, a cleared one does not;
a re-test judges only its suspect against the suspect's own past.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre import failednodes, resources
from nvcre.api.v1alpha1.constants import (
    ConditionStatus,
    ConditionType,
    FailureCause,
    MeasurementReason,
)
from nvcre.conditions import condition_of
from nvcre.controllers import verdict_writes
from nvcre.controllers.children import get_live
from nvcre.controllers.workflow import isolating
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.fleet import baselines
from nvcre.fleet.records import category_of
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


@dataclass(frozen=True)
class Measured:
    """A terminal group's final values (bus bandwidth, step time) and its Job."""

    group: Mapping[str, Any]
    job: Obj
    values: dict[str, float]
    judged: bool
    """It passed and may be failed here; else it only counts as a peer."""

    @property
    def name(self) -> str:
        return str(self.group["name"])


async def _measured(state: WorkflowState, groups: Sequence[Mapping[str, Any]], judge: bool) -> list[Measured]:
    """The final values of the terminal ``groups``; with ``judge``, those that passed may be failed."""
    client, namespace = state.ctx.client, state.namespace
    out = []
    for group in groups:
        ref = group.get("jobRef")
        if not ref or group.get("phase") not in ("Succeeded", "Failed"):
            continue
        job = await get_live(client, resources.Job, ref["name"], namespace)
        if job is None:
            continue
        spec = job.get("spec") or {}
        values: dict[str, float] = {}
        if spec.get("bandwidthMeasurement"):
            measurement = await get_live(
                client, resources.BandwidthMeasurement, bandwidth_measurement_name(ref["name"]), namespace
            )
            bandwidth = thresholds.bandwidth_values(
                measurement if verdicts.belongs(measurement, job) else None
            )
            if thresholds.BUS_BANDWIDTH in bandwidth:
                values[thresholds.BUS_BANDWIDTH] = bandwidth[thresholds.BUS_BANDWIDTH]
        if spec.get("goodputMeasurement"):
            goodput = await get_live(
                client, resources.GoodputMeasurement, goodput_measurement_name(ref["name"]), namespace
            )
            seconds = _step_time(goodput if verdicts.belongs(goodput, job) else None)
            if seconds is not None:
                values[thresholds.AVG_STEP_TIME] = seconds
        out.append(Measured(group, job, values, judge and group.get("phase") == "Succeeded"))
    return out


def _samples(measured: Sequence[Measured], failed: Mapping[str, Obj]) -> tuple[list[outliers.Sample], ...]:
    """The outlier rule's bandwidth and step-time samples; a group failed already is only a peer."""
    bandwidth, step_time = [], []
    for m in measured:
        shape = outliers.shape_of(m.group)
        judged = m.judged and m.name not in failed
        if thresholds.BUS_BANDWIDTH in m.values:
            test = (m.job.get("spec") or {}).get("bandwidthMeasurement", {}).get("testType")
            key = ("bandwidth", test, *shape)
            bandwidth.append(outliers.Sample(m.name, key, m.values[thresholds.BUS_BANDWIDTH], judged))
        if thresholds.AVG_STEP_TIME in m.values:
            step_time.append(
                outliers.Sample(m.name, ("step", *shape), m.values[thresholds.AVG_STEP_TIME], judged)
            )
    return bandwidth, step_time


async def _fail_job(
    state: WorkflowState, job: Obj, reason: str, message: str, entries: Sequence[failednodes.Entry]
) -> Obj:
    """The Job's ``ValidationFailed`` and failedNodes say why (one write; a no-op once done)."""
    first: list[bool] = []

    def change(status: dict[str, Any]) -> None:
        first.clear()
        current = condition_of({"status": status}, ConditionType.VALIDATION_FAILED) or {}
        if current.get("status") == ConditionStatus.TRUE and current.get("reason") == reason:
            return
        status["failedNodes"] = failednodes.merge(status.get("failedNodes") or (), entries)
        verdict_writes.set_validation(status, job, True, reason, message, at=state.ctx.clock.now())
        first.append(True)

    written = await state.ctx.status.update(resources.Job, job, change)
    if written is not None and first:
        await verdict_writes.announce(state.ctx, job, True, reason, message)
    return written or job


async def _fail_group(
    state: WorkflowState, m: Measured, reason: str, message: str, entries: list[failednodes.Entry]
) -> Obj:
    """Fail the group's Job, then record its entries (or keep them for isolation); the group turns
    ``Failed`` in this pass's status write."""
    job = await _fail_job(state, m.job, reason, message, entries)
    group = next(g for g in state.groups if g["name"] == m.name)
    await isolating.record_or_set_aside(state, group, entries)
    group["phase"] = "Failed"
    return job


def _regressions(
    state: WorkflowState, measured: Sequence[Measured], settings: baselines.Settings
) -> tuple[dict[str, list[baselines.Regression]], frozenset[str]]:
    """The judged groups whose members regressed against their own baselines (a re-test judges its
    suspect only), and the groups that had a baseline to be judged against at all."""
    category = category_of(state.workflow)
    found: dict[str, list[baselines.Regression]] = {}
    judged: set[str] = set()
    for m in measured:
        if not m.judged or not m.values:
            continue
        members = [m.group["suspect"]] if m.group.get("suspect") else list(m.group.get("nodes") or ())
        records = {n: (state.caches.records.get("", n) or {}).get("status") for n in members}
        regressed, any_baseline = baselines.regressions(
            m.values, records, category, outliers.shape_of(m.group), settings
        )
        if any_baseline:
            judged.add(m.name)
        if regressed:
            found[m.name] = regressed
    return found, frozenset(judged)


@dataclass(frozen=True)
class Judged:
    jobs: dict[str, Obj]
    """The failed groups' Jobs as written, by group name: fresher than the cache."""
    compared: frozenset[str]
    """The groups that passed and were compared at all: with enough peers of their shape, or with
    a member's baseline."""


async def fail_by_comparison(state: WorkflowState, peers: Sequence[Mapping[str, Any]] = ()) -> Judged:
    """Fail the regressions, then the outliers, among the current groups. ``peers``: groups that
    count only as peers (an isolation round's re-tests are judged against the iteration's own
    groups as well as against each other)."""
    performance = ((state.spec.get("validation") or {}).get("performance")) or {}
    fraction = outliers.fraction_of(performance)
    settings = baselines.settings_of(performance)
    if fraction <= 0 and settings.fraction <= 0:
        return Judged({}, frozenset())
    measured = await _measured(state, state.groups, judge=True)
    written: dict[str, Obj] = {}
    regressed, compared = _regressions(state, measured, settings)
    by_name = {m.name: m for m in measured}
    for name, found in sorted(regressed.items()):
        message = found[0].message if len(found) == 1 else "; ".join(f"{r.node}: {r.message}" for r in found)
        entries = [failednodes.entry(r.node, FailureCause.REGRESSION, r.message) for r in found]
        written[name] = await _fail_group(state, by_name[name], FailureCause.REGRESSION, message, entries)
    if fraction <= 0:
        return Judged(written, compared)
    bandwidth, step_time = _samples(measured + await _measured(state, peers, judge=False), written)
    found_outliers = outliers.bandwidth_outliers(bandwidth, fraction) + outliers.step_time_outliers(
        step_time, fraction
    )
    compared |= outliers.compared(bandwidth) | outliers.compared(step_time)
    for outlier in found_outliers:
        if outlier.group in written:
            continue  # one reason per group is enough
        m = by_name[outlier.group]
        entries = failednodes.entries(m.group.get("nodes") or (), outlier.reason, outlier.message)
        written[outlier.group] = await _fail_group(state, m, outlier.reason, outlier.message, entries)
    return Judged(written, compared)
