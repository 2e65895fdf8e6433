"""How often a running Job's logs are sampled: ``sampleInterval``, read one way by every reader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvcre.api.v1alpha1.constants import Default
from nvcre.api.v1alpha1.limits import MIN_SAMPLE_INTERVAL_SECONDS
from nvcre.durations import parse_duration


def sample_interval_seconds(raw: Any) -> float:
    """A measurement's ``sampleInterval`` in seconds: the default (60 s) when unset, unparseable
    or not positive, and never below the minimum (5 s). Admission refuses a shorter one; this
    bound holds for objects stored before it did, so no measurement polls logs continuously."""
    try:
        seconds = parse_duration(str(raw)) / 1e9 if raw else Default.SAMPLE_INTERVAL_SECONDS
    except ValueError:
        return Default.SAMPLE_INTERVAL_SECONDS
    if seconds <= 0:
        return Default.SAMPLE_INTERVAL_SECONDS
    return max(seconds, float(MIN_SAMPLE_INTERVAL_SECONDS))


def sample_interval(measurement: Mapping[str, Any]) -> float:
    """A Bandwidth- or GoodputMeasurement's ``spec.sampleInterval`` in seconds."""
    return sample_interval_seconds((measurement.get("spec") or {}).get("sampleInterval"))
