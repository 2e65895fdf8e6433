"""``sampleInterval`` has a minimum (5s): admission and ``nvcrectl validate`` refuse a shorter one
(nvcre.testing.rejections ``REJECTED_BOTH``), and every controller reading the field clamps it, so an
object stored before the minimum existed cannot make a measurement poll pod logs continuously."""

from __future__ import annotations

import pytest

from nvcre.health.restart import sample_interval as stall_interval
from nvcre.measure.interval import sample_interval, sample_interval_seconds


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("1ns", 5.0),
        ("4.999s", 5.0),
        ("5s", 5.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        (None, 60.0),
        ("", 60.0),
        ("0s", 60.0),
        ("soon", 60.0),
    ],
)
def test_every_reader_of_the_field_agrees(written: str | None, seconds: float) -> None:
    assert sample_interval_seconds(written) == seconds
    assert sample_interval({"spec": {"sampleInterval": written}}) == seconds  # both measurements
    assert stall_interval({"goodputMeasurement": {"sampleInterval": written}}) == seconds
