"""A clock a test sets: both of its times move only when the test says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    """Starts at ``start`` (default 2026-01-01T00:00:00Z); :meth:`step` moves both times."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._monotonic = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def step(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds
