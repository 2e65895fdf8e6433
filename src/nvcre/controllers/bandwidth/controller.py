"""The BandwidthMeasurement controller's shell (spec 2.5): reads the measurement, its LogProfile,
its Job and the launcher's log, asks :mod:`nvcre.measure.nccl.lifecycle` what the status becomes, writes it.

While the Job runs, every ``sampleInterval`` the lines logged since ``status.lastSampleTime`` are
merged into provisional results (one write, guarded by the resourceVersion they were merged
into, so a conflict or a kill never counts a line twice); they feed the gauges, never a verdict.
Every write is guarded so: on a conflict the reconcile starts again from the fresh object.
Once the Job succeeds, the launcher's complete log is read once and replaces them in the single
terminal write. Reading streams the log: memory stays bounded whatever its size.
"""

from __future__ import annotations

import logging

from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType, EventType, Label, MeasurementReason
from nvcre.api.v1alpha1.meta import format_time
from nvcre.conditions import condition_of
from nvcre.controllers import indexes, resources
from nvcre.controllers.bandwidth import metrics
from nvcre.controllers.children import get_live
from nvcre.controllers.context import Context
from nvcre.controllers.indexes import POD_JOB_INDEX
from nvcre.controllers.podlogs import (
    LogReader,
    LogsError,
    container_of,
    format_line_time,
    line_datetime,
    line_time,
    pick,
    pod_phase,
    since,
    stream_lines,
    workload_pods,
)
from nvcre.controllers.status import now
from nvcre.measure.interval import sample_interval
from nvcre.measure.nccl import Aggregate, Parser, final_reason, lifecycle, progress
from nvcre.measure.profile import CompiledProfile, ProfileCache, ProfileError
from nvcre.naming import bandwidth_measurement_name
from nvcre.objects import Obj, ObjectKey, StatusChange
from nvcre.runtime import offload
from nvcre.runtime.controller import Controller, Result

log = logging.getLogger(__name__)

DEFAULT_REPLICATED_JOB = "launcher"
"""The pod read when the profile names no replicated job: mpirun's output is on the launcher."""
_READABLE = ("Running", "Succeeded", "Failed")


class Unreadable(Exception):
    """The final log cannot be read now (no pod yet, pod still running, API error)."""


class BandwidthMeasurementController:
    def __init__(self, ctx: Context, *, workers: int = 1, logs: LogReader = stream_lines) -> None:
        self.ctx = ctx
        self.logs = logs
        manager = ctx.manager
        self.measurements = manager.informer(resources.BandwidthMeasurement)
        self.jobs = manager.informer(resources.Job)
        self.profiles = manager.informer(resources.LogProfile)
        self.pods = indexes.pods(manager)
        self.compiled = ProfileCache()
        self.controller = Controller("bandwidthmeasurement", self.reconcile, workers=workers)
        self.controller.watch(self.measurements)
        self.controller.watch(self.jobs, self._job_to_measurement)
        self.controller.watch(self.pods, self._pod_to_measurement)
        self.controller.watch(self.profiles, self._profile_to_measurements)
        manager.add(self.controller)

    # -- watches --------------------------------------------------------------------------------

    @staticmethod
    def _job_to_measurement(event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        meta = new["metadata"]
        return [ObjectKey(meta.get("namespace", ""), bandwidth_measurement_name(meta["name"]))]

    @staticmethod
    def _pod_to_measurement(event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        job = (new["metadata"].get("labels") or {}).get(Label.JOB)
        return (
            [ObjectKey(new["metadata"].get("namespace", ""), bandwidth_measurement_name(job))] if job else []
        )

    def _profile_to_measurements(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        name = new["metadata"]["name"]
        return [
            ObjectKey(bm["metadata"].get("namespace", ""), bm["metadata"]["name"])
            for bm in self.measurements.items()
            if (bm.get("spec") or {}).get("logProfileRef") == name
        ]

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result | None:
        bm = self.measurements.get(key.namespace, key.name)
        if bm is None:
            metrics.forget((key.namespace, key.name))
            return None
        job_name = ((bm.get("spec") or {}).get("jobRef") or {}).get("name") or ""
        cached_job = self.jobs.get(key.namespace, job_name) if job_name else None
        if lifecycle.is_complete(bm):  # frozen; republish after a restart
            metrics.observe(
                bm,
                cached_job,
                lifecycle.stored_results(bm.get("status") or {}),
                final=_complete_reason(bm) == MeasurementReason.JOB_SUCCEEDED,
            )
            return None
        interval = sample_interval(bm)
        profile = self._profile(bm)
        if isinstance(profile, str):
            await self._write(bm, lifecycle.waiting(MeasurementReason.LOG_PROFILE_NOT_FOUND, profile, now()))
            return Result(requeue_after=interval)
        job = await self._job(bm, job_name, cached_job)
        if job is None:
            if not lifecycle.seen_job(bm):
                return Result(requeue_after=interval)  # created before its Job: wait for it
            await self._finish(bm, None, MeasurementReason.LOGS_UNAVAILABLE, lifecycle.gone_message(bm), None)
            return None
        outcome, finished_at = lifecycle.job_outcome(job)
        if outcome == ConditionType.SUCCEEDED:
            return await self._final_read(bm, job, profile, Parser(profile), finished_at)
        if outcome == ConditionType.FAILED:
            try:
                final: Aggregate | None = (await self._read_final(job, profile, Parser(profile)))[0]
            except Unreadable as error:
                log.info("%s/%s: no final read of a failed Job: %s", key.namespace, key.name, error)
                final = None
            await self._finish(
                bm, job, MeasurementReason.JOB_FAILED, lifecycle.JOB_FAILED, final, finished_at
            )
            return None
        await self._sample(bm, job, profile)
        return Result(requeue_after=interval)

    def _profile(self, bm: Obj) -> CompiledProfile | str:
        """The compiled profile, or why there is none (the ``LogProfileNotFound`` message)."""
        name = (bm.get("spec") or {}).get("logProfileRef") or ""
        profile = self.profiles.get("", name)
        if profile is None:
            return f'LogProfile "{name}" not found'
        try:
            compiled = self.compiled.get(profile)
            Parser(compiled)
        except ProfileError as error:
            return f'LogProfile "{name}" cannot be used: {error}'
        return compiled

    async def _job(self, bm: Obj, name: str, cached: Obj | None) -> Obj | None:
        """The measured Job; None only when the API server says it is gone (or was replaced)."""
        want_uid = ((bm.get("metadata") or {}).get("labels") or {}).get(Label.JOB_UID)
        if cached is not None and (not want_uid or cached["metadata"].get("uid") == want_uid):
            return cached
        live = (
            await get_live(self.ctx.client, resources.Job, name, bm["metadata"]["namespace"])
            if name
            else None
        )
        if live is not None and want_uid and live["metadata"].get("uid") != want_uid:
            return None  # the name now holds a later attempt's Job: ours is gone
        return live

    # -- reading ----------------------------------------------------------------------------------

    async def _pod(self, job: Obj, profile: CompiledProfile) -> Obj | None:
        """The pod to read: the first of the profile's replicated job among the pods the Job's
        own TrainJob ran (never one that only carries their labels)."""
        namespace = job["metadata"]["namespace"]
        labelled = [
            p
            for p in self.pods.by_index(POD_JOB_INDEX, job["metadata"]["name"])
            if p["metadata"].get("namespace") == namespace
        ]
        replicated = profile.worker_strategy.replicated_job_name or DEFAULT_REPLICATED_JOB
        candidates = workload_pods(labelled, job["metadata"]["name"], replicated)
        return pick(await self.ctx.ownership.pods_of(job, candidates), "first")

    async def _read_final(self, job: Obj, profile: CompiledProfile, parser: Parser) -> tuple[Aggregate, str]:
        """Every row of the finished launcher's whole log, read once (spec 2.5), and the pod read."""
        pod = await self._pod(job, profile)
        replicated = profile.worker_strategy.replicated_job_name or DEFAULT_REPLICATED_JOB
        if pod is None:
            raise Unreadable(f"no pod of replicated job {replicated!r} of Job {job['metadata']['name']}")
        name, phase = pod["metadata"]["name"], pod_phase(pod)
        if phase not in ("Succeeded", "Failed"):
            raise Unreadable(f"pod {name} is {phase or 'not started'}, not finished")
        aggregate = parser.aggregate()

        def fold(lines: list[str]) -> None:
            parser.fold(aggregate, lines)

        try:
            await offload.in_batches(
                self.logs(
                    self.ctx.client,
                    name,
                    pod["metadata"]["namespace"],
                    container_of(pod, profile.container_name),
                ),
                fold,
            )
        except LogsError as error:
            raise Unreadable(str(error)) from error
        return aggregate, f"pod {pod['metadata']['namespace']}/{name}"

    async def _final_read(
        self, bm: Obj, job: Obj, profile: CompiledProfile, parser: Parser, finished_at: str | None
    ) -> Result | None:
        try:
            final, source = await self._read_final(job, profile, parser)
        except Unreadable as error:
            return await self._final_read_failed(bm, job, str(error), finished_at)
        reason, message = final_reason(final, source)
        await self._finish(bm, job, reason, message, final, finished_at)
        return None

    async def _final_read_failed(
        self, bm: Obj, job: Obj, error: str, finished_at: str | None
    ) -> Result | None:
        started = lifecycle.pending_since(bm)
        grace = lifecycle.grace_seconds(job)
        if started is None:  # record when the wait began before waiting
            await self._write(
                bm, lifecycle.waiting(MeasurementReason.FINAL_READ_PENDING, lifecycle.PENDING, now())
            )
            return Result(requeue_after=lifecycle.FINAL_READ_RETRY_SECONDS)
        if (now() - started).total_seconds() <= grace:
            log.info("%s: final read pending: %s", bm["metadata"]["name"], error)
            return Result(requeue_after=lifecycle.FINAL_READ_RETRY_SECONDS)
        message = lifecycle.unreadable_message(grace, error)
        await self._finish(bm, job, MeasurementReason.LOGS_UNAVAILABLE, message, None, finished_at)
        return None

    async def _sample(self, bm: Obj, job: Obj, profile: CompiledProfile) -> None:
        """Merge the lines logged since the last sample into the provisional results (read with
        the table layout an earlier sample found, when its header is not among the new lines)."""
        status = bm.get("status") or {}
        parser = Parser(profile, resume=status.get("tableLayout"))
        cursor_text = status.get("lastSampleTime")
        cursor = line_time(cursor_text + " ") if cursor_text else None
        pod = await self._pod(job, profile)
        sample: _Sample | None = None
        read = False
        if pod is not None and pod_phase(pod) in _READABLE:
            sample = _Sample(parser, cursor)
            try:
                await offload.in_batches(
                    self.logs(
                        self.ctx.client,
                        pod["metadata"]["name"],
                        pod["metadata"]["namespace"],
                        container_of(pod, profile.container_name),
                        since_time=since(cursor) if cursor is not None else None,
                        still_writing=pod_phase(pod) == "Running",
                    ),
                    sample.fold,
                )
                read = True
            except LogsError as error:  # what was read before the break is kept
                log.info("%s: provisional sample cut short: %s", bm["metadata"]["name"], error)
        last = sample.last if sample is not None else cursor
        cursor_out = format_line_time(last) if last is not None else None
        aggregate = sample.aggregate if sample is not None else None
        rows = sample.rows if sample is not None and read else None
        written = await self._write(
            bm, lifecycle.running(aggregate, cursor_out, now(), parser.state(), rows=rows)
        )
        if written is not None:
            metrics.observe(written, job, lifecycle.stored_results(written.get("status") or {}), final=False)

    # -- writing ----------------------------------------------------------------------------------

    async def _write(self, bm: Obj, change: StatusChange) -> Obj | None:
        """Write ``change`` over the cached ``bm`` it was decided on, at its resourceVersion: a 409
        raises :class:`~nvcre.runtime.writes.Conflict` and the reconcile is made again from the
        fresh object (never re-applied over a write it did not see, never a live GET)."""
        return await self.ctx.status.update(resources.BandwidthMeasurement, bm, change, base=bm)

    async def _finish(
        self,
        bm: Obj,
        job: Obj | None,
        reason: str,
        message: str,
        final: Aggregate | None,
        finished_at: str | None = None,
    ) -> None:
        """The single terminal write (a no-op when already Complete), then its event."""
        moment = now()
        change = lifecycle.complete(reason, message, finished_at or format_time(moment), final, moment)
        written = await self._write(bm, change)
        if written is None or _complete_reason(written) != reason:
            return  # gone, or another write completed it first
        results = lifecycle.stored_results(written.get("status") or {})
        metrics.observe(written, job, results, final=reason == MeasurementReason.JOB_SUCCEEDED)
        kind = EventType.NORMAL if reason == MeasurementReason.JOB_SUCCEEDED else EventType.WARNING
        await self.ctx.recorder.emit(written, kind, reason, message)


class _Sample:
    """The lines logged after ``cursor`` (a kubelet time), folded into one aggregate; ``last``:
    the time of the last line folded (the next sample's cursor), each line counted once;
    ``rows``: each new table row with its kubelet time (the run's progress)."""

    def __init__(self, parser: Parser, cursor: int | None) -> None:
        self.parser = parser
        self.cursor = cursor
        self.last = cursor
        self.aggregate = parser.aggregate()
        self.rows: list[progress.Row] = []

    def fold(self, lines: list[str]) -> None:
        for line in lines:
            stamp = line_time(line)
            if stamp is not None and self.cursor is not None and stamp <= self.cursor:
                continue  # merged by an earlier sample
            before = self.aggregate.rows
            self.parser.fold(self.aggregate, (line,))
            if stamp is not None and self.aggregate.rows > before:
                self.rows.append(
                    progress.Row(line_datetime(stamp), self.aggregate.last_size, self.aggregate.last_bus_bw)
                )
            self.last = stamp if stamp is not None else self.last


def _complete_reason(bm: Obj) -> str | None:
    cond = condition_of(bm, ConditionType.COMPLETE)
    return (
        str(cond.get("reason")) if cond is not None and cond.get("status") == ConditionStatus.TRUE else None
    )
