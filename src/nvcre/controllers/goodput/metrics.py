"""Prometheus gauges of the GoodputMeasurements (served on the manager's /metrics endpoint)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from prometheus_client import Gauge

from nvcre.measure.goodput import number

LABELS = ("namespace", "measurement", "job", "workflow")
GOODPUT = Gauge("nvcre_goodput_ratio", "Goodput ratio (0..1) of a training Job, from its logs.", LABELS)
STEP_TIME = Gauge(
    "nvcre_goodput_avg_step_time_seconds", "Mean seconds per training step, warm-up excluded.", LABELS
)
TFLOPS = Gauge("nvcre_goodput_avg_tflops_per_gpu", "Mean TFLOP/s per GPU the training logged.", LABELS)
_GAUGES = ((GOODPUT, "result"), (STEP_TIME, "avgStepTimeSec"), (TFLOPS, "avgTFLOPSPerGPU"))
_seen: dict[tuple[str, str], tuple[str, ...]] = {}


def record(namespace: str, name: str, job: str, workflow: str, status: Mapping[str, Any]) -> None:
    """Set the gauges a status has values for (provisional while running, final once complete)."""
    labels = (namespace, name, job, workflow)
    previous = _seen.get((namespace, name))
    if previous is not None and previous != labels:
        forget(namespace, name)
    _seen[(namespace, name)] = labels
    for gauge, key in _GAUGES:
        if status.get(key):
            gauge.labels(*labels).set(number(status[key]))


def forget(namespace: str, name: str) -> None:
    """Drop a deleted measurement's series."""
    labels = _seen.pop((namespace, name), None)
    if labels is None:
        return
    for gauge, _ in _GAUGES:
        with contextlib.suppress(KeyError):
            gauge.remove(*labels)
