"""Work off the event loop: a stream's items in order, in batches, in a worker thread, one batch
at a time; what a broken stream delivered is still worked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from nvcre.runtime.offload import in_batches


async def lines(count: int, *, fail_after: int | None = None) -> AsyncIterator[str]:
    for index in range(count):
        if fail_after is not None and index == fail_after:
            raise ConnectionError("stream broken")
        yield f"line {index}"
        if index % 7 == 0:
            await asyncio.sleep(0)  # as a network read would


@pytest.mark.asyncio
async def test_every_item_in_order_in_batches_one_at_a_time_off_the_loop() -> None:
    loop_thread = threading.get_ident()
    seen: list[str] = []
    batches: list[int] = []
    threads: set[int] = set()
    active = 0
    most = 0
    guard = threading.Lock()

    def work(batch: list[str]) -> None:
        nonlocal active, most
        with guard:
            active += 1
            most = max(most, active)
        threads.add(threading.get_ident())
        seen.extend(batch)
        batches.append(len(batch))
        with guard:
            active -= 1

    await in_batches(lines(1000), work, batch_size=100)
    assert seen == [f"line {i}" for i in range(1000)]
    assert len(batches) > 10 and sum(batches) == 1000
    assert loop_thread not in threads
    assert most == 1


@pytest.mark.asyncio
async def test_the_loop_runs_while_a_batch_is_worked() -> None:
    """The work waits for an event only the loop can set: on the loop it would never return."""
    released = threading.Event()

    def work(batch: list[str]) -> None:
        assert released.wait(30), "the loop never ran while the batch was worked"

    asyncio.get_running_loop().call_soon(released.set)
    await asyncio.wait_for(in_batches(lines(3), work), 60)


@pytest.mark.asyncio
async def test_a_broken_stream_works_what_came_then_raises() -> None:
    seen: list[str] = []
    with pytest.raises(ConnectionError, match="stream broken"):
        await in_batches(lines(100, fail_after=42), seen.extend, batch_size=50)
    assert seen == [f"line {i}" for i in range(42)]
