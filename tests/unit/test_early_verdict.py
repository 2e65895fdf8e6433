"""The early verdict: a running group whose sweeps already put its bandwidth verdict beyond doubt
fails at once (nvcre.measure.early and the sweeps of nvcre.measure.nccl.progress, pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre.measure.early import early_failure, early_value
from nvcre.measure.nccl import progress
from nvcre.report.build import violations

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SIZES = [1 << 30, 1 << 31, 1 << 32, 1 << 33, 1 << 34]
FIGURE = {"key": "busBandwidthGBps", "value": "487.09", "source": "h100/aws/all_reduce/2-nodes", "row": "2"}
FLOOR = "floor 389.67 GB/s (80% of expected; row 2)"


def sweeps(*peaks: float, partial: int = 1) -> dict[str, Any]:
    """``status.progress`` after one sweep per peak (its largest size at the peak, the smaller
    ones at half of it) and ``partial`` rows of the next, read in two reads."""
    values = [(size, peak if size == SIZES[-1] else peak / 2) for peak in peaks for size in SIZES]
    values += [(SIZES[i], 1.0) for i in range(partial)]
    rows = [progress.Row(T0 + timedelta(seconds=i), size, bus) for i, (size, bus) in enumerate(values)]
    half = len(rows) // 2
    first = progress.advance(None, rows[:half], T0 + timedelta(seconds=half))
    return progress.advance(first, rows[half:], T0 + timedelta(seconds=len(rows)))


def job(thresholds: dict[str, str] | None = None, **bandwidth: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "bandwidthMeasurement": {"logProfileRef": "nccl-bandwidth", **bandwidth},
        "expectedPerformance": {"floorFraction": 0.8, "figures": [FIGURE]},
    }
    if thresholds:
        spec["thresholds"] = thresholds
    return {"metadata": {"name": "j", "uid": "u1"}, "spec": spec}


def bm(run: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"labels": {"nvcre.nvidia.com/job-uid": uid}}, "status": {"progress": run}}


def test_sweeps_are_counted_when_the_next_one_starts_and_their_peaks_kept() -> None:
    run = sweeps(145.2, 146.01, 150.0)
    assert (run["sweeps"], run["sweepPeaksGBps"], run["sweepPeakGBps"]) == (3, ["146.01", "150.00"], "1.00")
    assert "sweeps" not in sweeps(145.2, partial=0), "a sweep is complete only once the next begins"
    assert sweeps(145.2, partial=2)["sweepPeaksGBps"] == ["145.20"]


def test_two_sweeps_far_below_the_expected_floor_fail_at_once_with_the_evidence() -> None:
    verdict = early_failure(job(), bm(sweeps(145.2, 146.01)))
    assert verdict is not None
    assert (verdict.failed, verdict.reason, verdict.cause) == (True, "ThresholdViolated", "BelowExpected")
    assert verdict.message == (
        "Early verdict after 2 complete sweeps (peaks 145.20 and 146.01 GB/s, each more than 10% short): "
        "busBandwidthGBps: measured 146.01 GB/s, expected 487.09 GB/s (h100/aws/all_reduce/2-nodes), "
        f"{FLOOR}"
    )


def test_a_threshold_decides_instead_of_the_floor() -> None:
    verdict = early_failure(job({"busBandwidthGBps": "value >= 300"}), bm(sweeps(145.2, 146.01)))
    assert verdict is not None and (verdict.reason, verdict.cause) == ("ThresholdViolated", "")
    assert verdict.message.endswith(
        'Threshold "busBandwidthGBps" violated: measured 146.0100, expression: value >= 300'
    )
    assert early_failure(job({"busBandwidthGBps": "value >= 100"}), bm(sweeps(145.2, 146.01))) is None


def test_no_doubt_free_verdict_no_early_failure() -> None:
    assert early_failure(job(), bm(sweeps(145.2))) is None, "one sweep is not confirmed"
    assert early_failure(job(), bm(sweeps(360.0, 361.0))) is None, "within the margin of the floor"
    assert early_failure(job(), bm(sweeps(145.0, 480.0))) is None, "a good sweep"
    assert early_failure(job(), bm(sweeps(480.0, 145.0, 146.0))) is not None, "the last two decide"
    assert early_failure(job(earlyVerdict="Off"), bm(sweeps(145.2, 146.01))) is None, "turned off"
    assert early_failure(job(), bm(sweeps(145.2, 146.01), uid="u0")) is None, "an earlier attempt's"
    assert early_failure(job({"busBandwidthGBps": "value >"}), bm(sweeps(145.2, 146.01))) is None, (
        "an expression that cannot be evaluated is judged at the end, never early"
    )
    without = job()
    del without["spec"]["expectedPerformance"]
    assert early_failure(without, bm(sweeps(145.2, 146.01))) is None, "nothing to judge against"


def test_the_report_shows_the_value_an_early_verdict_failed_on() -> None:
    stopped = bm(sweeps(145.2, 146.01))
    assert early_value(job(), stopped) == 146.01
    assert early_value(job(), bm(sweeps(480.0, 481.0))) is None
    assert violations(job(), stopped, None) == [
        "busbw 146.0 GB/s < floor 389.7 GB/s (expected 487.1 GB/s, h100/aws/all_reduce/2-nodes)"
    ]
