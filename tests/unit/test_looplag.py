"""The event loop's lag: how much later than due a sleeping sampler wakes."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import generate_latest

from nvcre.runtime import looplag


@pytest.mark.asyncio
async def test_a_blocked_loop_is_observed_as_lag() -> None:
    observed: list[float] = []
    sampler = asyncio.create_task(looplag.sample(observed.append, interval=0.01))
    await asyncio.sleep(0)  # the sampler starts its first sleep
    time.sleep(0.3)  # what parsing a long line on the loop did
    while not observed:
        await asyncio.sleep(0.01)
    sampler.cancel()
    assert observed[0] >= 0.29 - 0.01, observed  # the blocking, less the interval it slept
    assert all(lag >= 0 for lag in observed)


def test_the_lag_is_a_histogram_on_metrics() -> None:
    text = generate_latest().decode()
    assert "# TYPE nvcre_event_loop_lag_seconds histogram" in text
    assert 'nvcre_event_loop_lag_seconds_bucket{le="0.1"}' in text
