"""The GoodputMeasurement controller's shell: reads the Job, the LogProfile and a window of the
workload's log, asks :mod:`nvcre.measure.goodput` for the next status and writes it (one write
per pass; the terminal one once)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any, Literal

from nvcre.api.v1alpha1.constants import ConditionType, Default, Label
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import condition_true, ended
from nvcre.controllers import indexes, podlogs, resources
from nvcre.controllers.context import Context
from nvcre.controllers.goodput import metrics, reading
from nvcre.controllers.indexes import POD_JOB_INDEX
from nvcre.controllers.status import now
from nvcre.measure.goodput import Window, interrupt, restart_seen
from nvcre.measure.goodput.lifecycle import complete, profile_missing, running, terminal
from nvcre.measure.goodput.sampling import (
    INTERRUPTED_BY_RESTART,
    Outcome,
    moment,
    training_started,
    warmup_base,
)
from nvcre.measure.interval import sample_interval
from nvcre.measure.profile import CompiledProfile, ProfileCache, ProfileError
from nvcre.naming import goodput_measurement_name
from nvcre.objects import Obj, ObjectKey
from nvcre.runtime.controller import Controller, Result

log = logging.getLogger(__name__)
Role = Literal["steps", "lifecycle"]
STARTED_PHASES = frozenset({"Running", "Succeeded", "Failed"})


def job_outcome(job: Obj) -> tuple[Outcome, datetime] | None:
    """The Job's terminal condition and its time (the anchor of the terminal freeze)."""
    outcome = ended(job)
    if outcome is None:
        return None
    kind, when = outcome
    return kind, parse_time(when) if when else now()  # type: ignore[return-value]


