"""ReportExportPolicy and ReportExport: freeze an ended Certification's report and deliver it.

Two controllers. ``reportexportpolicy`` (keyed by policy, woken by its policies, by every
Certification of their source namespaces and by their exports) creates one ReportExport in the policy's namespace for
each ended Certification it selects that has none and that ended within the policy's shorter
retention (``nvcre.decide.reportexport.exportable``), so that an export its retention deleted is
not made again. An ended export is deleted once its retention has passed. ``reportexport`` freezes the export's report
(the JSON ``nvcrectl certification report -o json`` prints, built by the same code) into a
ConfigMap the export owns, then hands it to :class:`Delivery`, which POSTs it off the reconcile
path: its own tasks with their own concurrency bound, each request bounded by the webhook's
timeout, so a slow webhook never holds a worker of this or any other controller. Each attempt's
outcome is written to the export's status (``nvcre.decide.reportexport.after_attempt``); that
write wakes the export again, which waits for ``nextAttemptTime`` by requeueing.

The signing key and the bearer token are read from their Secrets for each attempt and used only
to sign and to authenticate: they never reach a status, an event or a log line.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
import ssl
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Final

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import ConfigMap, Secret

from nvcre import resources
from nvcre.api.v1alpha1.constants import EventType, Label
from nvcre.api.v1alpha1.meta import format_time
from nvcre.api.v1alpha1.reportexport import DELIVERY_HEADER, REPORT_HEADER, SIGNATURE_HEADER
from nvcre.conditions import ended
from nvcre.controllers.children import (
    HolderTerminating,
    NameTaken,
    create_controlled,
    create_or_adopt,
    delete_if_present,
    get_live,
)
from nvcre.controllers.context import Context
from nvcre.decide import reportexport as rx
from nvcre.durations import parse_duration
from nvcre.objects import Obj, ObjectKey
from nvcre.report import linking
from nvcre.report.build import CertificationObjects, certification_report
from nvcre.report.history import target_nodes
from nvcre.report.jsonreport import to_json
from nvcre.runtime.clock import MAX_WALL_WAIT_SECONDS
from nvcre.runtime.controller import Controller, Result
from nvcre.runtime.informer import Informer
from nvcre.runtime.objects import to_plain

log = logging.getLogger(__name__)

DELIVERY_CONCURRENCY: Final = 8
"""POSTs in flight at once, all exports together."""
IN_FLIGHT_RECHECK: Final = 30.0
"""Seconds after which an export whose POST is in flight is looked at again (its status write
wakes it sooner)."""


async def _list(client: AsyncClient, resource: Any, namespace: str, labels: dict[str, Any]) -> list[Obj]:
    return [to_plain(resource, o) async for o in client.list(resource, namespace=namespace, labels=labels)]


async def _labelled(
    client: AsyncClient, resource: Any, namespace: str, key: str, names: list[str]
) -> list[Obj]:
    found = [
        obj
        for labels in linking.selectors(key, names)
        for obj in await _list(client, resource, namespace, labels)
    ]
    return linking.by_name(found)


async def read_certification(
    client: AsyncClient, cert: Obj, now: datetime, records: Informer
) -> CertificationObjects:
    """What the report of ``cert`` is built from, as ``nvcrectl certification report`` reads it
    (:mod:`nvcre.report.linking`): its Workflows, their Jobs, measurements and node-result
    ConfigMaps, read live, and its target nodes' NodeRecords from ``records`` (the manager's
    informer)."""
    namespace = cert["metadata"]["namespace"]
    workflows = await _list(
        client, resources.Workflow, namespace, {Label.CERTIFICATION: cert["metadata"]["name"]}
    )
    jobs = await _labelled(client, resources.Job, namespace, Label.WORKFLOW, linking.names(workflows))
    job_names = linking.names(jobs)
    config_maps = {
        name: await get_live(client, ConfigMap, name, namespace)
        for name in linking.result_config_maps(workflows)
    }
    objects = linking.workflow_objects(
        workflows,
        jobs,
        await _labelled(client, resources.BandwidthMeasurement, namespace, Label.JOB, job_names),
        await _labelled(client, resources.GoodputMeasurement, namespace, Label.JOB, job_names),
        config_maps,
    )
    nodes = target_nodes([w.workflow for w in objects])
    found = [r for r in (records.get("", node) for node in nodes) if r is not None]
    return CertificationObjects(certification=cert, workflows=objects, now=now, records=found)


def _ssl_context(webhook: Obj) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if webhook.get("caBundle"):
        context.load_verify_locations(cadata=base64.b64decode(webhook["caBundle"]).decode())
    return context


def _same_source(cert: Obj) -> Callable[[Obj], bool]:
    """Whether an export is of ``cert`` (an earlier create of ours)."""
    uid = cert["metadata"]["uid"]
    return lambda live: bool(live["spec"]["sourceRef"]["uid"] == uid)


def _policy_of(event: str, old: Obj | None, new: Obj) -> Iterable[ObjectKey]:
    name = ((new.get("spec") or {}).get("policyRef") or {}).get("name")
    return [ObjectKey(new["metadata"]["namespace"], name)] if name else []


async def announce(ctx: Context, written: Obj | None, phase: str | None) -> None:
    """One event when a write ended the export in ``phase`` (Delivered, Failed, Cancelled, Skipped): its
    reason and message, a Warning when it failed. Nothing when the write found it ended already."""
    status = (written or {}).get("status") or {}
    if written is None or phase not in rx.TERMINAL_PHASES or status.get("phase") != phase:
        return
    type_ = EventType.WARNING if phase == rx.FAILED else EventType.NORMAL
    await ctx.recorder.emit(written, type_, str(status.get("reason")), str(status.get("message") or ""))


class Delivery:
    """POSTs of frozen reports, off the reconcile path: at most ``concurrency`` at once, one per
    export."""

    def __init__(self, ctx: Context, concurrency: int = DELIVERY_CONCURRENCY) -> None:
        self.ctx = ctx
        self._slots = asyncio.Semaphore(concurrency)
        self._in_flight: set[ObjectKey] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, key: ObjectKey, export: Obj) -> None:
        """Start the next attempt of ``export`` unless one is in flight."""
        if key in self._in_flight:
            return
        self._in_flight.add(key)
        task = asyncio.create_task(self._deliver(key, export), name=f"deliver {key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, key: ObjectKey, export: Obj) -> None:
        try:
            async with self._slots:
                attempt = await self._attempt(export)
            spec, status = export["spec"], export.get("status") or {}
            changes = rx.after_attempt(spec, status, attempt)

            def record(live: dict[str, Any]) -> None:
                if live.get("phase") not in rx.TERMINAL_PHASES:  # e.g. cancelled meanwhile
                    rx.apply(live, changes)

            written = await self.ctx.status.update(resources.ReportExport, export, record)
            await announce(self.ctx, written, changes.get("phase"))
        except Exception:  # the next reconcile tries again; the error is the API server's
            log.exception("report export %s: recording the delivery failed", key)
        finally:
            self._in_flight.discard(key)

    async def _secret_value(self, export: Obj, field: str) -> bytes | None:
        """The value of the Secret key the webhook's ``field`` names (None when it names none),
        read live from the export's namespace; LookupError when it is missing."""
        ref = export["spec"]["webhook"].get(field)
        if not ref:
            return None
        secret = await get_live(self.ctx.client, Secret, ref["name"], export["metadata"]["namespace"])
        value = ((secret or {}).get("data") or {}).get(ref["key"])
        if value is None:
            raise LookupError(f'webhook.{field}: key "{ref["key"]}" of Secret "{ref["name"]}" not found')
        return base64.b64decode(value)

    async def _attempt(self, export: Obj) -> rx.Attempt:
        """One POST of the frozen report (never raises: every failure is an attempt's outcome)."""
        webhook = export["spec"]["webhook"]
        namespace = export["metadata"]["namespace"]
        try:
            name = export["status"]["snapshotRef"].get("name")
            snapshot = await get_live(self.ctx.client, ConfigMap, name, namespace) if name else None
            packed = ((snapshot or {}).get("binaryData") or {}).get(rx.SNAPSHOT_KEY)
            if packed is None:
                raise LookupError(f"the snapshot ConfigMap {export['status']['snapshotRef']['name']} is gone")
            body = gzip.decompress(base64.b64decode(packed))
            key = await self._secret_value(export, "signingSecretRef")
            token = await self._secret_value(export, "bearerTokenSecretRef")
        except (LookupError, ApiError) as error:
            return rx.Attempt(self.ctx.clock.now(), None, f"cannot send the report: {error}")
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: export["metadata"]["uid"],
            **rx.identity_headers(export),
        }
        if key is not None:
            headers[SIGNATURE_HEADER] = rx.signature(key, body)
        if token is not None:
            headers["Authorization"] = "Bearer " + token.decode().strip()
        timeout = parse_duration(webhook.get("timeout") or "10s") / 1e9
        try:
            async with httpx2.AsyncClient(
                verify=_ssl_context(webhook), timeout=timeout, trust_env=False
            ) as http:
                answer = await http.post(webhook["url"], content=body, headers=headers)
        except (httpx2.HTTPError, ssl.SSLError, OSError) as error:
            return rx.Attempt(
                self.ctx.clock.now(), None, f"POST {webhook['url']}: {type(error).__name__}: {error}"
            )
        at = self.ctx.clock.now()
        if 200 <= answer.status_code < 300:
            return rx.Attempt(at, answer.status_code, "")
        text = answer.text.strip()[: rx.MAX_MESSAGE]
        return rx.Attempt(at, answer.status_code, f"POST {webhook['url']}: HTTP {answer.status_code}: {text}")


