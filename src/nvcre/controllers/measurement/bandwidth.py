"""The BandwidthMeasurement kind (spec 2.5): NCCL bandwidth read from a Job's launcher log; the
shell (:mod:`.shell`) reads the measurement, its LogProfile and its Job, this module reads the
launcher's log, asks :mod:`nvcre.measure.nccl.transitions` what the status becomes, writes it.

While the Job runs, every ``sampleInterval`` the lines logged since ``status.lastSampleTime`` are
merged into provisional results (one write, guarded by the resourceVersion they were merged
into, so a conflict or a kill never counts a line twice); they feed the gauges, never a verdict.
Every write is guarded so: on a conflict the reconcile starts again from the fresh object.
Once the Job succeeds, the launcher's complete log is read once and replaces them in the single
terminal write. Reading streams the log: memory stays bounded whatever its size.

Its own rules beside the shell's: no profile, no wait for the Job (the profile is reported
first); a Job missing from the cache is read live and must carry the UID the measurement was
made for; the final read of a finished launcher waits out the Job's grace.
"""

from __future__ import annotations

import logging

from nvcre import resources
from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType, EventType, Label, MeasurementReason
from nvcre.api.v1alpha1.meta import format_time
from nvcre.conditions import condition_of
from nvcre.controllers.bandwidth import metrics
from nvcre.controllers.children import get_live
from nvcre.controllers.measurement.kind import Measuring, ProfileMissing, Shell, Stop
from nvcre.controllers.podlogs import (
    LogsError,
    format_line_time,
    line_datetime,
    line_time,
    pick,
    pod_phase,
    since,
)
from nvcre.measure.nccl import Aggregate, Parser, final_reason, progress, transitions
from nvcre.measure.profile import CompiledProfile
from nvcre.naming import bandwidth_measurement_name
from nvcre.objects import Obj, ObjectKey, StatusChange
from nvcre.runtime.controller import Result

log = logging.getLogger(__name__)

DEFAULT_REPLICATED_JOB = "launcher"
"""The pod read when the profile names no replicated job: mpirun's output is on the launcher."""
_READABLE = ("Running", "Succeeded", "Failed")


class Unreadable(Exception):
    """The final log cannot be read now (no pod yet, pod still running, API error)."""


class Bandwidth:
    name = "bandwidthmeasurement"
    resource = resources.BandwidthMeasurement
    watches_pods = True  # the launcher's start and end wake the measurement

    def measurement_name(self, job: str) -> str:
        return bandwidth_measurement_name(job)

    def check(self, profile: CompiledProfile) -> None:
        Parser(profile)  # raises ProfileError when it reads no NCCL table

    def forget(self, key: ObjectKey) -> None:
        metrics.forget((key.namespace, key.name))

    def is_complete(self, obj: Obj) -> bool:
        return transitions.is_complete(obj)

    async def completed(self, shell: Shell, key: ObjectKey, obj: Obj) -> None:
        """Frozen; its gauges republished (after a restart)."""
        job_name = _job_name(obj)
        metrics.observe(
            obj,
            shell.jobs.get(key.namespace, job_name) if job_name else None,
            transitions.stored_results(obj.get("status") or {}),
            final=_complete_reason(obj) == MeasurementReason.JOB_SUCCEEDED,
        )

    async def without_profile(
        self, shell: Shell, obj: Obj, missing: ProfileMissing, interval: float
    ) -> Stop | None:
        change = transitions.waiting(
            MeasurementReason.LOG_PROFILE_NOT_FOUND, missing.message, shell.ctx.clock.now()
        )
        await _write(shell, obj, change)
        return Stop(Result(requeue_after=interval))

    async def job(self, shell: Shell, key: ObjectKey, obj: Obj, interval: float) -> Obj | Stop:
        """The measured Job (read live when the cache lacks it); gone only when the API server
        says so (or the name now holds another Job): then the measurement ends."""
        name = _job_name(obj)
        cached = shell.jobs.get(key.namespace, name) if name else None
        want_uid = ((obj.get("metadata") or {}).get("labels") or {}).get(Label.JOB_UID)
        if cached is not None and (not want_uid or cached["metadata"].get("uid") == want_uid):
            return cached
        live = (
            await get_live(shell.ctx.client, resources.Job, name, obj["metadata"]["namespace"])
            if name
            else None
        )
        if live is not None and want_uid and live["metadata"].get("uid") != want_uid:
            live = None  # the name now holds a later attempt's Job: ours is gone
        if live is not None:
            return live
        if not transitions.seen_job(obj):
            return Stop(Result(requeue_after=interval))  # created before its Job: wait for it
        await _finish(
            shell, obj, None, MeasurementReason.LOGS_UNAVAILABLE, transitions.gone_message(obj), None
        )
        return Stop()

    async def finalize(self, shell: Shell, m: Measuring, ended: tuple[str, str]) -> Result | None:
        profile = m.profile
        assert not isinstance(profile, ProfileMissing)  # without_profile stopped the pass
        outcome, finished_at = ended[0], ended[1] or None
        if outcome == ConditionType.SUCCEEDED:
            return await _final_read(shell, m.obj, m.job, profile, finished_at)
        try:
            final: Aggregate | None = (await _read_final(shell, m.job, profile, Parser(profile)))[0]
        except Unreadable as error:
            log.info("%s/%s: no final read of a failed Job: %s", m.key.namespace, m.key.name, error)
            final = None
        await _finish(
            shell, m.obj, m.job, MeasurementReason.JOB_FAILED, transitions.JOB_FAILED, final, finished_at
        )
        return None

    async def sample(self, shell: Shell, m: Measuring) -> Result | None:
        assert not isinstance(m.profile, ProfileMissing)  # without_profile stopped the pass
        await _sample(shell, m.obj, m.job, m.profile)
        return Result(requeue_after=m.interval)


