"""How late the event loop runs what is due: the lag every reconcile, lease renewal and probe waits.

The manager runs every controller, the Lease renewal and the probe server on one asyncio loop, so
work that holds the loop (CPU in a callback, a blocking call) delays all of them. A sampler sleeps
:data:`INTERVAL` seconds at a time and records how much later than asked it woke: that delay is
the loop's lag, exported as ``nvcre_event_loop_lag_seconds``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from nvcre.runtime.metrics import EVENT_LOOP_LAG

INTERVAL = 0.25
"""Seconds between samples (a lag shorter than a sample's own cost is not worth seeing)."""


async def sample(
    observe: Callable[[float], None] = EVENT_LOOP_LAG.observe,
    *,
    interval: float = INTERVAL,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Observe the loop's lag every ``interval`` seconds, until cancelled."""
    while True:
        start = clock()
        await asyncio.sleep(interval)
        observe(max(clock() - start - interval, 0.0))
