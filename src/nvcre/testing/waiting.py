"""Polling helpers for tests: wait until something holds, and say what it was when it doesn't."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """Raised when a wait gives up; an AssertionError so pytest shows it as a test failure."""


def _message(what: str, timeout: float, last: object, error: BaseException | None) -> str:
    detail = f"; last value: {last!r}" if last is not None else ""
    if error is not None:
        detail += f"; last error: {type(error).__name__}: {error}"
    return f"timed out after {timeout:g}s waiting for {what}{detail}"


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
    deadline = time.monotonic() + timeout
    last: object = None
    error: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last, error = value, None
        except ignore as caught:
            error = caught
        if time.monotonic() >= deadline:
            raise WaitTimeout(_message(what, timeout, last, error))
        time.sleep(interval)
        interval = min(interval * 1.5, max_interval)


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
    deadline = time.monotonic() + timeout
    last: object = None
    error: BaseException | None = None
    while True:
        try:
            value = await predicate()
            if value:
                return value
            last, error = value, None
        except ignore as caught:
            error = caught
        if time.monotonic() >= deadline:
            raise WaitTimeout(_message(what, timeout, last, error))
        await asyncio.sleep(interval)
        interval = min(interval * 1.5, max_interval)
