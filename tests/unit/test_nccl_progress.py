"""An nccl-tests run that stops printing rows is stalled after 10 times its expected row time
(at least 120 s, 600 s before its first row), judged at the measurement's last successful read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nvcre.health.restart import bandwidth_stalled
from nvcre.measure.nccl.progress import Row, advance, stalled

T0 = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def sweep(*steps: tuple[float, int]) -> list[Row]:
    return [Row(at(s), size) for s, size in steps]


def test_the_expected_row_time_is_the_last_gap_scaled_by_the_size_growth() -> None:
    first = advance(None, sweep((10, 8), (10.5, 16)), at(30))
    assert first == {
        "rows": 2,
        "lastRowTime": "2026-12-03T12:00:10.500000Z",
        "lastRowBytes": 16,
        "expectedRowSec": "1.000",
        "readTime": "2026-12-03T12:00:30Z",
        "sweepPeakGBps": "0.00",
    }
    # the next sample carries on from the stored row: 16 -> 32 took 3 s, so 64 should take 6 s
    second = advance(first, sweep((13.5, 32)), at(60))
    assert (second["rows"], second["lastRowBytes"], second["expectedRowSec"]) == (3, 32, "6.000")
    # a read that found no row keeps the progress and records the read
    quiet = advance(second, [], at(90))
    assert {**quiet, "readTime": second["readTime"]} == second and quiet["readTime"] == "2026-12-03T12:01:30Z"
    # a new table (sizes start again) is not a size growth
    again = advance(second, sweep((20, 8)), at(95))
    assert again["expectedRowSec"] == "6.500"


def test_silence_past_ten_expected_rows_and_two_minutes_is_a_stall() -> None:
    progress = advance(None, sweep((10, 1 << 30), (40, 1 << 31)), at(40))  # next row: 60 s
    assert progress["expectedRowSec"] == "60.000"
    assert stalled(advance(progress, [], at(40 + 600 + 30)), T0, slack=30) is None, "10 x 60 s + 30 s"
    why = stalled(advance(progress, [], at(40 + 631)), T0, slack=30)
    assert why == (
        "Workload stalled: no nccl-tests result row for 631s after the 2147483648-byte row at "
        "2026-12-03T12:00:40Z (limit 630s: 10 times the 60.0s its next row should take, "
        "at least 120s, plus 30s for sampling)"
    )
    fast = advance(None, sweep((10, 8), (10.001, 16)), at(11))
    assert stalled(advance(fast, [], at(10.001 + 150)), T0, slack=30) is None, "never under 120 s + slack"
    assert stalled(advance(fast, [], at(10.001 + 151)), T0, slack=30) is not None


def test_before_the_first_row_the_run_has_ten_minutes() -> None:
    assert stalled(advance(None, [], at(630)), T0, slack=30) is None
    assert stalled(advance(None, [], at(631)), T0, slack=30) == (
        "Workload stalled: no nccl-tests result row within 630s of the workload starting"
    )


def test_without_a_successful_read_nothing_is_stalled() -> None:
    """A log that cannot be read is no evidence of silence: timeoutPerJob stays the bound."""
    assert stalled(None, T0, slack=30) is None
    assert stalled({"lastRowTime": "2026-12-03T12:00:00Z", "expectedRowSec": "1"}, T0, slack=30) is None


def test_a_job_is_judged_on_its_running_measurement_only() -> None:
    job = {"status": {"workloadStartTime": "2026-12-03T12:00:00Z"}}
    silent = advance(None, [], at(2000))
    running = {"spec": {"sampleInterval": "30s"}, "status": {"progress": silent}}
    assert bandwidth_stalled(job, running) is not None
    complete = {
        **running,
        "status": {**running["status"], "conditions": [{"type": "Complete", "status": "True"}]},
    }
    assert bandwidth_stalled(job, complete) is None, "a complete measurement has nothing more to read"
    assert bandwidth_stalled({"status": {}}, running) is None, "a workload not running has no clock"
    assert bandwidth_stalled(job, None) is None
    # a measurement read before this attempt's workload started says nothing about it
    later = {"status": {"workloadStartTime": "2026-12-03T13:00:00Z"}}
    assert bandwidth_stalled(later, running) is None
