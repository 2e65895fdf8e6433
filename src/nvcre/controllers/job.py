"""The Job controller: one TrainJob per Job, its phase, failed nodes, node health and measurements."""

from __future__ import annotations

import logging
from typing import Any

from lightkube import ApiError
from lightkube.resources.core_v1 import Node

from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    GROUP,
    MANAGED_BY_VALUE,
    TRAINER_API_VERSION,
    Annotation,
    ConditionType,
    Default,
    FailedNodeReason,
    Finalizer,
    JobReason,
    Kind,
    Label,
    TrainerKind,
)
from nvcre.api.v1alpha1.meta import format_time, parse_time
from nvcre.conditions import is_terminal
from nvcre.controllers import indexes, resources
from nvcre.controllers.children import delete_if_present, get_live
from nvcre.controllers.context import Context
from nvcre.controllers.finalizers import ensure_finalizer, remove_finalizer
from nvcre.controllers.indexes import POD_JOB_INDEX, POD_NODE_INDEX
from nvcre.controllers.status import condition_true, conditions_of, now
from nvcre.health.nodes import HARDWARE_FAILURE_MESSAGE, merge_failed_nodes, unhealthy_nodes
from nvcre.health.restart import restart_eligible, restart_message, sample_interval, stalled
from nvcre.health.scheduling import failed_pod, unschedulable
from nvcre.naming import bandwidth_measurement_name, goodput_measurement_name
from nvcre.runtime.controller import Controller, Result, by_label, owned_by
from nvcre.runtime.objects import Obj, ObjectKey, controller_owner, to_plain
from nvcre.workload import trainjob

log = logging.getLogger(__name__)

REQUEUE = Result(requeue_after=Default.REQUEUE_SECONDS)
LOG_TAIL_LINES = 800
LOG_TAIL_BYTES = 32 * 1024


