"""The Job controller's shell: reads the Job and its workload live, asks the pure modules what to
do, and carries it out with one status write (events after it)."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NoReturn

from lightkube import ApiError

from nvcre import failednodes, resources
from nvcre.api.v1alpha1.constants import (
    GROUP,
    TRAINER_API_VERSION,
    Annotation,
    ConditionStatus,
    ConditionType,
    Default,
    EventReason,
    FailureLogReason,
    Finalizer,
    JobReason,
    Kind,
    Label,
    TrainerKind,
)
from nvcre.cel import CELError
from nvcre.conditions import is_terminal, set_exclusive, set_in_status, to_status
from nvcre.controllers import indexes, verdict_writes
from nvcre.controllers.children import (
    HolderTerminating,
    NameTaken,
    adopt,
    controlled_by,
    create_controlled,
    delete_if_present,
    delete_referenced,
    get_live,
)
from nvcre.controllers.context import REQUEUE, Context
from nvcre.controllers.finalizers import ensure_finalizer, remove_finalizer
from nvcre.controllers.indexes import POD_JOB_INDEX, POD_NODE_INDEX
from nvcre.controllers.job import failure_log
from nvcre.controllers.podlogs import read_tail
from nvcre.controllers.status import conditions_of
from nvcre.decide.job import deletion, diagnostics, health, images, measurements, next_step, restart
from nvcre.measure import verdicts
from nvcre.measure.thresholds import Verdict
from nvcre.naming import bandwidth_measurement_name, goodput_measurement_name
from nvcre.objects import Obj, ObjectKey, StatusChange, controller_owner
from nvcre.orchestration import completion
from nvcre.runtime import offload
from nvcre.runtime.controller import Controller, Result, TerminalError, by_label, owned_by, wake_by
from nvcre.runtime.errors import is_invalid, server_message
from nvcre.workload import trainjob

log = logging.getLogger(__name__)

SOON = Result(requeue_after=1.0)
TIMED_OUT = "Job exceeded timeoutPerJob"
CACHE_GRACE_SECONDS = 10.0
"""How long a TrainJob this manager has just created may be missing from its cache before the
Job controller reads it live: its watch event is on the way, and wakes the Job (the owner watch)."""


def _final(job: Obj) -> bool:
    """Being deleted or terminal: what is decided next is decided on the live Job."""
    return bool(job["metadata"].get("deletionTimestamp")) or is_terminal(conditions_of(job))


def _key(job: Obj) -> ObjectKey:
    return ObjectKey(job["metadata"]["namespace"], job["metadata"]["name"])


def pod_to_job(event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
    job = (new["metadata"].get("labels") or {}).get(Label.JOB)
    return [ObjectKey(new["metadata"].get("namespace", ""), job)] if job else []


class JobController:
    def __init__(
        self,
        ctx: Context,
        *,
        workers: int = Default.MAX_CONCURRENT_RECONCILES,
        tail_reader: failure_log.TailReader = read_tail,
    ) -> None:
        self.ctx = ctx
        self.tail_reader = tail_reader
        manager = ctx.manager
        self.jobs = manager.informer(resources.Job)
        self.trainjobs = manager.informer(resources.TrainJob)
        self.created: dict[str, float] = {}
        """UIDs of the TrainJobs this manager created in the last :data:`CACHE_GRACE_SECONDS`."""
        self.runtime_copies = indexes.runtime_copies(manager)
        self.pods = indexes.pods(manager)
        self.nodes = indexes.nodes(manager)
        self.workflows = manager.informer(resources.Workflow)
        """Read for the owning Workflow's ``timeoutPerJob`` (no watch: the Job's own requeue
        wakes it at its deadline)."""
        self.goodputs = manager.informer(resources.GoodputMeasurement)
        self.bandwidths = manager.informer(resources.BandwidthMeasurement)
        self.controller = Controller("job", self.reconcile, workers=workers)
        self._invalid_health: set[tuple[str, str]] = set()
        """(Job uid, expression) whose unusable node-health expression was reported by an event."""
        self.controller.watch(self.jobs)
        self.controller.watch(self.trainjobs, owned_by(Kind.JOB, GROUP))
        self.controller.watch(self.runtime_copies, by_label(Label.JOB))
        self.controller.watch(self.pods, pod_to_job)
        self.controller.watch(self.nodes, self._node_to_jobs)
        self.controller.watch(self.goodputs, by_label(Label.JOB))
        self.controller.watch(self.bandwidths, by_label(Label.JOB))
        manager.add(self.controller)

    def _node_to_jobs(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        if not health.node_changed(old, new):
            return []
        keys = set()
        for pod in self.pods.by_index(POD_NODE_INDEX, new["metadata"]["name"]):
            job = (pod["metadata"].get("labels") or {}).get(Label.JOB)
            if job:
                keys.add(ObjectKey(pod["metadata"].get("namespace", ""), job))
        return sorted(keys)

    def _job_pods(self, job: Obj) -> list[Obj]:
        namespace = job["metadata"].get("namespace", "")
        return [
            p
            for p in self.pods.by_index(POD_JOB_INDEX, job["metadata"]["name"])
            if p["metadata"].get("namespace") == namespace
        ]

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result | None:
        """Works from the cached Job (or, while the cache has not caught up with it, the Job as
        our own last status write returned it) while it is open; the Job is read live before
        every terminal decision (deletion, a verdict, Failed, Succeeded, a restart, an adoption).

        A Job the cache lacks is not read: it is gone, or new and its own event is on its way
        (the Workflow creates a Job's runtime copy right after it, and the copy's event can come
        first); that event brings the Job back."""
        cached = self.jobs.get(key.namespace, key.name)
        if cached is None:
            return None
        view = self.ctx.status.newest(resources.Job, cached)
        if _final(view):
            return await self._reconcile_live(key)
        return await self._reconcile(copy.deepcopy(view), live=False)

    async def _reconcile_live(self, key: ObjectKey, *, ensured: bool = False) -> Result | None:
        """The pass again on the live Job (``ensured``: this pass has ensured the measurements)."""
        job = await get_live(self.ctx.client, resources.Job, key.name, key.namespace)
        return None if job is None else await self._reconcile(job, live=True, ensured=ensured)

    async def _reconcile(self, job: Obj, *, live: bool, ensured: bool = False) -> Result | None:
        if job["metadata"].get("deletionTimestamp"):
            return await self._delete(job)
        if await ensure_finalizer(self.ctx.client, resources.Job, job, Finalizer.JOB):
            return None
        if completion.job_failed(job):  # Failed, a hardware failure or a failing verdict
            await self._release_workload(job)
        if is_terminal(conditions_of(job)):
            return await self._judge(job, ensured=ensured)
        status = job.get("status") or {}
        left = self._time_left(job)
        if left is not None and left <= 0:
            return await self._time_out(job) if live else await self._reconcile_live(_key(job))
        if not status.get("workloadRef"):
            return wake_by(await self._create_workload(job, live=live), left)
        if restart.restarting(status) and not live:
            return await self._reconcile_live(_key(job))
        if not ensured:
            await self._ensure_measurements(job)
        if restart.restarting(status):
            return wake_by(await self._continue_restart(job), left)
        return wake_by(await self._follow_workload(job, live=live), left)

    def _time_left(self, job: Obj) -> float | None:
        """Seconds until the Job exceeds its Workflow's ``timeoutPerJob`` (see
        :func:`completion.time_left`; the Job's creation is its group's start); None when no
        clock runs or the Workflow is not in the cache yet."""
        owner = controller_owner(job)
        if owner is None or owner.get("kind") != Kind.WORKFLOW:
            return None
        workflow = self.workflows.get(job["metadata"]["namespace"], owner["name"])
        if workflow is None or workflow["metadata"].get("uid") != owner.get("uid"):
            return None
        execution = ((workflow.get("spec") or {}).get("orchestration") or {}).get("execution") or {}
        created = job["metadata"].get("creationTimestamp")
        return completion.time_left(execution.get("timeoutPerJob"), job, created, self.ctx.clock.now())

    async def _time_out(self, job: Obj) -> Result | None:
        """Fail the Job ``JobTimedOut`` with its launcher's log tail (read before its workload is
        deleted) as the failure log: how far the run got is the first thing a user asks."""
        ours = await self.ctx.ownership.pods_of(job, self._job_pods(job))
        entry = await failure_log.collect(
            self.ctx.client, ours, self.tail_reader, unfinished=FailureLogReason.TIMEOUT
        )

        def record(status: dict[str, Any]) -> None:
            status.setdefault("failureLog", entry)

        written = await self._write_state(
            job, ConditionType.FAILED, JobReason.JOB_TIMED_OUT, TIMED_OUT, record
        )
        if written is not None:
            await self._release_workload(written)
        return None

    async def _delete(self, job: Obj) -> Result | None:
        await self._delete_workload(job)
        if not deletion.may_release(job, self._job_pods(job), self.ctx.clock.now()):
            return REQUEUE
        await remove_finalizer(self.ctx.client, resources.Job, job, Finalizer.JOB)
        return None

    async def _release_workload(self, job: Obj) -> None:
        """A failed Job is kept for the report; its workload goes (its pods with it), also while
        its trio still says InProgress after a hardware failure, which ends its group. Deleted
        once: a workload the cache shows going, or gone, is left alone."""
        ref = (job.get("status") or {}).get("workloadRef")
        if not ref:
            return
        namespace = ref.get("namespace") or job["metadata"]["namespace"]
        cached = self.trainjobs.get(namespace, ref["name"])
        if cached is None or cached["metadata"].get("deletionTimestamp"):
            return
        uid = cached["metadata"].get("uid")
        if ref.get("uid") and uid != ref["uid"]:
            return
        await delete_if_present(self.ctx.client, resources.TrainJob, ref["name"], namespace, uid=uid)

    async def _delete_workload(self, job: Obj) -> None:
        ref = (job.get("status") or {}).get("workloadRef")
        if ref:
            await delete_referenced(self.ctx.client, resources.TrainJob, ref, job["metadata"]["namespace"])

    async def _workload(self, job: Obj) -> Obj | None:
        """The workload named by ``workloadRef`` as it is now; None only when a live read says so.

        A cache that lacks it (not yet seen) or holds another object of that name (the one a
        restart replaced) is no proof either way.
        """
        ref = job["status"]["workloadRef"]
        namespace = ref.get("namespace") or job["metadata"]["namespace"]
        cached = self.trainjobs.get(namespace, ref["name"])
        if cached is not None and (not ref.get("uid") or cached["metadata"].get("uid") == ref["uid"]):
            return cached
        live = await get_live(self.ctx.client, resources.TrainJob, ref["name"], namespace)
        if live is not None and ref.get("uid") and live["metadata"].get("uid") != ref["uid"]:
            return None  # the name now holds another object: ours is gone
        return live

    # -- creating the workload ----------------------------------------------------------------

    async def _create_workload(self, job: Obj, *, live: bool = True) -> Result | None:
        """Create (or, from the live Job only, adopt) the workload and record it."""
        try:
            body = trainjob.build(job)
        except trainjob.AdapterError as error:
            await self._write_state(
                job,
                ConditionType.FAILED,
                JobReason.WORKLOAD_CREATION_ERROR,
                f"Unsupported workload type: {error}",
            )
            return None
        name, namespace = body["metadata"]["name"], job["metadata"]["namespace"]
        taken = (
            f"Failed to build workload: TrainJob/{name} already exists and is not controlled by "
            f"Job {job['metadata']['name']}"
        )
        existing = None
        copy_name = (job["metadata"].get("annotations") or {}).get(Annotation.RUNTIME_COPY)
        if self.trainjobs.get(namespace, name) is not None:
            if not live:
                return await self._reconcile_live(_key(job))
            # The cache knows one: read it instead of a POST that can only fail with 409.
            existing = await get_live(self.ctx.client, resources.TrainJob, name, namespace)
        elif copy_name and not self._runtime_copy_ready(job, copy_name):
            # Trainer refuses a TrainJob whose runtime does not exist: the Workflow creates the
            # copy after this Job, and its watch event brings us back.
            return None
        try:
            created = (
                adopt(existing, lambda live: controlled_by(live, job))
                if existing is not None
                else await create_controlled(self.ctx.client, resources.TrainJob, body, job)
            )
        except HolderTerminating:
            return SOON  # the previous attempt's workload (or a foreign one) is still going away
        except NameTaken:
            if not live:
                return await self._reconcile_live(_key(job))
            await self._write_state(job, ConditionType.FAILED, JobReason.WORKLOAD_CREATION_ERROR, taken)
            return None
        except ApiError as error:
            if copy_name and trainjob.RUNTIME_NOT_FOUND in server_message(error):
                # nvcre's cache holds the copy (checked above): Trainer's informer has not seen
                # it yet. Its cache lag is no invalid input; the bound is timeoutPerJob.
                log.info("TrainJob/%s: Trainer has not seen runtime %s yet; retrying", name, copy_name)
                return SOON
            return await self._creation_error(job, f"Failed to create TrainJob/{name}", error)
        existing, adopted = created.obj, created.adopted
        if not adopted:
            self._created_now(existing["metadata"]["uid"])
        if adopted and not live:
            # Ours already: the cached Job may lag behind the write that recorded it.
            return await self._reconcile_live(_key(job))
        if restart.replaced(job.get("status") or {}, existing):
            return SOON  # the previous attempt's workload is still going away
        ref = {
            "apiVersion": TRAINER_API_VERSION,
            "kind": TrainerKind.TRAIN_JOB,
            "name": name,
            "namespace": namespace,
            "uid": existing["metadata"]["uid"],
        }
        reason, message, change = self._first_state(job, ref, existing, adopted=adopted)

        def record(status: dict[str, Any]) -> None:
            status["workloadRef"] = ref
            if change is not None:
                change(status)

        await self._write_state(job, ConditionType.IN_PROGRESS, reason, message, record)
        return REQUEUE

    def _first_state(
        self, job: Obj, ref: dict[str, Any], workload: Obj, *, adopted: bool
    ) -> tuple[str, str, StatusChange | None]:
        """The state written with ``workloadRef``: what following the workload just created
        decides (one write, not WorkloadCreated and then WorkloadRunning) when that is Running;
        WorkloadCreated otherwise (pending, blocked: the next pass follows it as usual);
        WorkloadAdopted for one an earlier pass created."""
        name = ref["name"]
        if adopted:
            return JobReason.WORKLOAD_ADOPTED, f"Workload TrainJob/{name} adopted", None
        with_ref = {**job, "status": {**(job.get("status") or {}), "workloadRef": ref}}
        decision = next_step.follow(
            with_ref, workload, self._goodput(job), self._job_pods(job), self.ctx.clock.now()
        )
        if isinstance(decision, next_step.Progress) and decision.reason == JobReason.WORKLOAD_RUNNING:
            return decision.reason, decision.message, decision.change
        return JobReason.WORKLOAD_CREATED, f"Workload TrainJob/{name} created and is starting", None

    def _runtime_copy_ready(self, job: Obj, name: str) -> bool:
        """The cache holds the copy, created for this Job (not a retried group's earlier copy of
        that name, on its way out)."""
        held = self.runtime_copies.get(job["metadata"]["namespace"], name)
        owners = (held or {}).get("metadata", {}).get("ownerReferences") or ()
        return any(ref.get("uid") == job["metadata"]["uid"] for ref in owners)

    async def _creation_error(self, job: Obj, what: str, error: ApiError) -> NoReturn:
        """A refused create fails the Job with the server's message (the write's transition
        event says it); any other error is retried, with a warning: no write records it."""
        message = f"{what}: {server_message(error)}"
        if not is_invalid(error):
            await self.ctx.recorder.warning(job, JobReason.WORKLOAD_CREATION_ERROR, message)
            raise error  # transient: retried with backoff, the Job stays as it is
        await self._write_state(job, ConditionType.FAILED, JobReason.WORKLOAD_CREATION_ERROR, message)
        raise TerminalError(message) from error

    async def _ensure_measurements(self, job: Obj) -> None:
        """Create the measurements the cache does not hold (a 409 means it lags: fine). One
        left by an earlier attempt of a retried group (same name, another Job UID) is deleted
        first: this attempt gets its own, and its verdict never waits on the old one."""
        caches = {"GoodputMeasurement": self.goodputs, "BandwidthMeasurement": self.bandwidths}
        kinds = {
            "GoodputMeasurement": resources.GoodputMeasurement,
            "BandwidthMeasurement": resources.BandwidthMeasurement,
        }
        for want in measurements.wanted(job):
            meta = want.body["metadata"]
            cached = caches[want.kind].get(meta["namespace"], meta["name"])
            if cached is not None:
                if not verdicts.belongs(cached, job) and not cached["metadata"].get("deletionTimestamp"):
                    await delete_if_present(
                        self.ctx.client,
                        kinds[want.kind],
                        meta["name"],
                        meta["namespace"],
                        uid=cached["metadata"].get("uid"),
                    )
                continue  # this attempt's is created once the earlier one is gone
            try:
                await self.ctx.client.create(kinds[want.kind].from_dict(want.body))
            except ApiError as error:
                if error.status.code != 409:
                    await self.ctx.recorder.warning(
                        job,
                        "MeasurementCreationError",
                        f"Failed to ensure {want.kind}: {server_message(error)}",
                    )

    # -- following the workload ---------------------------------------------------------------

    def _goodput(self, job: Obj) -> Obj | None:
        return self.goodputs.get(
            job["metadata"]["namespace"], goodput_measurement_name(job["metadata"]["name"])
        )

    def _bandwidth(self, job: Obj) -> Obj | None:
        return self.bandwidths.get(
            job["metadata"]["namespace"], bandwidth_measurement_name(job["metadata"]["name"])
        )

    # -- the verdict of a succeeded Job ----------------------------------------------------------

    async def _judge(self, job: Obj, *, ensured: bool = False) -> Result | None:
        """Write the ``ValidationFailed`` verdict (and the failedNodes it implies, in the same
        write) once the final measurements allow one; a failed Job is never judged."""
        if not verdicts.awaiting_verdict(job):
            return None
        if not ensured:
            await self._ensure_measurements(job)  # e.g. the replacement of an earlier attempt's
        decided = verdicts.judge(job, self._bandwidth(job), self._goodput(job), self.ctx.clock.now())
        if decided is None:
            return None
        if isinstance(decided, verdicts.Wait):
            return Result(requeue_after=decided.seconds)
        wrote: list[bool] = []

        def record(status: dict[str, Any]) -> None:
            wrote.clear()
            live = {"metadata": job["metadata"], "spec": job["spec"], "status": status}
            if not verdicts.awaiting_verdict(live):
                return  # judged meanwhile (or no longer succeeded): the first verdict stands
            _record_verdict(status, job, decided, self.ctx.clock.now())
            wrote.append(True)

        written = await self.ctx.status.update(resources.Job, job, record)
        if written is not None and wrote:
            await verdict_writes.announce(self.ctx, job, decided.failed, decided.reason, decided.message)
        return None

    def _created_now(self, uid: str) -> None:
        moment = self.ctx.clock.monotonic()
        self.created = {u: t for u, t in self.created.items() if moment - t < CACHE_GRACE_SECONDS}
        self.created[uid] = moment

    def _awaiting_cache(self, job: Obj) -> float | None:
        """Seconds left to wait for the cache to show the TrainJob this manager just created
        (None: it shows it, or another manager made it, or the grace is over: read it live)."""
        ref = job["status"]["workloadRef"]
        if self.trainjobs.get(ref.get("namespace") or job["metadata"]["namespace"], ref["name"]) is not None:
            return None
        made = self.created.get(str(ref.get("uid") or ""))
        left = CACHE_GRACE_SECONDS - (self.ctx.clock.monotonic() - made) if made is not None else 0.0
        return left if left > 0 else None

    async def _follow_workload(self, job: Obj, *, live: bool) -> Result | None:
        if (left := self._awaiting_cache(job)) is not None:
            return Result(requeue_after=left)
        pods = self._job_pods(job)
        decision = next_step.follow(
            job,
            await self._workload(job),
            self._goodput(job),
            pods,
            self.ctx.clock.now(),
            self._bandwidth(job),
        )
        if not live and not isinstance(decision, next_step.Progress):
            return await self._reconcile_live(_key(job), ensured=True)
        hardware = await self._hardware_failure(job, pods)
        if isinstance(decision, next_step.Restart):
            return await self._restart(job, decision, hardware, pods)
        report: dict[str, Any] | None = None
        level = diagnostics.diag_level(job["spec"])
        if isinstance(decision, next_step.Succeed) and level is not None:
            ours = await self.ctx.ownership.pods_of(job, pods)
            report, text, unreadable = await failure_log.completed_log(
                self.ctx.client, ours, self.tail_reader
            )
            decision = diagnostics.succeeded(decision, text, level, unreadable=unreadable)
        if isinstance(decision, next_step.Fail):
            await self._fail(job, decision, pods, hardware, entry=report)
            return None
        if isinstance(decision, next_step.Succeed):
            return await self._succeed(job, decision, hardware, pods)
        # Still open: the same step as last time writes nothing (a newer Job is an event away).
        await self._write_state(
            job,
            ConditionType.IN_PROGRESS,
            decision.reason,
            decision.message,
            decision.change,
            settled=True,
            hardware=hardware,
            pods=pods,
        )
        return Result(requeue_after=decision.requeue)

    async def _succeed(
        self,
        job: Obj,
        decision: next_step.Succeed,
        hardware: health.HardwareFailure | None,
        pods: Sequence[Obj],
    ) -> Result | None:
        """Write Succeeded and, when the measurements already allow one, the verdict in the same
        write; else the verdict is judged on later passes (:meth:`_judge`)."""
        moment = self.ctx.clock.now()
        succeeded = {**job, "status": copy.deepcopy(job.get("status") or {})}
        after, _ = set_exclusive(
            conditions_of(succeeded),
            ConditionType.SUCCEEDED,
            JobReason.WORKLOAD_COMPLETED,
            decision.message,
            job["metadata"].get("generation"),
            moment,
        )
        to_status(succeeded["status"], after)
        decided = verdicts.judge(succeeded, self._bandwidth(job), self._goodput(job), moment)
        verdict = decided if isinstance(decided, Verdict) else None

        def record(status: dict[str, Any]) -> None:
            if verdict is not None:
                _record_verdict(status, job, verdict, moment)

        written = await self._write_state(
            job,
            ConditionType.SUCCEEDED,
            JobReason.WORKLOAD_COMPLETED,
            decision.message,
            record,
            hardware=hardware,
            pods=pods,
        )
        if written is None:
            return None
        if verdict is not None:
            await verdict_writes.announce(self.ctx, job, verdict.failed, verdict.reason, verdict.message)
        if isinstance(decided, verdicts.Wait):
            return Result(requeue_after=decided.seconds)
        return None

    async def _restart(
        self,
        job: Obj,
        decision: next_step.Restart,
        hardware: health.HardwareFailure | None,
        pods: Sequence[Obj],
    ) -> Result | None:
        """Record the restart (one write), then carry it on as every later pass does."""
        written = await self._write_state(
            job,
            ConditionType.IN_PROGRESS,
            JobReason.WORKLOAD_RESTARTING,
            decision.message,
            restart.record(decision.workload_uid),
            hardware=hardware,
            pods=pods,
        )
        if written is None:
            return None  # terminal meanwhile, or gone
        counted = int((job.get("status") or {}).get("restartCount") or 0) + 1
        if written["status"].get("restartCount") == counted:  # this pass recorded it
            await self.ctx.recorder.normal(job, JobReason.WORKLOAD_RESTARTING, decision.message)
        return await self._continue_restart(written)

    async def _continue_restart(self, job: Obj) -> Result | None:
        """Delete the replaced workload; once it is gone, reset the goodput clock and create anew."""
        ref = job["status"]["workloadRef"]
        namespace = ref.get("namespace") or job["metadata"]["namespace"]
        live = await get_live(self.ctx.client, resources.TrainJob, ref["name"], namespace)
        if live is not None and restart.replaced(job["status"], live):
            if not live["metadata"].get("deletionTimestamp"):
                await delete_if_present(
                    self.ctx.client, resources.TrainJob, ref["name"], namespace, uid=live["metadata"]["uid"]
                )
            return Result(requeue_after=restart.requeue_after(job["spec"]))  # its deletion wakes us
        goodput = self._goodput(job)
        if goodput is not None:
            await self.ctx.status.update(
                resources.GoodputMeasurement, goodput, restart.reset_goodput(self.ctx.clock.now())
            )
        return await self._create_workload(job)

    async def _fail(
        self,
        job: Obj,
        decision: next_step.Fail,
        pods: list[Obj],
        hardware: health.HardwareFailure | None,
        *,
        entry: dict[str, Any] | None = None,
    ) -> None:
        """Write Failed with the failure log: ``entry`` when the caller read it already (a
        completed pod's), else that of the pod that failed (or of the stalled launcher)."""
        if entry is None:
            # the failed pod is chosen among those the Job's own TrainJob ran, not by label alone
            ours = await self.ctx.ownership.pods_of(job, pods)
            # a stalled run has no failed pod: its launcher's log shows where it stopped
            unfinished = FailureLogReason.STALLED if decision.reason == JobReason.WORKLOAD_STALLED else None
            entry = await failure_log.collect(self.ctx.client, ours, self.tail_reader, unfinished=unfinished)
            level = diagnostics.diag_level(job["spec"])
            if level is not None:
                decision = diagnostics.failed(decision, entry.get("tail", ""), level)
        annotation = (job["metadata"].get("annotations") or {}).get(Annotation.GROUP_NODES, "")
        group_nodes = [n for n in annotation.split(",") if n]

        def record(status: dict[str, Any]) -> None:
            status["failureLog"] = entry
            if not status.get("failedNodes"):
                cause = decision.cause or decision.reason
                status["failedNodes"] = failednodes.entries(group_nodes, cause, decision.message)
            if decision.verdict:
                verdict_writes.set_validation(
                    status, job, True, decision.reason, decision.message, at=self.ctx.clock.now()
                )

        await self._write_state(
            job, ConditionType.FAILED, decision.reason, decision.message, record, hardware=hardware, pods=pods
        )

    async def _hardware_failure(self, job: Obj, pods: list[Obj]) -> health.HardwareFailure | None:
        """What node health (``spec.nodeHealthMonitor``) adds to this pass's write, if anything."""
        if not job["spec"].get("nodeHealthMonitor"):
            return None
        nodes = health.nodes_to_check(pods, lambda name: self.nodes.get("", name))
        try:
            # cel-python takes milliseconds a node: the offload pool keeps the loop serving
            verdict = await asyncio.get_running_loop().run_in_executor(
                offload.executor(), health.check, job, nodes
            )
        except CELError as error:  # a bad expression is the user's; report it, never crash-loop
            log.warning("node health expression of %s is unusable: %s", job["metadata"]["name"], error)
            reported = (job["metadata"].get("uid", ""), error.expression)
            if reported not in self._invalid_health:
                self._invalid_health.add(reported)
                await self.ctx.recorder.warning(
                    job, EventReason.INVALID_NODE_HEALTH_EXPRESSION, health.invalid_expression_message(error)
                )
            return None
        for node, why in verdict.errors.items():
            log.info("node health of %s: %s counts as healthy: %s", job["metadata"]["name"], node, why)
        return verdict.update

    async def _write_state(
        self,
        job: Obj,
        cond_type: str,
        reason: str,
        message: str,
        extra: StatusChange | None = None,
        *,
        settled: bool = False,
        hardware: health.HardwareFailure | None = None,
        pods: Sequence[Obj] = (),
    ) -> Obj | None:
        """Make ``cond_type`` the Job's one True state, with ``extra``, what node health found
        (``hardware``) and the images the workload's ``pods`` run in the same write. No event for
        the first InProgress (one request per Job
        of a fan-out, saying what the condition says; the Workflow announces the launch once);
        Failed and Succeeded keep theirs; the first hardware failure's warning follows the write."""
        written = await self.ctx.status.set_exclusive(
            resources.Job,
            job,
            cond_type,
            reason,
            message,
            extra=_with_observed(job, extra, hardware, pods, self.ctx.clock.now()),
            unless_terminal=True,
            settled=settled,
            announce=cond_type != ConditionType.IN_PROGRESS,
        )
        if written is not None and hardware is not None and hardware.first:
            await self.ctx.recorder.warning(job, JobReason.HARDWARE_FAILURE_DETECTED, hardware.message)
        return written


def _with_observed(
    job: Obj,
    change: StatusChange | None,
    hardware: health.HardwareFailure | None,
    pods: Sequence[Obj],
    at: datetime,
) -> StatusChange | None:
    """``change`` and, in the same write, the images the workload's ``pods`` run and the
    ``HardwareFailed`` condition node health decided (as of ``at``)."""
    if hardware is None and not pods:
        return change

    def combined(status: dict[str, Any]) -> None:
        if change is not None:
            change(status)
        images.record(status, pods)
        if hardware is None:
            return
        hardware.change(status)
        set_in_status(
            status,
            ConditionType.HARDWARE_FAILED,
            ConditionStatus.TRUE,
            JobReason.HARDWARE_FAILURE_DETECTED,
            hardware.message,
            job["metadata"].get("generation"),
            at,
        )

    return combined


def _record_verdict(status: dict[str, Any], job: Obj, verdict: Verdict, at: datetime) -> None:
    """The verdict's ``ValidationFailed`` condition (as of ``at``) and the ``failedNodes`` a
    failing one implies (unless the Job names some already), into ``status``."""
    nodes = verdicts.failed_nodes({"metadata": job["metadata"], "status": status}, verdict)
    if nodes is not None:
        status["failedNodes"] = nodes
    verdict_writes.set_validation(status, job, verdict.failed, verdict.reason, verdict.message, at=at)
