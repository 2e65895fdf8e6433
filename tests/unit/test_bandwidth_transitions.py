"""What a BandwidthMeasurement's status becomes (spec 2.4-2.5), as pure status changes."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre.conditions import ended
from nvcre.measure.interval import sample_interval
from nvcre.measure.nccl import Aggregate, Point, final_reason, transitions
from nvcre.objects import StatusChange

T0 = datetime(2026, 3, 10, 14, 0, 0, tzinfo=UTC)


def aggregate(*points: Point, transports: tuple[str, ...] = ()) -> Aggregate:
    out = Aggregate()
    for point in points:
        out.add(point)
    for name in transports:
        out.add(name)
    return out


def apply(status: dict[str, Any], change: StatusChange) -> dict[str, Any]:
    out = copy.deepcopy(status)
    change(out)
    return out


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status.get("conditions") or ()}


def test_provisional_samples_merge_and_say_job_running() -> None:
    first = apply({}, transitions.running(aggregate(Point(8589934592, 463.04, 897.15)), "c1", T0))
    second = apply(first, transitions.running(aggregate(Point(8589934592, 464.10, 899.15, 2)), "c2", T0))
    assert second["results"] == [
        {"sizeBytes": 8589934592, "algBW": "463.57", "busBW": "898.15", "samples": 2, "wrong": 2}
    ]
    assert (second["wrongValues"], second["lastSampleTime"], second["startTime"]) == (
        2,
        "c2",
        "2026-03-10T14:00:00Z",
    )
    assert conditions(second) == {
        "Measuring": ("True", "JobRunning", "Referenced Job is running, measurement in progress")
    }


def test_the_final_read_replaces_provisional_results_in_one_terminal_write() -> None:
    provisional = apply(
        {}, transitions.running(aggregate(Point(8, 1.0, 1.0), transports=("Socket",)), "c", T0)
    )
    final = aggregate(Point(16, 2.0, 3.0), Point(16, 2.5, 3.5, 1), transports=("IB",))
    reason, message = final_reason(final, "pod ns/pod")
    done = apply(provisional, transitions.complete(reason, message, "2026-03-10T15:00:00Z", final, T0))
    assert done["results"] == [{"sizeBytes": 16, "algBW": "2.25", "busBW": "3.25", "samples": 2, "wrong": 1}]
    assert (done["transport"], done["wrongValues"], done["completionTime"]) == (
        ["IB", "Socket"],
        1,
        "2026-03-10T15:00:00Z",
    )
    assert reason == "JobSucceeded"
    assert conditions(done) == {
        "Measuring": ("False", reason, message),
        "Complete": ("True", reason, message),
    }


def test_complete_is_frozen_a_replay_changes_nothing() -> None:
    final = aggregate(Point(16, 2.0, 3.0))
    done = apply({}, transitions.complete("JobSucceeded", "m", "2026-03-10T15:00:00Z", final, T0))
    later = T0 + timedelta(hours=1)
    other = aggregate(Point(16, 9.0, 9.0))
    assert (
        apply(done, transitions.complete("JobSucceeded", "m", "2026-03-10T16:00:00Z", other, later)) == done
    )
    assert (
        apply(done, transitions.complete("LogsUnavailable", "x", "2026-03-10T16:00:00Z", None, later)) == done
    )


def test_no_rows_is_no_data_collected_with_the_spec_message() -> None:
    assert final_reason(Aggregate(), "pod ns/pod") == (
        "NoDataCollected",
        "Job succeeded but no bandwidth data was parsed; check spec.logProfileRef",
    )


def test_job_gone_messages_and_the_seen_rule() -> None:
    fresh: dict[str, Any] = {"metadata": {"labels": {}}, "status": {}}
    assert not transitions.seen_job(fresh)
    assert transitions.seen_job({"metadata": {"labels": {"nvcre.nvidia.com/job-uid": "u"}}})
    assert transitions.seen_job({"status": {"startTime": "2026-03-10T14:00:00Z"}})
    assert transitions.gone_message(fresh) == "Referenced Job no longer exists; no bandwidth data was parsed"
    assert transitions.gone_message({"status": {"results": [{"sizeBytes": 8}]}}) == (
        "Referenced Job no longer exists; results are provisional and are not used for threshold evaluation"
    )


def test_final_read_pending_records_when_the_wait_began() -> None:
    missing = apply({}, transitions.waiting("LogProfileNotFound", 'LogProfile "x" not found', T0))
    later = T0 + timedelta(minutes=3)
    pending = apply(missing, transitions.waiting("FinalReadPending", transitions.PENDING, later))
    assert transitions.pending_since({"status": pending}) == later  # not the earlier False
    again = apply(
        pending, transitions.waiting("FinalReadPending", transitions.PENDING, later + timedelta(minutes=1))
    )
    assert transitions.pending_since({"status": again}) == later
    assert transitions.pending_since({"status": missing}) is None


def test_grace_is_the_measurement_timeout_but_at_least_two_minutes() -> None:
    assert transitions.grace_seconds({"spec": {}}) == 300.0
    assert transitions.grace_seconds({"spec": {"measurementTimeout": "30s"}}) == 120.0
    assert transitions.grace_seconds({"spec": {"measurementTimeout": "10m"}}) == 600.0
    assert sample_interval({"spec": {"sampleInterval": "30s"}}) == 30.0
    assert sample_interval({"spec": {"sampleInterval": "soon"}}) == 60.0


def test_a_jobs_end_is_its_terminal_condition_and_when() -> None:
    job = {"status": {"conditions": [{"type": "Succeeded", "status": "True", "lastTransitionTime": "t"}]}}
    assert ended(job) == ("Succeeded", "t")
    assert ended({"status": {"conditions": [{"type": "InProgress", "status": "True"}]}}) is None
