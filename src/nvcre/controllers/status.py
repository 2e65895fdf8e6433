"""Status writes through the status subresource: conflict-safe, skipped when nothing changes,
with the transition event of the execution trio."""

from __future__ import annotations

import copy
from collections.abc import Callable

from lightkube import AsyncClient
from lightkube.core import resource as lkr

from nvcre.api.v1alpha1.constants import Reason
from nvcre.api.v1alpha1.meta import Condition
from nvcre.conditions import (
    event_for_transition,
    from_status,
    is_terminal,
    set_exclusive,
    to_status,
)
from nvcre.controllers.events import Recorder
from nvcre.objects import Obj, StatusChange, resource_version
from nvcre.runtime.clock import Clock
from nvcre.runtime.writes import update_with_retry


def conditions_of(obj: Obj) -> list[Condition]:
    return from_status(obj.get("status") or {})


class StatusWriter:
    """Status writes on top of the caller's view of the object (no read first, see
    :func:`update_with_retry`), unless that view is older than this writer's own last write."""

    MAX_REMEMBERED = 50_000
    MAX_LATEST = 5_000
    """Whole objects as written, each until the cache has caught up with it (usually a moment)."""

    def __init__(self, client: AsyncClient, recorder: Recorder, clock: Clock) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock
        self._written: dict[tuple[str, str, str], int] = {}
        self._latest: dict[tuple[str, str, str], Obj] = {}

    def _key(self, resource: type[lkr.Resource], obj: Obj) -> tuple[str, str, str]:
        meta = obj["metadata"]
        return resource.__name__, meta.get("namespace") or "", meta["name"]

    def outdated(self, resource: type[lkr.Resource], obj: Obj) -> bool:
        """True when ``obj`` is older than this writer's last write of it (e.g. a cached copy
        that has not caught up with it yet, or a second write in one reconcile)."""
        return resource_version(obj) < self._written.get(self._key(resource, obj), 0)

    def newest(self, resource: type[lkr.Resource], obj: Obj) -> Obj:
        """``obj`` (e.g. a cached copy), or this writer's own last write of it when ``obj`` is
        older: the newest view known without a read. The written object is kept only until a
        view at least as new comes by (not to be modified: copy it)."""
        key = self._key(resource, obj)
        written = self._latest.get(key)
        if written is None:
            return obj
        if resource_version(obj) >= resource_version(written):
            del self._latest[key]  # the cache caught up
            return obj
        return written

    def _view(self, resource: type[lkr.Resource], obj: Obj) -> Obj | None:
        """``obj`` when it may be current; None when it is outdated, so that the live object is
        read instead."""
        return None if self.outdated(resource, obj) else obj

    def _remember(self, resource: type[lkr.Resource], written: Obj | None) -> None:
        if written is None:
            return
        if len(self._written) >= self.MAX_REMEMBERED:
            self._written.clear()
        if len(self._latest) >= self.MAX_LATEST:
            self._latest.clear()
        key = self._key(resource, written)
        self._written[key] = resource_version(written)
        self._latest[key] = copy.deepcopy(written)  # the caller may go on changing its own

    async def _write(
        self,
        resource: type[lkr.Resource],
        obj: Obj,
        mutate: Callable[[Obj], Obj | None],
        base: Obj | None,
        settled: bool = False,
    ) -> Obj | None:
        meta = obj["metadata"]
        written = await update_with_retry(
            self.client,
            resource,
            meta["name"],
            meta.get("namespace"),
            mutate,
            status=True,
            base=base,
            current=self._view(resource, obj),
            settled=settled,
        )
        self._remember(resource, written)
        return written

    async def update(
        self, resource: type[lkr.Resource], obj: Obj, change: StatusChange, *, base: Obj | None = None
    ) -> Obj | None:
        """Apply ``change`` to the live object's status and write it if it differs (to ``base``
        at its resourceVersion when given; see :func:`update_with_retry`)."""

        def mutate(live: Obj) -> Obj:
            change(live.setdefault("status", {}))
            return live

        written = await self._write(resource, obj, mutate, base)
        return written

    async def set_exclusive(
        self,
        resource: type[lkr.Resource],
        obj: Obj,
        cond_type: str,
        reason: str,
        message: str,
        *,
        extra: StatusChange | None = None,
        inactive_reason: str = Reason.NOT_APPLICABLE,
        unless_terminal: bool = False,
        base: Obj | None = None,
        settled: bool = False,
        announce: bool = True,
    ) -> Obj | None:
        """Make ``cond_type`` the True trio member (with ``extra`` status changes in the same write).

        ``unless_terminal`` aborts when the live object is already Succeeded or Failed, so a late
        write never overwrites a terminal decision made meanwhile. Emits the transition event
        unless ``announce`` is False.
        ``settled``: ``obj`` is the cache's (see :func:`update_with_retry`); nothing to change
        on it means no request at all.
        """
        events: list[tuple[Obj, str, str, str]] = []

        def mutate(live: Obj) -> Obj | None:
            events.clear()
            before = conditions_of(live)
            if unless_terminal and is_terminal(before):
                return None
            status = live.setdefault("status", {})
            if extra is not None:
                extra(status)
            after, _ = set_exclusive(
                conditions_of(live),  # with the conditions ``extra`` set (e.g. ValidationFailed)
                cond_type,
                reason,
                message,
                live["metadata"].get("generation"),
                self.clock.now(),
                inactive_reason,
            )
            to_status(status, after)
            event = event_for_transition(before, after)
            if event is not None and announce:
                events.append((live, event.type, event.reason, event.message))
            return live

        written = await self._write(resource, obj, mutate, base, settled)
        if written is not None:
            for target, type_, event_reason, note in events:
                await self.recorder.emit(target, type_, event_reason, note)
        return written
