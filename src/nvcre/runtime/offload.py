"""CPU-bound work off the event loop: items of an async stream handed in batches to a thread pool.

The manager's one event loop also renews the Lease, answers probes and runs every other
reconcile; parsing a large log on it would hold all of them. :func:`in_batches` gathers items
(log lines) into batches of about :data:`BATCH_SIZE` and runs the caller's ``work`` on each in
:data:`THREADS` worker threads, one batch of a stream at a time and in order, while the loop
gathers the next batch. The loop is free while a batch is worked: RE2 releases the GIL while it
matches, and CPython hands the GIL back to the loop's thread at least every
``sys.getswitchinterval()`` (5 ms) while a worker runs Python code.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterable, Callable, Sized
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import TypeVar

THREADS = 2
"""Worker threads shared by every stream (more would only contend for the GIL)."""
BATCH_SIZE = 256 * 1024
"""A batch is handed over once its items' sizes (a line's characters) reach this."""

T = TypeVar("T", bound=Sized)


@cache
def executor() -> ThreadPoolExecutor:
    """The process's pool for CPU-bound work (created on first use, lives as long as the process)."""
    return ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="nvcre-offload")


async def in_batches(
    items: AsyncIterable[T], work: Callable[[list[T]], object], *, batch_size: int = BATCH_SIZE
) -> None:
    """Run ``work`` on every item of ``items`` in order, in batches, in the :func:`executor`.

    ``work`` is called with one batch at a time, never two at once for one call of this function,
    so it may fold into state it owns without a lock; the caller reads that state once this
    returns. When ``items`` raises, the items gathered before are worked first, then the error
    propagates (what a broken stream delivered still counts).
    """
    loop = asyncio.get_running_loop()
    running: asyncio.Future[object] | None = None
    batch: list[T] = []
    size = 0

    async def hand_over() -> None:
        """Start the gathered batch once the one before it has ended."""
        nonlocal running, batch, size
        if running is not None:
            await running
        # in a copy of the caller's context: what ``work`` logs still names its reconcile
        running = (
            loop.run_in_executor(executor(), contextvars.copy_context().run, work, batch) if batch else None
        )
        batch, size = [], 0

    async def finish() -> None:
        await hand_over()
        if running is not None:
            await running

    try:
        async for item in items:
            batch.append(item)
            size += len(item) + 1
            if size >= batch_size:
                await hand_over()
    except Exception:
        await finish()
        raise
    await finish()