def _job_name(obj: Obj) -> str:
    return str(((obj.get("spec") or {}).get("jobRef") or {}).get("name") or "")


# -- reading ----------------------------------------------------------------------------------


async def _pod(shell: Shell, job: Obj, profile: CompiledProfile) -> Obj | None:
    """The pod to read: the first of the profile's replicated job among the pods the Job's own
    TrainJob ran (never one that only carries their labels)."""
    replicated = profile.worker_strategy.replicated_job_name or DEFAULT_REPLICATED_JOB
    return pick(await shell.owned(job, shell.job_pods(job, replicated)), "first")


async def _read_final(
    shell: Shell, job: Obj, profile: CompiledProfile, parser: Parser
) -> tuple[Aggregate, str]:
    """Every row of the finished launcher's whole log, read once (spec 2.5), and the pod read."""
    pod = await _pod(shell, job, profile)
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
        await shell.read(pod, profile, fold)
    except LogsError as error:
        raise Unreadable(str(error)) from error
    return aggregate, f"pod {pod['metadata']['namespace']}/{name}"


async def _final_read(
    shell: Shell, bm: Obj, job: Obj, profile: CompiledProfile, finished_at: str | None
) -> Result | None:
    try:
        final, source = await _read_final(shell, job, profile, Parser(profile))
    except Unreadable as error:
        return await _final_read_failed(shell, bm, job, str(error), finished_at)
    reason, message = final_reason(final, source)
    await _finish(shell, bm, job, reason, message, final, finished_at)
    return None


async def _final_read_failed(
    shell: Shell, bm: Obj, job: Obj, error: str, finished_at: str | None
) -> Result | None:
    started = transitions.pending_since(bm)
    grace = transitions.grace_seconds(job)
    if started is None:  # record when the wait began before waiting
        await _write(
            shell,
            bm,
            transitions.waiting(
                MeasurementReason.FINAL_READ_PENDING, transitions.PENDING, shell.ctx.clock.now()
            ),
        )
        return Result(requeue_after=transitions.FINAL_READ_RETRY_SECONDS)
    if (shell.ctx.clock.now() - started).total_seconds() <= grace:
        log.info("%s: final read pending: %s", bm["metadata"]["name"], error)
        return Result(requeue_after=transitions.FINAL_READ_RETRY_SECONDS)
    message = transitions.unreadable_message(grace, error)
    await _finish(shell, bm, job, MeasurementReason.LOGS_UNAVAILABLE, message, None, finished_at)
    return None


async def _sample(shell: Shell, bm: Obj, job: Obj, profile: CompiledProfile) -> None:
    """Merge the lines logged since the last sample into the provisional results (read with the
    table layout an earlier sample found, when its header is not among the new lines)."""
    status = bm.get("status") or {}
    parser = Parser(profile, resume=status.get("tableLayout"))
    cursor_text = status.get("lastSampleTime")
    cursor = line_time(cursor_text + " ") if cursor_text else None
    pod = await _pod(shell, job, profile)
    sample: _Sample | None = None
    read = False
    if pod is not None and pod_phase(pod) in _READABLE:
        sample = _Sample(parser, cursor)
        try:
            await shell.read(
                pod, profile, sample.fold, since_time=since(cursor) if cursor is not None else None
            )
            read = True
        except LogsError as error:  # what was read before the break is kept
            log.info("%s: provisional sample cut short: %s", bm["metadata"]["name"], error)
    last = sample.last if sample is not None else cursor
    cursor_out = format_line_time(last) if last is not None else None
    aggregate = sample.aggregate if sample is not None else None
    rows = sample.rows if sample is not None and read else None
    written = await _write(
        shell,
        bm,
        transitions.running(aggregate, cursor_out, shell.ctx.clock.now(), parser.state(), rows=rows),
    )
    if written is not None:
        metrics.observe(written, job, transitions.stored_results(written.get("status") or {}), final=False)


# -- writing ----------------------------------------------------------------------------------


async def _write(shell: Shell, bm: Obj, change: StatusChange) -> Obj | None:
    """Write ``change`` over the cached ``bm`` it was decided on, at its resourceVersion: a 409
    raises :class:`~nvcre.runtime.writes.Conflict` and the reconcile is made again from the
    fresh object (never re-applied over a write it did not see, never a live GET)."""
    return await shell.write(bm, change, base=bm)


async def _finish(
    shell: Shell,
    bm: Obj,
    job: Obj | None,
    reason: str,
    message: str,
    final: Aggregate | None,
    finished_at: str | None = None,
) -> None:
    """The single terminal write (a no-op when already Complete), then its event."""
    moment = shell.ctx.clock.now()
    change = transitions.complete(reason, message, finished_at or format_time(moment), final, moment)
    written = await _write(shell, bm, change)
    if written is None or _complete_reason(written) != reason:
        return  # gone, or another write completed it first
    results = transitions.stored_results(written.get("status") or {})
    metrics.observe(written, job, results, final=reason == MeasurementReason.JOB_SUCCEEDED)
    kind = EventType.NORMAL if reason == MeasurementReason.JOB_SUCCEEDED else EventType.WARNING
    await shell.ctx.recorder.emit(written, kind, reason, message)


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
