"""The controllers' clock (controller-runtime's ``clock.Clock``): the wall time conditions and
deadlines are written in, and the monotonic time grace periods are measured in. Each
controller reads it from its context, so that a test can set time instead of waiting for it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Final, Protocol

MAX_WALL_WAIT_SECONDS: Final = 3600.0
"""The longest requeue towards a time on the wall clock (an expiry): the wait is measured on the
monotonic clock, so a wall clock set forward moves what is due by at most this."""


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall time, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations only)."""
        ...


class SystemClock:
    """The machine's clocks."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()