class GoodputController:
    def __init__(self, ctx: Context, *, workers: int = Default.MAX_CONCURRENT_RECONCILES) -> None:
        self.ctx = ctx
        manager = ctx.manager
        self.measurements = manager.informer(resources.GoodputMeasurement)
        self.jobs = manager.informer(resources.Job)
        self.profiles = manager.informer(resources.LogProfile)
        self.pods = indexes.pods(manager)
        self.compiled = ProfileCache()
        self.cursors: dict[ObjectKey, dict[Role, reading.Cursor]] = {}
        self.sampled: dict[ObjectKey, float] = {}
        self.controller = Controller("goodputmeasurement", self.reconcile, workers=workers)
        self.controller.watch(self.measurements)
        self.controller.watch(self.jobs, self._job_to_measurement)
        self.controller.watch(self.profiles, self._profile_to_measurements)
        manager.add(self.controller)

    def _job_to_measurement(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        meta = new["metadata"]
        return [ObjectKey(meta.get("namespace", ""), goodput_measurement_name(meta["name"]))]

    def _profile_to_measurements(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        name = new["metadata"]["name"]
        return [
            ObjectKey(gm["metadata"]["namespace"], gm["metadata"]["name"])
            for gm in self.measurements.items()
            if (gm.get("spec") or {}).get("logProfileRef") == name
        ]

    def _forget(self, key: ObjectKey) -> None:
        self.cursors.pop(key, None)
        self.sampled.pop(key, None)

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result | None:
        gm = self.measurements.get(key.namespace, key.name)
        if gm is None:  # deleted (a status write re-reads it live when the cache lags)
            self._forget(key)
            metrics.forget(key.namespace, key.name)
            return None
        status = gm.get("status") or {}
        if complete(status):
            self._forget(key)
            return None  # frozen: a replay changes nothing
        interval = sample_interval(gm)
        job_name = ((gm.get("spec") or {}).get("jobRef") or {}).get("name")
        if not job_name:
            return None
        job = self.jobs.get(key.namespace, job_name)
        if job is None:
            return Result(requeue_after=interval)
        profile = self._profile(gm)
        ended = job_outcome(job)
        if ended is not None:
            await self._freeze(key, gm, job, profile, *ended, interval=interval)
            return None
        if not condition_true(job, ConditionType.IN_PROGRESS):
            return Result(requeue_after=interval)
        if isinstance(profile, str):
            await self._write(gm, lambda live: profile_missing(live, profile, now=now(), generation=_gen(gm)))
            return Result(requeue_after=interval)
        return await self._sample(key, gm, job, profile, interval)

    def _profile(self, gm: Obj) -> CompiledProfile | str:
        """The compiled LogProfile, or why there is none (the LogProfileNotFound message; its
        creation wakes the measurement)."""
        name = str((gm.get("spec") or {}).get("logProfileRef") or "")
        body = self.profiles.get("", name)
        if body is None:
            return f'LogProfile "{name}" could not be resolved: not found'
        try:
            return self.compiled.get(body)
        except ProfileError as error:
            return f'LogProfile "{name}" could not be resolved: {error}'

    async def _pods(
        self, job: Obj, profile: CompiledProfile | str, status: dict[str, Any]
    ) -> dict[Role, Obj]:
        """The pods to read: ``steps`` (and ``lifecycle`` under the Multi strategy, when another),
        among the pods the Job's own TrainJob ran (never one that only carries their labels).

        After an interruption only pods created since count: the replaced run's pods may linger
        a moment, and their old steps must not start the next run.
        """
        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        replicated = profile.worker_strategy.replicated_job_name if not isinstance(profile, str) else None
        interrupted = moment(status.get("pendingInterruption") or {}, "tInterrupt")
        pods = [
            p
            for p in podlogs.workload_pods(self.pods.by_index(POD_JOB_INDEX, name), name, replicated)
            if p["metadata"].get("namespace") == namespace
            and not p["metadata"].get("deletionTimestamp")
            and podlogs.pod_phase(p) in STARTED_PHASES
            and (interrupted is None or _created(p) >= interrupted.replace(microsecond=0))
        ]
        if isinstance(profile, str) or not pods:
            return {}
        pods = await self.ctx.ownership.pods_of(job, pods)
        if not pods:
            return {}
        strategy = profile.worker_strategy
        if strategy.type != "Multi":
            return {"steps": pods[0]}
        chosen: dict[Role, Obj] = {"steps": podlogs.pick(pods, strategy.training_step_pod) or pods[0]}
        lifecycle = podlogs.pick(pods, strategy.lifecycle_pod) or pods[0]
        if lifecycle["metadata"].get("uid") != chosen["steps"]["metadata"].get("uid"):
            chosen["lifecycle"] = lifecycle
        return chosen

    async def _read(
        self,
        key: ObjectKey,
        pods: dict[Role, Obj],
        profile: CompiledProfile,
        status: dict[str, Any],
        interval: float,
        *,
        end: datetime,
        until: datetime | None = None,
    ) -> Window | None:
        """One window over the chosen pods; None when nothing could be read."""
        cursors = self.cursors.get(key, {})
        last_step = moment(status, "lastStepTimestamp") if training_started(status) else None
        windows: dict[Role, Window] = {}
        for role, pod in pods.items():
            cursor = cursors.get(role)
            if cursor is not None and cursor.pod_uid != pod["metadata"].get("uid"):
                cursor = None
            try:
                windows[role] = await reading.read(
                    self.ctx.client,
                    pod,
                    profile,
                    # the terminal read starts from the persisted progress, not the cursor (3.5)
                    since_time=reading.since(pod, None if until else cursor, last_step, interval, end),
                    warmup_base=warmup_base(status),
                    pending_save=cursor.pending_save if cursor else None,
                    until=until,
                )
            except podlogs.LogsError as error:
                log.info("goodput %s/%s: %s", key.namespace, key.name, error)
        if "steps" not in windows:
            return None
        window = windows["steps"]
        if "lifecycle" in windows:
            window = window.with_lifecycle(windows["lifecycle"])
        self.cursors[key] = {
            role: reading.Cursor(
                pods[role]["metadata"].get("uid", ""),
                w.last_log_timestamp or (cursors[role].last_log if role in cursors else None),
                w.pending_save,
            )
            for role, w in windows.items()
        }
        return window

    async def _sample(
        self, key: ObjectKey, gm: Obj, job: Obj, profile: CompiledProfile, interval: float
    ) -> Result | None:
        waited = time.monotonic() - self.sampled.get(key, float("-inf"))
        if waited < interval:
            return Result(requeue_after=interval - waited)
        status = gm.get("status") or {}
        restarts = int((job.get("status") or {}).get("restartCount") or 0)
        if restart_seen(status, restarts):
            at = moment(status, "applicationStopTime") or now()
            written = await self._write(gm, lambda live: _interrupted(live, restarts, at))
            self.cursors.pop(key, None)  # the next run's pods are read from their start
            if written is not None:
                gm, status = written, written.get("status") or {}
        pods = await self._pods(job, profile, dict(status))
        window = await self._read(key, pods, profile, dict(status), interval, end=now()) if pods else None
        stamp = now()
        written = await self._write(
            gm,
            lambda live: running(
                live, window, now=stamp, log_interval=profile.log_interval, generation=_gen(gm)
            ),
        )
        self.sampled[key] = time.monotonic()
        if written is not None:
            metrics.record(
                key.namespace, key.name, job["metadata"]["name"], _workflow(job), written.get("status") or {}
            )
        return Result(requeue_after=interval)

    async def _freeze(
        self,
        key: ObjectKey,
        gm: Obj,
        job: Obj,
        profile: CompiledProfile | str,
        outcome: Outcome,
        anchor: datetime,
        *,
        interval: float,
    ) -> None:
        """The terminal freeze (3.5): one last read up to ``anchor``, then one status write."""
        status = dict(gm.get("status") or {})
        pods = await self._pods(job, profile, status)
        window = None
        if pods and not isinstance(profile, str):
            window = await self._read(key, pods, profile, status, interval, end=anchor, until=anchor)
        container = (
            podlogs.container_of(pods["steps"], profile.container_name)
            if pods and not isinstance(profile, str)
            else None
        )
        terminated = reading.terminated_at(pods.get("steps"), container)
        log_interval = profile.log_interval if not isinstance(profile, str) else 0
        written = await self._write(
            gm,
            lambda live: terminal(
                live,
                window,
                outcome,
                anchor=anchor,
                terminated=terminated,
                log_interval=log_interval,
                generation=_gen(gm),
            ),
        )
        if written is not None:
            metrics.record(
                key.namespace, key.name, job["metadata"]["name"], _workflow(job), written.get("status") or {}
            )
        self._forget(key)

    async def _write(self, gm: Obj, compute: Any) -> Obj | None:
        """Replace the live status by ``compute(live status)`` (again after every 409)."""

        def change(status: dict[str, Any]) -> None:
            new = compute(dict(status))
            status.clear()
            status.update(new)

        return await self.ctx.status.update(resources.GoodputMeasurement, gm, change)


def _interrupted(status: dict[str, Any], restarts: int, at: datetime) -> dict[str, Any]:
    """Every restart the Job counted and this measurement has not, as interruptions."""
    while restart_seen(status, restarts):
        status = interrupt(status, reason=INTERRUPTED_BY_RESTART, at=at)
    return status


def _created(pod: Obj) -> datetime:
    text = pod["metadata"].get("creationTimestamp")
    try:
        return parse_time(text) if text else datetime.max.replace(tzinfo=UTC)
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)


def _gen(obj: Obj) -> int | None:
    generation = obj["metadata"].get("generation")
    return int(generation) if generation is not None else None


def _workflow(job: Obj) -> str:
    return str((job["metadata"].get("labels") or {}).get(Label.WORKFLOW, ""))
