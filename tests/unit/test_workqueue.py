"""The work queue's contract: de-duplication, one worker per key, delays and backoff."""

from __future__ import annotations

import asyncio

import pytest

from nvcre.runtime.queue import ShutDown, WorkQueue

pytestmark = pytest.mark.asyncio


async def test_adds_of_a_waiting_key_collapse() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_key_in_flight_is_not_handed_out_twice_but_comes_back_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")  # changed while being reconciled
    assert len(queue) == 0
    queue.add("b")
    assert await queue.get() == "b"
    queue.done(key)
    assert await queue.get() == "a"


async def test_done_without_new_add_drops_the_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.done(await queue.get())
    assert len(queue) == 0


async def test_add_after_delays_and_the_earliest_wins() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.2)
    queue.add_after("a", 0.02)
    queue.add_after("later", 0.25)  # due after the replaced add of "a" would have been
    assert len(queue) == 0
    assert await asyncio.wait_for(queue.get(), timeout=1) == "a"
    queue.done("a")
    assert await asyncio.wait_for(queue.get(), timeout=1) == "later", "the replaced add must not fire"
    queue.done("later")
    assert len(queue) == 0


async def test_rate_limited_backoff_doubles_until_forgotten() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.001, max_delay=0.004)
    delays = [queue.add_rate_limited("a") for _ in range(5)]
    assert delays == [0.001, 0.002, 0.004, 0.004, 0.004]
    assert queue.failures("a") == 5
    queue.forget("a")
    assert queue.failures("a") == 0
    assert queue.add_rate_limited("a") == 0.001


async def test_a_capped_backoff_stops_growing_but_keeps_its_floor() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=1.0, max_delay=300.0)
    delays = [queue.add_rate_limited("a", at_most=3.0) for _ in range(4)]
    assert delays == [1.0, 2.0, 3.0, 3.0]
    assert queue.add_rate_limited("a", at_most=3.0, at_least=7.0) == 7.0
    assert queue.add_rate_limited("a") == 32.0  # the count went on: an uncapped failure escalates


async def test_waiting_worker_wakes_on_add_and_on_shutdown() -> None:
    queue: WorkQueue[str] = WorkQueue()
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("x")
    assert await asyncio.wait_for(waiter, timeout=1) == "x"
    idle = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shutdown()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(idle, timeout=1)
    queue.add("y")
    assert len(queue) == 0
