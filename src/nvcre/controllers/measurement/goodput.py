"""The GoodputMeasurement kind: goodput from a Job's training logs (spec measurements 3). The
shell (:mod:`.shell`) reads the measurement, its LogProfile and its Job; this module reads a
window of the workload's log, asks :mod:`nvcre.measure.goodput` for the next status and writes it
(one write per pass; the terminal one once).

Its own rules beside the shell's: the Job is only read from the cache; a Job that ended is
frozen even without a profile; a missing profile is reported only once the Job runs; samples
are paced (at most one per ``sampleInterval``) and each pod's read resumes from a cursor kept
in memory (:class:`~nvcre.controllers.goodput.reading.Cursor`); a restart the Job counted is an
interruption, and the next run's pods are read from their start.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Literal

from nvcre import resources
from nvcre.api.v1alpha1.constants import ConditionType, Label
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import condition_true
from nvcre.controllers import podlogs
from nvcre.controllers.goodput import metrics, reading
from nvcre.controllers.measurement.kind import Measuring, ProfileMissing, Shell, Stop
from nvcre.measure.goodput import GoodputParser, Window, interrupt, restart_seen
from nvcre.measure.goodput.sampling import (
    INTERRUPTED_BY_RESTART,
    Outcome,
    moment,
    training_started,
    warmup_base,
)
from nvcre.measure.goodput.transitions import complete, profile_missing, running, terminal
from nvcre.measure.profile import CompiledProfile
from nvcre.naming import goodput_measurement_name
from nvcre.objects import Obj, ObjectKey
from nvcre.runtime.controller import Result

log = logging.getLogger(__name__)
Role = Literal["steps", "lifecycle"]
STARTED_PHASES = frozenset({"Running", "Succeeded", "Failed"})


class Goodput:
    name = "goodputmeasurement"
    resource = resources.GoodputMeasurement
    watches_pods = False  # paced samples: the Job's and the profile's events, and the requeue

    def __init__(self) -> None:
        self.cursors: dict[ObjectKey, dict[Role, reading.Cursor]] = {}
        self.sampled: dict[ObjectKey, float] = {}

    def measurement_name(self, job: str) -> str:
        return goodput_measurement_name(job)

    def check(self, profile: CompiledProfile) -> None:
        return None  # any profile that compiles

    def _drop(self, key: ObjectKey) -> None:
        self.cursors.pop(key, None)
        self.sampled.pop(key, None)

    def forget(self, key: ObjectKey) -> None:
        self._drop(key)
        metrics.forget(key.namespace, key.name)

    def is_complete(self, obj: Obj) -> bool:
        return complete(obj.get("status") or {})

    async def completed(self, shell: Shell, key: ObjectKey, obj: Obj) -> None:
        self._drop(key)  # frozen: a replay changes nothing

    async def without_profile(
        self, shell: Shell, obj: Obj, missing: ProfileMissing, interval: float
    ) -> Stop | None:
        return None  # an ended Job is frozen without one; a running one says so in sample

    async def job(self, shell: Shell, key: ObjectKey, obj: Obj, interval: float) -> Obj | Stop:
        job_name = ((obj.get("spec") or {}).get("jobRef") or {}).get("name")
        if not job_name:
            return Stop()
        job = shell.jobs.get(key.namespace, job_name)
        return job if job is not None else Stop(Result(requeue_after=interval))

    async def finalize(self, shell: Shell, m: Measuring, ended: tuple[str, str]) -> Result | None:
        """The terminal freeze (3.5): one last read up to the Job's end, then one status write."""
        key, obj, profile = m.key, m.obj, m.profile
        outcome: Outcome = ended[0]  # type: ignore[assignment]
        anchor = parse_time(ended[1]) if ended[1] else shell.ctx.clock.now()
        status = dict(obj.get("status") or {})
        window: Window | None = None
        terminated: datetime | None = None
        log_interval = 0
        if not isinstance(profile, ProfileMissing):
            pods = await self._pods(shell, m.job, profile, status)
            if pods:
                window = await self._read(
                    shell, key, pods, profile, status, m.interval, end=anchor, until=anchor
                )
            container = podlogs.container_of(pods["steps"], profile.container_name) if pods else None
            terminated = reading.terminated_at(pods.get("steps"), container)
            log_interval = profile.log_interval
        written = await _write(
            shell,
            obj,
            lambda live: terminal(
                live,
                window,
                outcome,
                anchor=anchor,
                terminated=terminated,
                log_interval=log_interval,
                generation=_gen(obj),
            ),
        )
        if written is not None:
            _record(m, written)
        self._drop(key)
        return None

    async def sample(self, shell: Shell, m: Measuring) -> Result | None:
        key, job, profile, interval = m.key, m.job, m.profile, m.interval
        if not condition_true(job, ConditionType.IN_PROGRESS):
            return Result(requeue_after=interval)
        if isinstance(profile, ProfileMissing):
            message = profile.message
            await _write(
                shell,
                m.obj,
                lambda live: profile_missing(
                    live, message, now=shell.ctx.clock.now(), generation=_gen(m.obj)
                ),
            )
            return Result(requeue_after=interval)
        waited = shell.ctx.clock.monotonic() - self.sampled.get(key, float("-inf"))
        if waited < interval:
            return Result(requeue_after=interval - waited)
        gm = m.obj
        status = gm.get("status") or {}
        restarts = int((job.get("status") or {}).get("restartCount") or 0)
        if restart_seen(status, restarts):
            at = moment(status, "applicationStopTime") or shell.ctx.clock.now()
            written = await _write(shell, gm, lambda live: _interrupted(live, restarts, at))
            self.cursors.pop(key, None)  # the next run's pods are read from their start
            if written is not None:
                gm, status = written, written.get("status") or {}
        pods = await self._pods(shell, job, profile, dict(status))
        window = (
            await self._read(shell, key, pods, profile, dict(status), interval, end=shell.ctx.clock.now())
            if pods
            else None
        )
        stamp = shell.ctx.clock.now()
        written = await _write(
            shell,
            gm,
            lambda live: running(
                live, window, now=stamp, log_interval=profile.log_interval, generation=_gen(gm)
            ),
        )
        self.sampled[key] = shell.ctx.clock.monotonic()
        if written is not None:
            _record(m, written)
        return Result(requeue_after=interval)

    # -- reading --------------------------------------------------------------------------------

    async def _pods(
        self, shell: Shell, job: Obj, profile: CompiledProfile, status: dict[str, Any]
    ) -> dict[Role, Obj]:
        """The pods to read: ``steps`` (and ``lifecycle`` under the Multi strategy, when another),
        among the pods the Job's own TrainJob ran (never one that only carries their labels).

        After an interruption only pods created since count: the replaced run's pods may linger
        a moment, and their old steps must not start the next run.
        """
        interrupted = moment(status.get("pendingInterruption") or {}, "tInterrupt")
        pods = [
            p
            for p in shell.job_pods(job, profile.worker_strategy.replicated_job_name)
            if not p["metadata"].get("deletionTimestamp")
            and podlogs.pod_phase(p) in STARTED_PHASES
            and (interrupted is None or _created(p) >= interrupted.replace(microsecond=0))
        ]
        if not pods:
            return {}
        pods = await shell.owned(job, pods)
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
        shell: Shell,
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
            parser = GoodputParser(
                profile,
                warmup_base=warmup_base(status),
                pending_save=cursor.pending_save if cursor else None,
                until=until,
            )
            try:
                await shell.read(
                    pod,
                    profile,
                    parser.feed_all,
                    # the terminal read starts from the persisted progress, not the cursor (3.5)
                    since_time=reading.since(pod, None if until else cursor, last_step, interval, end),
                )
            except podlogs.LogsError as error:
                log.info("goodput %s/%s: %s", key.namespace, key.name, error)
                continue
            windows[role] = parser.window
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


async def _write(shell: Shell, gm: Obj, compute: Any) -> Obj | None:
    """Replace the live status by ``compute(live status)`` (again after every 409)."""

    def change(status: dict[str, Any]) -> None:
        new = compute(dict(status))
        status.clear()
        status.update(new)

    return await shell.write(gm, change)


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


def _record(m: Measuring, written: Obj) -> None:
    """Publish the gauges of the status just written."""
    meta = m.job["metadata"]
    workflow = str((meta.get("labels") or {}).get(Label.WORKFLOW, ""))
    metrics.record(m.key.namespace, m.key.name, meta["name"], workflow, written.get("status") or {})


def _gen(obj: Obj) -> int | None:
    generation = obj["metadata"].get("generation")
    return int(generation) if generation is not None else None
