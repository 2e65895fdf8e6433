"""wait_for: returns the first truthy value, names what it waited for when it gives up."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from nvcre.testing.waiting import WaitTimeout, async_wait_for, wait_for


def test_returns_first_truthy_value() -> None:
    counter = itertools.count()
    assert wait_for(lambda: next(counter) >= 3 and "done", timeout=5, interval=0.001) == "done"


def test_timeout_names_what_and_last_value() -> None:
    with pytest.raises(WaitTimeout, match=r"waiting for the moon; last value: \[\]"):
        wait_for(lambda: [], timeout=0.05, what="the moon", interval=0.01)


def test_ignored_errors_are_reported() -> None:
    def boom() -> bool:
        raise KeyError("gone")

    with pytest.raises(WaitTimeout, match="last error: KeyError"):
        wait_for(boom, timeout=0.05, ignore=(KeyError,), interval=0.01)


def test_other_errors_propagate() -> None:
    def boom() -> bool:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        wait_for(boom, timeout=1)


def test_async_variant() -> None:
    counter = itertools.count()

    async def ready() -> int | None:
        value = next(counter)
        return value if value >= 2 else None

    assert asyncio.run(async_wait_for(ready, timeout=5, interval=0.001)) == 2
