"""Deleting the NodeRecords of Nodes gone longer than ``--node-record-retention``.

The rule is ``nvcre.fleet.retention``'s; this shell hands it the manager's cached records and
Nodes (the informers the other controllers share) and the context's clock, in one pass over every
record (one work-queue key, :data:`SWEEP`), and deletes what it returns. A pass runs when the
caches have synced, when a Node is deleted, when a record is created (of a Node already gone),
and at the earliest time a kept record of a Node that is gone expires (``requeue_after``, at most
:data:`MAX_WAIT_SECONDS` ahead); never on a timer otherwise, and never with a retention of ``0``
(the controller is not started).

Each delete carries preconditions on the record's uid and resourceVersion as the pass saw them: a
record written since (a result folded in by ``controllers/noderecords.py``) or recreated is
refused by the API server (409) and decided again in the next pass. Each deletion is logged with
its node and why. Nodes are read, never written, and no Event is emitted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from lightkube import ApiError, AsyncClient

from nvcre import resources
from nvcre.controllers import indexes
from nvcre.controllers.children import delete_unchanged
from nvcre.controllers.context import Context
from nvcre.fleet.retention import Expired, format_retention, sweep
from nvcre.objects import Obj, ObjectKey
from nvcre.runtime.clock import MAX_WALL_WAIT_SECONDS
from nvcre.runtime.controller import Controller, Result
from nvcre.runtime.writes import Conflict

log = logging.getLogger(__name__)

NAME = "noderecord-retention"
SWEEP = ObjectKey("", "noderecords")
"""The one key: every pass decides every record."""
MAX_WAIT_SECONDS = MAX_WALL_WAIT_SECONDS
"""The longest wait before the next pass while a record is due to expire."""
DELETES_IN_FLIGHT = 16
"""Records deleted at a time (a fleet torn down leaves thousands due at once)."""


def _deleted(event: str, old: Obj | None, new: Obj) -> Iterable[ObjectKey]:
    return (SWEEP,) if event == "DELETED" else ()


def _added(event: str, old: Obj | None, new: Obj) -> Iterable[ObjectKey]:
    return (SWEEP,) if event == "ADDED" else ()


async def delete_record(client: AsyncClient, expired: Expired) -> None:
    """DELETE the record unless it changed since the pass decided on it."""
    await delete_unchanged(
        client, resources.NodeRecord, expired.name, None, expired.uid, expired.resource_version
    )


class NodeRecordRetention:
    """Registers its controller with the manager unless ``retention`` is 0 (keep forever)."""

    def __init__(self, ctx: Context, retention: timedelta) -> None:
        self.ctx = ctx
        self.retention = retention
        manager = ctx.manager
        self.records = manager.informer(resources.NodeRecord)
        self.nodes = indexes.nodes(manager)
        self.controller = Controller(NAME, self.reconcile, workers=1)
        self.controller.watch(self.records, _added)
        self.controller.watch(self.nodes, _deleted)
        if retention > timedelta(0):
            manager.add(self.controller)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        now = self.ctx.clock.now()
        nodes = {str(n["metadata"]["name"]) for n in self.nodes.items()}
        decided = sweep(self.records.items(), nodes, now, self.retention)
        gate = asyncio.Semaphore(DELETES_IN_FLIGHT)

        async def delete(expired: Expired) -> bool:
            """Deleted (or gone already): True; written since the pass read it: False."""
            async with gate:
                try:
                    await delete_record(self.ctx.client, expired)
                except ApiError as error:
                    if error.status.code == 404:
                        return True
                    if error.status.code == 409:
                        log.info(
                            "NodeRecord %s changed since it expired; deciding again: %s",
                            expired.name,
                            error.status.message,
                        )
                        return False
                    raise
            log.info("Deleted the NodeRecord of node %s: %s", expired.node, expired.reason)
            return True

        outcomes: list[Any] = await asyncio.gather(
            *(delete(e) for e in decided.expired), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome  # once every other delete has ended: the next pass retries it
        if not all(outcomes):
            raise Conflict("a NodeRecord changed since the pass read it")
        if decided.next_expiry is None:
            return None
        wait = (decided.next_expiry - now).total_seconds()
        return Result(requeue_after=min(max(wait, 0.0), MAX_WAIT_SECONDS))


def describe(retention: timedelta) -> str:
    """The startup line's words for ``retention``."""
    if retention <= timedelta(0):
        return "NodeRecords are kept forever (--node-record-retention=0)"
    return f"NodeRecords of deleted Nodes are deleted {format_retention(retention)} after their newest result"


__all__ = ["MAX_WAIT_SECONDS", "NAME", "SWEEP", "NodeRecordRetention", "delete_record", "describe"]
