"""Threshold enforcement (spec/measurements.md 4): the key registry, the measured values a Job's
final measurements give, and the verdict of CEL expressions over ``value``.

Measurements are read as plain dicts: what the measurement controllers wrote, nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from nvcre.api.v1alpha1.constants import (
    THRESHOLD_KEYS,
    ConditionType,
    JobReason,
    MeasurementReason,
    ThresholdKey,
)
from nvcre.api.v1alpha1.limits import THRESHOLD_EXPRESSION_MAX_LENGTH
from nvcre.cel import CELError, Program, compile_expression
from nvcre.conditions import condition_of

BUS_BANDWIDTH: Final = ThresholdKey.BUS_BANDWIDTH
ALG_BANDWIDTH: Final = ThresholdKey.ALG_BANDWIDTH
GOODPUT_RATIO: Final = ThresholdKey.GOODPUT_RATIO
AVG_TFLOPS_PER_GPU: Final = ThresholdKey.AVG_TFLOPS_PER_GPU
AVG_STEP_TIME: Final = ThresholdKey.AVG_STEP_TIME

KEYS: Final = THRESHOLD_KEYS
"""The known keys, in registry order (the order error messages list them in)."""

SAMPLE_VALUE: Final = 1.0
"""The ``value`` a threshold expression is tried on before any measurement exists."""

_GOODPUT_FIELDS: Final = (
    (GOODPUT_RATIO, "result"),
    (AVG_TFLOPS_PER_GPU, "avgTFLOPSPerGPU"),  # the GM field spells it TFLOPS, the key TFLOPs
    (AVG_STEP_TIME, "avgStepTimeSec"),
)

ALL_MET_MESSAGE: Final = "All performance thresholds satisfied"


@dataclass(frozen=True)
class Verdict:
    """The Job's ``ValidationFailed`` condition: ``failed`` is its status."""

    failed: bool
    reason: str
    message: str
    cause: str = ""
    """The failed-node cause when it is not the reason (a miss of the expected floor is a
    ``ThresholdViolated`` whose cause is ``BelowExpected``)."""


def number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _complete(measurement: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The measurement's ``Complete`` condition when it is True."""
    complete = condition_of(measurement or {}, ConditionType.COMPLETE)
    return complete if complete is not None and complete.get("status") == "True" else None


def bandwidth_final(measurement: Mapping[str, Any] | None) -> bool:
    """Final bandwidth: ``Complete=True`` with reason ``JobSucceeded`` and results (spec 2.5)."""
    complete = _complete(measurement)
    return (
        complete is not None
        and complete.get("reason") == MeasurementReason.JOB_SUCCEEDED
        and bool(((measurement or {}).get("status") or {}).get("results"))
    )


def measurement_complete(measurement: Mapping[str, Any] | None) -> bool:
    """Terminal, whatever the reason: nothing more will be written to it."""
    return _complete(measurement) is not None


def bandwidth_values(measurement: Mapping[str, Any] | None) -> dict[str, float]:
    """``busBandwidthGBps`` / ``algBandwidthGBps``: the max over the final per-size results."""
    if not bandwidth_final(measurement):
        return {}
    results = ((measurement or {}).get("status") or {}).get("results") or ()
    out = {}
    for key, field in ((BUS_BANDWIDTH, "busBW"), (ALG_BANDWIDTH, "algBW")):
        numbers = [n for n in (number(r.get(field)) for r in results) if n is not None]
        if numbers:
            out[key] = max(numbers)
    return out


def goodput_values(measurement: Mapping[str, Any] | None) -> dict[str, float]:
    """The GoodputMeasurement's values, once ``Complete=True``, each only when it is > 0."""
    if _complete(measurement) is None:
        return {}
    return goodput_status_values((measurement or {}).get("status") or {})


def goodput_status_values(status: Mapping[str, Any]) -> dict[str, float]:
    """The threshold values a final GoodputMeasurement status gives, each only when it is > 0."""
    out = {}
    for key, field in _GOODPUT_FIELDS:
        value = number(status.get(field))
        if value is not None and value > 0:
            out[key] = value
    return out


def measured_values(
    bandwidth: Mapping[str, Any] | None, goodput: Mapping[str, Any] | None
) -> dict[str, float]:
    return {**bandwidth_values(bandwidth), **goodput_values(goodput)}


def unknown_keys(thresholds: Mapping[str, str]) -> Verdict | None:
    unknown = sorted(k for k in thresholds if k not in KEYS)
    if not unknown:
        return None
    return Verdict(
        True,
        JobReason.UNKNOWN_THRESHOLD_KEY,
        f"unknown threshold key(s) [{', '.join(unknown)}]; valid keys: [{', '.join(KEYS)}]",
    )


def missing_keys(thresholds: Mapping[str, str], values: Mapping[str, float]) -> list[str]:
    return sorted(k for k in thresholds if k not in values)


def timeout_verdict(missing: list[str], timeout: str) -> Verdict:
    """``timeout`` is Go duration text (``5m0s``)."""
    return Verdict(
        True,
        JobReason.MEASUREMENT_TIMEOUT,
        f"Measurement data not available within {timeout} for keys: [{' '.join(missing)}]",
    )


def compile_threshold(expression: str) -> Program:
    """A threshold expression compiled; ``CELError`` when it is longer than
    :data:`THRESHOLD_EXPRESSION_MAX_LENGTH` or cannot be compiled."""
    if len(expression) > THRESHOLD_EXPRESSION_MAX_LENGTH:
        raise CELError(
            expression,
            f"{len(expression)} characters long, at most {THRESHOLD_EXPRESSION_MAX_LENGTH}",
            "compile",
        )
    return compile_expression(expression)


def check_threshold(expression: str) -> None:
    """``CELError`` unless the expression compiles and gives a bool for a sample ``value``:
    the mistakes found before any workload runs."""
    compile_threshold(expression).evaluate_bool({"value": SAMPLE_VALUE})


def _violation(key: str, expression: str, value: float) -> Verdict | None:
    try:
        passed = compile_threshold(expression).evaluate_bool({"value": float(value)})
    except CELError as error:
        return Verdict(True, JobReason.INVALID_THRESHOLD_EXPRESSION, f'Threshold "{key}": {error.error}')
    if passed:
        return None
    return Verdict(
        True,
        JobReason.THRESHOLD_VIOLATED,
        f'Threshold "{key}" violated: measured {value:.4f}, expression: {expression}',
    )


def evaluate(thresholds: Mapping[str, str], values: Mapping[str, float]) -> Verdict:
    """Every key has a value: the first violation by key, else ``ThresholdsMet``."""
    for key in sorted(thresholds):
        violation = _violation(key, thresholds[key], values[key])
        if violation is not None:
            return violation
    return Verdict(False, JobReason.THRESHOLDS_MET, ALL_MET_MESSAGE)