class ReportExportControllers:
    def __init__(
        self,
        ctx: Context,
        *,
        workers: int,
        cluster_id: str | None = None,
        delivery_concurrency: int = DELIVERY_CONCURRENCY,
    ) -> None:
        self.ctx = ctx
        self.cluster_id = cluster_id
        manager = ctx.manager
        self.policies = manager.informer(resources.ReportExportPolicy)
        self.exports = manager.informer(resources.ReportExport)
        self.certifications = manager.informer(resources.Certification)
        self.records = manager.informer(resources.NodeRecord)  # the report's node history
        self.delivery = Delivery(ctx, delivery_concurrency)
        self.policy_controller = Controller("reportexportpolicy", self.reconcile_policy, workers=workers)
        self.policy_controller.watch(self.policies)
        self.policy_controller.watch(self.certifications, self._policies_of)
        self.policy_controller.watch(self.exports, _policy_of)  # a deleted export is made anew
        manager.add(self.policy_controller)
        self.export_controller = Controller("reportexport", self.reconcile_export, workers=workers)
        self.export_controller.watch(self.exports)
        manager.add(self.export_controller)

    def _policies_of(self, event: str, old: Obj | None, new: Obj) -> Iterable[ObjectKey]:
        """The policies of an ended Certification's namespace (a running one's many status
        writes wake none)."""
        if ended(new) is None:
            return
        namespace = new["metadata"].get("namespace")
        for policy in self.policies.items():
            if namespace in ((policy.get("spec") or {}).get("source") or {}).get("namespaces", ()):
                yield ObjectKey(policy["metadata"]["namespace"], policy["metadata"]["name"])

    # -- policies -----------------------------------------------------------------------------

    async def reconcile_policy(self, key: ObjectKey) -> Result | None:
        policy = self.policies.get(key.namespace, key.name)
        if policy is None:
            return None
        for namespace in ((policy.get("spec") or {}).get("source") or {}).get("namespaces") or ():
            for cert in self.certifications.items(namespace):
                if not rx.exportable(policy, cert, self.ctx.clock.now()):
                    continue
                body = rx.export_body(policy, cert, self.cluster_id)
                if self.exports.get(key.namespace, body["metadata"]["name"]) is not None:
                    continue
                try:
                    await create_or_adopt(self.ctx.client, resources.ReportExport, body, _same_source(cert))
                except (NameTaken, HolderTerminating) as error:
                    log.warning("report export policy %s: %s holds the name; not exported", key, error)
        return None

    # -- exports ------------------------------------------------------------------------------

    async def reconcile_export(self, key: ObjectKey) -> Result | None:
        export = await get_live(self.ctx.client, resources.ReportExport, key.name, key.namespace)
        if export is None:
            return None
        status = export.get("status") or {}
        asked = rx.control(export["spec"], status, self.ctx.clock.now())
        if asked is not None:  # the write wakes the export again
            written = await self.ctx.status.update(
                resources.ReportExport, export, lambda live: rx.apply(live, asked)
            )
            await announce(self.ctx, written, asked.get("phase"))
            return None
        if status.get("phase") in rx.TERMINAL_PHASES:
            return await self._expire(export)
        if not status.get("snapshotRef"):
            return await self._freeze(export)
        wait = rx.wait_seconds(status, self.ctx.clock.now())
        if wait > 0:
            return Result(requeue_after=wait)
        self.delivery.submit(key, export)
        return Result(requeue_after=IN_FLIGHT_RECHECK)

    async def _expire(self, export: Obj) -> Result | None:
        """Delete an ended export once its retention has passed (its snapshot ConfigMap goes with
        it, through the garbage collector); until then look again when it will have (at most
        :data:`MAX_WALL_WAIT_SECONDS` ahead)."""
        expires = rx.expiry(export["spec"], export.get("status") or {})
        if expires is None:
            return None
        left = (expires - self.ctx.clock.now()).total_seconds()
        if left > 0:
            return Result(requeue_after=min(left, MAX_WALL_WAIT_SECONDS))
        meta = export["metadata"]
        if await delete_if_present(
            self.ctx.client, resources.ReportExport, meta["name"], meta["namespace"], uid=meta["uid"]
        ):
            log.info(
                "report export %s/%s deleted: %s at %s, its retention ended at %s",
                meta["namespace"],
                meta["name"],
                export["status"]["phase"],
                export["status"]["completionTime"],
                format_time(expires),
            )
        return None

    async def _end(self, export: Obj, reason: str, message: str) -> None:
        now = format_time(self.ctx.clock.now())

        def fail(status: dict[str, Any]) -> None:
            status.update(phase=rx.FAILED, reason=reason, message=message, completionTime=now)

        written = await self.ctx.status.update(resources.ReportExport, export, fail)
        await announce(self.ctx, written, rx.FAILED)

    async def _freeze(self, export: Obj) -> Result | None:
        """Build the report, keep it in the export's ConfigMap and record it in the status."""
        ref = export["spec"]["sourceRef"]
        cert = await get_live(self.ctx.client, resources.Certification, ref["name"], ref["namespace"])
        if cert is None or cert["metadata"]["uid"] != ref["uid"]:
            await self._end(
                export,
                "SourceDeletedBeforeSnapshot",
                f"Certification {ref['namespace']}/{ref['name']} was deleted before its report was frozen",
            )
            return None
        report = to_json(
            certification_report(
                await read_certification(self.ctx.client, cert, self.ctx.clock.now(), self.records)
            )
        )
        try:
            frozen = rx.snapshot(report)
        except rx.SnapshotTooLarge as error:
            await self._end(export, "PayloadTooLarge", str(error))
            return None
        skip = rx.skipped(export["spec"], frozen.result, self.ctx.clock.now())
        if skip is not None:  # nothing kept, nothing sent

            def end(live: dict[str, Any]) -> None:
                if live.get("phase") not in rx.TERMINAL_PHASES:  # not cancelled meanwhile
                    rx.apply(live, skip)

            written = await self.ctx.status.update(resources.ReportExport, export, end)
            await announce(self.ctx, written, rx.SKIPPED)
            return None
        name = rx.snapshot_name(export)
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "binaryData": {rx.SNAPSHOT_KEY: base64.b64encode(frozen.gzipped).decode()},
        }
        try:
            await create_controlled(self.ctx.client, ConfigMap, body, export)
        except HolderTerminating:
            return Result(requeue_after=1.0)
        except NameTaken:
            await self._end(
                export, "SnapshotBuildFailed", f"ConfigMap {name} exists and is not this export's"
            )
            return None

        def ready(status: dict[str, Any]) -> None:
            status.update(
                phase=rx.SNAPSHOT_READY,
                reason=rx.SNAPSHOT_READY,
                message=f"report of Certification {ref['name']} frozen in ConfigMap {name}",
                result=frozen.result,
                reportID=rx.identity_headers(export)[REPORT_HEADER],
                snapshotRef={"name": name},
                sha256=frozen.sha256,
                payloadBytes=len(frozen.body),
            )

        await self.ctx.status.update(resources.ReportExport, export, ready)
        return None
