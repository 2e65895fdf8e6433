"""A controller: a work queue of object keys, a reconcile function, and the watches that feed it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from nvcre.objects import Obj, ObjectKey, controller_owner, key_of
from nvcre.runtime.errors import is_throttled, retry_after
from nvcre.runtime.informer import Informer
from nvcre.runtime.logcontext import reconciling
from nvcre.runtime.metrics import QUEUE_DEPTH, RECONCILE_ERRORS, RECONCILE_TIME, RECONCILE_TOTAL
from nvcre.runtime.queue import ShutDown, WorkQueue
from nvcre.runtime.writes import Conflict

log = logging.getLogger(__name__)

THROTTLED_MAX_DELAY = 10.0
"""The longest backoff a 429 adds (its Retry-After can ask for longer). Throttling paces every
client of the server and says nothing about the object, yet an object's failures escalate its
backoff: a minute of throttling used to leave it waiting five more after the server recovered."""


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for next: nothing, or another look after ``requeue_after`` seconds."""

    requeue_after: float | None = None


def wake_by(result: Result | None, left: float | None) -> Result | None:
    """``result``, looking again no later than just past a deadline ``left`` seconds away (None:
    no deadline)."""
    if left is None:
        return result
    wake = max(left, 0.0) + 0.1
    if result is not None and result.requeue_after is not None:
        wake = min(wake, result.requeue_after)
    return Result(requeue_after=wake)


class TerminalError(Exception):
    """A reconcile that retrying cannot fix (controller-runtime's ``TerminalError``).

    Raise it once the outcome is recorded on the object (e.g. ``Failed`` with the server's
    message): the controller logs and counts it and does not requeue the key; the next event
    for the object reconciles it again as usual.
    """


Reconcile = Callable[[ObjectKey], Awaitable[Result | None]]
Mapper = Callable[[str, Obj | None, Obj], Iterable[ObjectKey]]


def for_object(event: str, old: Obj | None, new: Obj) -> Iterable[ObjectKey]:
    """Events of the controller's own kind map to the object itself."""
    return (key_of(new),)


def owned_by(kind: str, group: str) -> Mapper:
    """Events of a child map to its controlling owner of ``kind`` in ``group`` (same namespace)."""

    def mapper(event: str, old: Obj | None, new: Obj) -> Iterable[ObjectKey]:
        keys = []
        for obj in (old, new):
            ref = controller_owner(obj) if obj is not None else None
            if ref and ref.get("kind") == kind and str(ref.get("apiVersion", "")).split("/")[0] == group:
                keys.append(ObjectKey(key_of(obj).namespace, ref["name"]))  # type: ignore[arg-type]
        return set(keys)

    return mapper


def by_label(label: str) -> Mapper:
    """Events map to the object named by a label's value, in the event's namespace."""

    def mapper(event: str, old: Obj | None, new: Obj) -> Iterable[ObjectKey]:
        keys = set()
        for obj in (old, new):
            value = ((obj or {}).get("metadata", {}).get("labels") or {}).get(label)
            if value:
                keys.add(ObjectKey(key_of(new).namespace, value))
        return keys

    return mapper


class Controller:
    """Runs ``reconcile`` for queued keys on ``workers`` concurrent workers, one key at a time."""

    def __init__(self, name: str, reconcile: Reconcile, *, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"controller {name}: workers must be at least 1, got {workers}")
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.queue: WorkQueue[ObjectKey] = WorkQueue()
        self._watches: list[tuple[Informer, Mapper]] = []

    def watch(self, informer: Informer, mapper: Mapper = for_object) -> None:
        self._watches.append((informer, mapper))

    def _enqueue(self, mapper: Mapper) -> Callable[[str, Obj | None, Obj], None]:
        def handler(event: str, old: Obj | None, new: Obj) -> None:
            for key in mapper(event, old, new):
                self.queue.add(key)
            QUEUE_DEPTH.labels(self.name).set(len(self.queue))

        return handler

    def start_watching(self) -> None:
        """Route informer events to the queue and queue every object already cached."""
        for informer, mapper in self._watches:
            handler = self._enqueue(mapper)
            informer.add_handler(handler)
            for obj in informer.items():
                handler("ADDED", None, obj)

    async def _work(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            with reconciling(self.name, key):
                await self._process(key)

    async def _process(self, key: ObjectKey) -> None:
        """One reconcile of ``key``, then what its outcome asks of the queue."""
        started = time.perf_counter()
        log.debug("Reconciling")
        try:
            result = await self.reconcile(key)
        except asyncio.CancelledError:
            self.queue.done(key)
            raise
        except Conflict:
            # The object changed under the reconcile: decide again from the fresh state.
            self.queue.add_rate_limited(key)
            RECONCILE_TOTAL.labels(self.name, "conflict").inc()
            log.debug("%s: %s changed while reconciling; again", self.name, key)
        except TerminalError as error:
            self.queue.forget(key)
            RECONCILE_TOTAL.labels(self.name, "terminal").inc()
            log.info("%s: %s ended: %s", self.name, key, error)
        except Exception as error:
            # Errors the server says are transient (and our own) retry with backoff,
            # no sooner than a Retry-After the server sent.
            delay = self.queue.add_rate_limited(
                key,
                at_least=retry_after(error) or 0.0,
                at_most=THROTTLED_MAX_DELAY if is_throttled(error) else None,
            )
            RECONCILE_ERRORS.labels(self.name).inc()
            RECONCILE_TOTAL.labels(self.name, "error").inc()
            log.exception("%s: reconcile of %s failed; retrying in %.3fs", self.name, key, delay)
        else:
            self.queue.forget(key)
            if result is not None and result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
                RECONCILE_TOTAL.labels(self.name, "requeue_after").inc()
            else:
                RECONCILE_TOTAL.labels(self.name, "success").inc()
        finally:
            RECONCILE_TIME.labels(self.name).observe(time.perf_counter() - started)
            self.queue.done(key)
            QUEUE_DEPTH.labels(self.name).set(len(self.queue))

    async def run(self) -> None:
        """Work until cancelled or the queue shuts down."""
        workers = [asyncio.create_task(self._work(), name=f"{self.name}-{i}") for i in range(self.workers)]
        try:
            await asyncio.gather(*workers)
        finally:
            self.queue.shutdown()
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
