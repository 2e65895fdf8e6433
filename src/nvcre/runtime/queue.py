"""A keyed work queue with the semantics of client-go's rate-limited delaying queue.

* A key waiting in the queue is held once, however often it is added (de-duplication).
* A key being processed is never handed to a second worker; adding it meanwhile marks it
  dirty and it is queued again when the first worker calls :meth:`WorkQueue.done`.
* :meth:`add_after` delays an add; :meth:`add_rate_limited` delays it exponentially per key
  until :meth:`forget` resets the key's failure count.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down and drained of waiters."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = 0.005, max_delay: float = 300.0) -> None:
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._ready = asyncio.Event()
        self._shutting_down = False
        self._base_delay = base_delay
        self._max_delay = max_delay

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def processing(self) -> int:
        return len(self._processing)

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._ready.set()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending add for the key wins."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        self._timers[key] = (due, loop.call_at(due, self._fire, key))

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K, *, at_least: float = 0.0, at_most: float | None = None) -> float:
        """Add ``key`` after its exponential backoff, capped at ``at_most`` when given (else the
        queue's maximum), or ``at_least`` seconds if longer (a server's Retry-After); returns the
        delay used."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        cap = self._max_delay if at_most is None else min(at_most, self._max_delay)
        delay: float = max(min(self._base_delay * 2.0**failures, cap), at_least)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key to process; mark it done with :meth:`done`."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._ready.set()

    def shutdown(self) -> None:
        self._shutting_down = True
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._ready.set()
