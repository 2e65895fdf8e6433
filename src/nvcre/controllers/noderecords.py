"""The NodeRecord writer: when a Workflow has ended, each of its nodes' records gets its result.

The rules are ``nvcre.fleet.records``'; this shell reads the Workflow, its Jobs and their
measurements from the manager's caches, the failed-nodes entries from the Workflow's ConfigMap
(through ``orchestration.result_configmaps``), and writes each node's record: created when
missing, then one status write folding the result in, on top of the record the create returned
or the cache holds (no read first; a stale view costs a 409 and a read), up to
:data:`WRITES_IN_FLIGHT` nodes at a time. A node whose cached record already holds the Workflow's
result costs nothing, so reconciling an ended Workflow again (a resync, a restart) writes nothing
new; the fold on the live record skips a recorded result too, so a write that raced another, or
a crash between two nodes' writes, records each result exactly once. The Node itself is never
written.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lightkube import ApiError
from lightkube.resources.core_v1 import ConfigMap

from nvcre import resources
from nvcre.api.v1alpha1.constants import API_VERSION, GROUP, MANAGED_BY_VALUE, Default, Kind, Label
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import ended
from nvcre.controllers.children import get_live
from nvcre.controllers.context import Context
from nvcre.fleet.records import category_of, fold, node_results, recorded
from nvcre.objects import Obj, ObjectKey, controller_owner
from nvcre.orchestration.result_configmaps import failed_entries
from nvcre.runtime.controller import Controller, Result, owned_by
from nvcre.runtime.objects import to_plain
from nvcre.runtime.writes import update_with_retry

log = logging.getLogger(__name__)

BY_WORKFLOW_UID = "noderecords/workflow-uid"
"""Jobs by their controlling Workflow's UID."""
BY_JOB_UID = "noderecords/job-uid"
"""Measurements by their Job's UID."""
WAIT_FOR_JOBS = Result(requeue_after=1.0)
"""An ended Workflow whose Jobs the cache does not show ended yet: look again shortly."""
JOBS_GRACE_SECONDS = 30.0
"""How long after a Workflow's end its Jobs are waited for; after that, the nodes of the Jobs
that ended are recorded (a Job that never ends keeps no Workflow's records waiting forever)."""
WRITES_IN_FLIGHT = 16
"""Nodes whose records are written at a time: one after another, a 16,384-node Workflow's records
waited on each request's round trip (docs/benchmarks.md)."""


def _workflow_uid(job: Obj) -> list[str]:
    owner = controller_owner(job)
    if owner and owner.get("kind") == Kind.WORKFLOW and owner.get("uid"):
        return [str(owner["uid"])]
    return []


def _job_uid(measurement: Obj) -> list[str]:
    uid = ((measurement.get("metadata") or {}).get("labels") or {}).get(Label.JOB_UID)
    return [str(uid)] if uid else []


class NodeRecordController:
    def __init__(self, ctx: Context, *, workers: int = Default.MAX_CONCURRENT_RECONCILES) -> None:
        self.ctx = ctx
        manager = ctx.manager
        self.workflows = manager.informer(resources.Workflow)
        self.jobs = manager.informer(resources.Job)
        self.bandwidths = manager.informer(resources.BandwidthMeasurement)
        self.goodputs = manager.informer(resources.GoodputMeasurement)
        self.records = manager.informer(resources.NodeRecord)
        if not self.jobs.has_index(BY_WORKFLOW_UID):
            self.jobs.add_index(BY_WORKFLOW_UID, _workflow_uid)
        for informer in (self.bandwidths, self.goodputs):
            if not informer.has_index(BY_JOB_UID):
                informer.add_index(BY_JOB_UID, _job_uid)
        self.controller = Controller("noderecord", self.reconcile, workers=workers)
        self.controller.watch(self.workflows)
        self.controller.watch(self.jobs, owned_by(Kind.WORKFLOW, GROUP))
        manager.add(self.controller)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        workflow = self.workflows.get(key.namespace, key.name)
        if workflow is None or ended(workflow) is None:
            return None
        uid = str(workflow["metadata"].get("uid") or "")
        jobs = self.jobs.by_index(BY_WORKFLOW_UID, uid)
        if any(ended(job) is None for job in jobs) and self._recent(workflow):
            return WAIT_FOR_JOBS
        category = category_of(workflow)
        pending = self._pending(workflow, jobs, category, failed=[])
        if not pending:
            return None  # every node's cached record holds its result: nothing to read or write
        failed = await self._failed_entries(workflow)
        gate = asyncio.Semaphore(WRITES_IN_FLIGHT)

        async def write(node: str, result: dict[str, Any]) -> None:
            async with gate:
                await self._write(node, category, result)

        pending = self._pending(workflow, jobs, category, failed)
        outcomes = await asyncio.gather(
            *(write(node, result) for node, result in pending.items()), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome  # once every other node's write has ended: the next pass retries it
        return None

    def _recent(self, workflow: Obj) -> bool:
        """The Workflow ended less than :data:`JOBS_GRACE_SECONDS` ago."""
        end = ended(workflow)
        try:
            when = parse_time(end[1]) if end else None
        except ValueError:
            return False
        return when is not None and (self.ctx.clock.now() - when).total_seconds() < JOBS_GRACE_SECONDS

    def _pending(
        self, workflow: Obj, jobs: list[Obj], category: str, failed: list[dict[str, str]]
    ) -> dict[str, dict[str, Any]]:
        """The results of the nodes whose cached record does not hold them yet."""
        uids = [str(j["metadata"].get("uid") or "") for j in jobs]
        bandwidths = [m for uid in uids for m in self.bandwidths.by_index(BY_JOB_UID, uid)]
        goodputs = [m for uid in uids for m in self.goodputs.by_index(BY_JOB_UID, uid)]
        results = node_results(workflow, jobs, bandwidths, goodputs, failed)
        return {
            node: result
            for node, result in results.items()
            if not recorded((self.records.get("", node) or {}).get("status"), category, result)
        }

    async def _failed_entries(self, workflow: Obj) -> list[dict[str, str]]:
        ref = ((workflow.get("status") or {}).get("failedNodesRef") or {}).get("name")
        if not ref:
            return []
        config_map = await get_live(self.ctx.client, ConfigMap, ref, workflow["metadata"]["namespace"])
        return list(failed_entries(config_map))

    async def _write(self, node: str, category: str, result: dict[str, Any]) -> None:
        """Create the node's record when the cache lacks it, then fold the result into its status
        and write it on top of the record the create returned, else the cached one (a stale one
        costs a 409, then the live record is read and folded again): one status write, none when
        recorded."""
        current = self.records.get("", node)
        if current is None:
            body = {
                "apiVersion": API_VERSION,
                "kind": Kind.NODE_RECORD,
                "metadata": {"name": node, "labels": {Label.MANAGED_BY: MANAGED_BY_VALUE}},
                "spec": {"nodeName": node},
            }
            try:
                created = await self.ctx.client.create(resources.NodeRecord.from_dict(body))
                current = to_plain(resources.NodeRecord, created)
            except ApiError as error:
                if error.status.code != 409:
                    raise  # 409: it exists already (the cache had not seen it)
        now = self.ctx.clock.now()

        def mutate(live: Obj) -> Obj:
            live["status"] = fold(live.get("status"), category, [result], now)
            return live

        await update_with_retry(
            self.ctx.client, resources.NodeRecord, node, None, mutate, status=True, current=current
        )
