"""Polling helpers for tests: wait until something holds, and say what it was when it doesn't."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """Raised when a wait gives up; an AssertionError so pytest shows it as a test failure."""


class _Wait:
    """One wait's bookkeeping: its deadline, the pause before the next try (growing by half up to
    ``max_interval``), and the last value and ignored error it names when it gives up."""

    def __init__(
        self,
        what: str,
        timeout: float,
        interval: float,
        max_interval: float,
        ignore: tuple[type[BaseException], ...],
    ) -> None:
        self.what = what
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.interval = interval
        self.max_interval = max_interval
        self.ignore = ignore
        self.last: object = None
        self.error: BaseException | None = None

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        """One call of the predicate: an exception listed in ``ignore`` counts as "not yet"."""
        try:
            yield
        except self.ignore as caught:
            self.error = caught

    def missed(self, value: object) -> None:
        """The predicate returned ``value``, which is falsy."""
        self.last, self.error = value, None

    def pause(self) -> float:
        """How long to sleep before the next try; :class:`WaitTimeout` once past the deadline."""
        __tracebackhide__ = True
        if time.monotonic() >= self.deadline:
            detail = f"; last value: {self.last!r}" if self.last is not None else ""
            if self.error is not None:
                detail += f"; last error: {type(self.error).__name__}: {self.error}"
            raise WaitTimeout(f"timed out after {self.timeout:g}s waiting for {self.what}{detail}")
        pause, self.interval = self.interval, min(self.interval * 1.5, self.max_interval)
        return pause


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = 30.0,
    *,
    what: str = "condition",
    interval: float = 0.05,
    max_interval: float = 0.5,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    Exceptions listed in ``ignore`` count as "not yet". On timeout raise :class:`WaitTimeout`
    naming ``what``, the last value and the last ignored error.
    """
    __tracebackhide__ = True  # pytest: show the caller, not this loop
    wait = _Wait(what, timeout, interval, max_interval, ignore)
    while True:
        with wait.attempt():
            value = predicate()
            if value:
                return value
            wait.missed(value)
        time.sleep(wait.pause())


async def async_wait_for(
    predicate: Callable[[], Awaitable[T | None]],
    timeout: float = 30.0,
    *,
    what: str = "condition",
    interval: float = 0.05,
    max_interval: float = 0.5,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Async twin of :func:`wait_for` for coroutine predicates."""
    __tracebackhide__ = True
    wait = _Wait(what, timeout, interval, max_interval, ignore)
    while True:
        with wait.attempt():
            value = await predicate()
            if value:
                return value
            wait.missed(value)
        await asyncio.sleep(wait.pause())