def _active(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class JobController:
    def __init__(self, ctx: Context, *, workers: int = Default.MAX_CONCURRENT_RECONCILES) -> None:
        self.ctx = ctx
        manager = ctx.manager
        self.jobs = manager.informer(resources.Job)
        self.trainjobs = manager.informer(resources.TrainJob)
        self.pods = indexes.pods(manager)
        self.nodes = manager.informer(Node)
        self.goodputs = manager.informer(resources.GoodputMeasurement)
        self.controller = Controller("job", self.reconcile, workers=workers)
        self.controller.watch(self.jobs)
        self.controller.watch(self.trainjobs, owned_by(Kind.JOB, GROUP))
        self.controller.watch(self.pods, self._pod_to_job)
        self.controller.watch(self.nodes, self._node_to_jobs)
        self.controller.watch(self.goodputs, by_label(Label.JOB))
        manager.add(self.controller)

    # -- event mapping ------------------------------------------------------------------------

    @staticmethod
    def _pod_to_job(event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        job = (new["metadata"].get("labels") or {}).get(Label.JOB)
        return [ObjectKey(new["metadata"].get("namespace", ""), job)] if job else []

    def _node_to_jobs(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        if old is not None:
            relevant = ("labels",)
            same_meta = all(old["metadata"].get(k) == new["metadata"].get(k) for k in relevant)
            same = (
                same_meta
                and (old.get("spec") or {}).get("taints") == (new.get("spec") or {}).get("taints")
                and (old.get("spec") or {}).get("unschedulable")
                == (new.get("spec") or {}).get("unschedulable")
                and (old.get("status") or {}).get("conditions") == (new.get("status") or {}).get("conditions")
            )
            if same:
                return []
        keys = set()
        for pod in self.pods.by_index(POD_NODE_INDEX, new["metadata"]["name"]):
            job = (pod["metadata"].get("labels") or {}).get(Label.JOB)
            if job:
                keys.add(ObjectKey(pod["metadata"].get("namespace", ""), job))
        return sorted(keys)

    # -- reconcile ----------------------------------------------------------------------------

    def _job_pods(self, job: Obj) -> list[Obj]:
        namespace = job["metadata"].get("namespace", "")
        return [
            p
            for p in self.pods.by_index(POD_JOB_INDEX, job["metadata"]["name"])
            if p["metadata"].get("namespace") == namespace
        ]

    async def reconcile(self, key: ObjectKey) -> Result | None:
        job = self.jobs.get(key.namespace, key.name)
        if job is None:
            return None
        if job["metadata"].get("deletionTimestamp"):
            return await self._delete(job)
        if await ensure_finalizer(self.ctx.client, resources.Job, job, Finalizer.JOB):
            return None
        conditions = conditions_of(job)
        if is_terminal(conditions):
            return None
        status = job.get("status") or {}
        if not status.get("workloadRef"):
            return await self._create_workload(job)
        await self._ensure_measurements(job)
        result = await self._follow_workload(job)
        if job["spec"].get("nodeHealthMonitor"):
            await self._check_node_health(job)
        return result

    async def _delete_workload(self, job: Obj) -> None:
        ref = (job.get("status") or {}).get("workloadRef")
        if not ref:
            return
        namespace = ref.get("namespace") or job["metadata"]["namespace"]
        await delete_if_present(self.ctx.client, resources.TrainJob, ref["name"], namespace)

    async def _delete(self, job: Obj) -> Result | None:
        await self._delete_workload(job)
        active = [p for p in self._job_pods(job) if _active(p)]
        if active and not self._drain_expired(job):
            return REQUEUE
        await remove_finalizer(self.ctx.client, resources.Job, job, Finalizer.JOB)
        return None

    @staticmethod
    def _drain_expired(job: Obj) -> bool:
        anchors = [parse_time(job["metadata"]["deletionTimestamp"])]
        for condition in (job.get("status") or {}).get("conditions") or ():
            if (
                condition.get("type")
                in (ConditionType.FAILED, ConditionType.HARDWARE_FAILED, ConditionType.SUCCEEDED)
                and condition.get("status") == "True"
            ):
                anchors.append(parse_time(condition["lastTransitionTime"]))
        return (now() - max(anchors)).total_seconds() > Default.POD_DRAIN_GRACE_SECONDS

    async def _create_workload(self, job: Obj) -> Result | None:
        try:
            body = trainjob.build(job)
        except trainjob.AdapterError as error:
            await self.ctx.status.set_exclusive(
                resources.Job,
                job,
                ConditionType.FAILED,
                JobReason.WORKLOAD_CREATION_ERROR,
                f"Unsupported workload type: {error}",
                unless_terminal=True,
            )
            return None
        name = body["metadata"]["name"]
        namespace = job["metadata"]["namespace"]
        reason, verb = JobReason.WORKLOAD_CREATED, "created and is starting"
        try:
            await self.ctx.client.create(resources.TrainJob.from_dict(body))
        except ApiError as error:
            if error.status.code != 409:
                await self.ctx.recorder.warning(
                    job,
                    JobReason.WORKLOAD_CREATION_ERROR,
                    f"Failed to create TrainJob/{name}: {error.status.message}",
                )
                raise
            existing = to_plain(
                resources.TrainJob, await self.ctx.client.get(resources.TrainJob, name, namespace=namespace)
            )
            if existing["metadata"].get("deletionTimestamp"):
                return Result(requeue_after=1.0)  # the previous attempt's workload is still going away
            owner = controller_owner(existing)
            if not owner or owner.get("uid") != job["metadata"].get("uid"):
                await self.ctx.status.set_exclusive(
                    resources.Job,
                    job,
                    ConditionType.FAILED,
                    JobReason.WORKLOAD_CREATION_ERROR,
                    f"Failed to build workload: TrainJob/{name} already exists and is not controlled by Job {job['metadata']['name']}",
                    unless_terminal=True,
                )
                return None
            reason, verb = JobReason.WORKLOAD_ADOPTED, "adopted"
        ref = {
            "apiVersion": TRAINER_API_VERSION,
            "kind": TrainerKind.TRAIN_JOB,
            "name": name,
            "namespace": namespace,
        }

        def extra(status: dict[str, Any]) -> None:
            status["workloadRef"] = ref

        await self.ctx.status.set_exclusive(
            resources.Job,
            job,
            ConditionType.IN_PROGRESS,
            reason,
            f"Workload TrainJob/{name} {verb}",
            extra=extra,
            unless_terminal=True,
        )
        return REQUEUE

    async def _follow_workload(self, job: Obj) -> Result | None:
        ref = job["status"]["workloadRef"]
        name = ref["name"]
        namespace = ref.get("namespace") or job["metadata"]["namespace"]
        # a cache miss is not a deletion: the TrainJob watch may lag behind its create
        workload = self.trainjobs.get(namespace, name) or await get_live(
            self.ctx.client, resources.TrainJob, name, namespace
        )
        goodput = self.goodputs.get(
            job["metadata"]["namespace"], goodput_measurement_name(job["metadata"]["name"])
        )
        if workload is None:
            if restart_eligible(job["spec"], job.get("status") or {}, goodput):
                return await self._restart(job, goodput)
            return await self._fail(job, f"Workload TrainJob/{name} was deleted")
        phase = trainjob.status(workload)
        if phase.phase == "Failed":
            if restart_eligible(job["spec"], job.get("status") or {}, goodput):
                return await self._restart(job, goodput)
            message = (
                f"Workload TrainJob/{name} failed: {phase.message}"
                if phase.message
                else f"Workload TrainJob/{name} has failed"
            )
            return await self._fail(job, message)
        if phase.phase == "Succeeded":
            message = (
                f"Workload TrainJob/{name} completed: {phase.message}"
                if phase.message
                else f"Workload TrainJob/{name} completed successfully"
            )
            await self.ctx.status.set_exclusive(
                resources.Job,
                job,
                ConditionType.SUCCEEDED,
                JobReason.WORKLOAD_COMPLETED,
                message,
                unless_terminal=True,
            )
            return None
        if phase.phase == "Pending":
            detail = f": {phase.message}" if phase.message else ""
            await self.ctx.status.set_exclusive(
                resources.Job,
                job,
                ConditionType.IN_PROGRESS,
                JobReason.WORKLOAD_PENDING,
                f"Workload TrainJob/{name} is pending{detail}",
                unless_terminal=True,
            )
            return REQUEUE
        why = stalled(job, goodput, now())
        if why is not None:
            if restart_eligible(job["spec"], job.get("status") or {}, goodput):
                return await self._restart(job, goodput)
            return await self._fail(job, why, reason=JobReason.WORKLOAD_STALLED)
        return await self._running(job, name)

    async def _restart(self, job: Obj, goodput: Obj | None) -> Result:
        """Start the workload again from its last checkpoint (same TrainJob name, fresh object)."""
        await self._delete_workload(job)
        message = restart_message(job["spec"], job["status"])

        def extra(status: dict[str, Any]) -> None:
            status.pop("workloadRef", None)
            status.pop("workloadStartTime", None)
            status["restartCount"] = int(status.get("restartCount") or 0) + 1

        await self.ctx.status.set_exclusive(
            resources.Job,
            job,
            ConditionType.IN_PROGRESS,
            JobReason.WORKLOAD_RESTARTING,
            message,
            extra=extra,
            unless_terminal=True,
        )
        await self.ctx.recorder.normal(job, JobReason.WORKLOAD_RESTARTING, message)
        if goodput is not None:

            def reset(status: dict[str, Any]) -> None:
                for key in ("lastStepTimestamp", "avgStepTimeSec", "applicationStartTime"):
                    status.pop(key, None)
                status["startTime"] = format_time(now())

            await self.ctx.status.update(resources.GoodputMeasurement, goodput, reset)
        interval = job["spec"].get("goodputMeasurement", {}).get("sampleInterval")
        return Result(requeue_after=2 * sample_interval(job["spec"]) if interval else 30.0)

    async def _running(self, job: Obj, name: str) -> Result:
        blocked = unschedulable(self._job_pods(job))
        stamp = format_time(now())
        if blocked is not None:
            since_text = (job.get("status") or {}).get("schedulingBlockedSince") or stamp
            grace = job["spec"].get("schedulingStallGraceSeconds") or 300
            waited = (now() - parse_time(since_text)).total_seconds()
            if waited >= grace:
                reason = JobReason.WORKLOAD_SCHEDULING_BLOCKED
                message = (
                    f"Workload TrainJob/{name} cannot be scheduled: pod {blocked.pod}: {blocked.message}"
                )
            else:
                reason = JobReason.WORKLOAD_PENDING
                message = f"Workload TrainJob/{name} is pending: pod {blocked.pod}: {blocked.message}"

            def mark_blocked(status: dict[str, Any]) -> None:
                status.setdefault("schedulingBlockedSince", since_text)
                status.pop("workloadStartTime", None)  # a workload that cannot be placed is not running

            await self.ctx.status.set_exclusive(
                resources.Job,
                job,
                ConditionType.IN_PROGRESS,
                reason,
                message,
                extra=mark_blocked,
                unless_terminal=True,
            )
            return Result(requeue_after=min(Default.REQUEUE_SECONDS, max(grace - waited, 0.05)))

        def mark_running(status: dict[str, Any]) -> None:
            status.setdefault("workloadStartTime", stamp)
            if status.pop("schedulingBlockedSince", None):
                status["schedulingResumedTime"] = stamp

        await self.ctx.status.set_exclusive(
            resources.Job,
            job,
            ConditionType.IN_PROGRESS,
            JobReason.WORKLOAD_RUNNING,
            f"Workload TrainJob/{name} is running",
            extra=mark_running,
            unless_terminal=True,
        )
        return REQUEUE

    async def _failure_log(self, job: Obj) -> dict[str, Any]:
        pods = self._job_pods(job)
        found = failed_pod(pods)
        if found is None:
            return {
                "podName": "",
                "nodeName": "",
                "exitCode": 0,
                "reason": "PodNotFound" if not pods else "NoTerminatedContainer",
            }
        pod, state = found
        entry: dict[str, Any] = {
            "podName": pod["metadata"]["name"],
            "nodeName": (pod.get("spec") or {}).get("nodeName", ""),
            "exitCode": int(state.get("exitCode", 0)),
            "reason": state.get("reason") or "Error",
        }
        try:
            lines = [
                line
                async for line in self.ctx.client.log(
                    pod["metadata"]["name"],
                    namespace=pod["metadata"]["namespace"],
                    container=state.get("container"),
                    tail_lines=LOG_TAIL_LINES,
                )
            ]
            tail = "".join(lines).encode()[-LOG_TAIL_BYTES:].decode(errors="ignore")
            if tail:
                entry["tail"] = tail
        except ApiError as error:
            log.info("no logs for %s: %s", pod["metadata"]["name"], error)
        return entry

    async def _fail(
        self, job: Obj, message: str, *, reason: str = JobReason.WORKLOAD_FAILED
    ) -> Result | None:
        failure_log = await self._failure_log(job)
        group_nodes = [
            n
            for n in (job["metadata"].get("annotations") or {}).get(Annotation.GROUP_NODES, "").split(",")
            if n
        ]

        def extra(status: dict[str, Any]) -> None:
            status["failureLog"] = failure_log
            if not status.get("failedNodes"):
                status["failedNodes"] = merge_failed_nodes(
                    [], group_nodes, FailedNodeReason.WORKLOAD_FAILED, message
                )

        await self.ctx.status.set_exclusive(
            resources.Job, job, ConditionType.FAILED, reason, message, extra=extra, unless_terminal=True
        )
        return None

    async def _check_node_health(self, job: Obj) -> None:
        expression = job["spec"]["nodeHealthMonitor"]["cel"]["expression"]
        hosts = {
            str(p["spec"]["nodeName"]) for p in self._job_pods(job) if (p.get("spec") or {}).get("nodeName")
        }
        nodes = [n for n in (self.nodes.get("", h) for h in sorted(hosts)) if n is not None]
        try:
            failing = unhealthy_nodes(expression, nodes)
        except Exception as error:  # a bad expression is the user's; report it, never crash-loop
            log.warning("node health expression of %s failed: %s", job["metadata"]["name"], error)
            return
        known = {(e["name"], e["reason"]) for e in (job.get("status") or {}).get("failedNodes") or ()}
        new = [n for n in failing if (n, FailedNodeReason.HARDWARE_FAILURE_DETECTED) not in known]
        if not new:
            return
        all_failing = sorted(
            {n for n, r in known if r == FailedNodeReason.HARDWARE_FAILURE_DETECTED} | set(failing)
        )

        def extra(status: dict[str, Any]) -> None:
            status["failedNodes"] = merge_failed_nodes(
                status.get("failedNodes") or [],
                failing,
                FailedNodeReason.HARDWARE_FAILURE_DETECTED,
                HARDWARE_FAILURE_MESSAGE,
            )

        message = f"Hardware failure detected on node(s): [{' '.join(all_failing)}]"
        first = not condition_true(job, ConditionType.HARDWARE_FAILED)
        await self.ctx.status.set_condition(
            resources.Job,
            job,
            ConditionType.HARDWARE_FAILED,
            "True",
            JobReason.HARDWARE_FAILURE_DETECTED,
            message,
            extra=extra,
        )
        if first:
            await self.ctx.recorder.warning(job, JobReason.HARDWARE_FAILURE_DETECTED, message)

    async def _ensure_measurements(self, job: Obj) -> None:
        meta = job["metadata"]
        owner = controller_owner(job) or {
            "apiVersion": API_VERSION,
            "kind": Kind.JOB,
            "name": meta["name"],
            "uid": meta.get("uid"),
        }
        for config_key, resource, name in (
            ("goodputMeasurement", resources.GoodputMeasurement, goodput_measurement_name(meta["name"])),
            (
                "bandwidthMeasurement",
                resources.BandwidthMeasurement,
                bandwidth_measurement_name(meta["name"]),
            ),
        ):
            config = job["spec"].get(config_key)
            if not config:
                continue
            body = {
                "apiVersion": API_VERSION,
                "kind": "GoodputMeasurement"
                if config_key == "goodputMeasurement"
                else "BandwidthMeasurement",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": {
                        Label.MANAGED_BY: MANAGED_BY_VALUE,
                        Label.JOB: meta["name"],
                        Label.JOB_UID: meta.get("uid", ""),
                    },
                    "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
                },
                "spec": {"jobRef": {"apiGroup": GROUP, "kind": Kind.JOB, "name": meta["name"]}, **config},
            }
            try:
                await self.ctx.client.create(resource.from_dict(body))
            except ApiError as error:
                if error.status.code != 409:
                    what = body["kind"]
                    await self.ctx.recorder.warning(
                        job, "MeasurementCreationError", f"Failed to ensure {what}: {error.status.message}"
                    )
