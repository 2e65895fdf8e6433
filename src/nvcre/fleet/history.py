"""What a node's record says of its past at one moment (pure): its failures before a run, its
last pass, and how a count reads (``3rd``).

A record is a NodeRecord as a plain dict (``status.categories[].results[]``, wire names). Every
category counts: a failure is a failed result, whichever category or run it came from, as
``summary.failuresLast30Days`` counts them. A run's own results are recognised by UID: its
Certification's or WorkloadRun's (``run.uid``) or one of its Workflows' (``workflow.uid``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from nvcre.api.v1alpha1.meta import parse_time
from nvcre.api.v1alpha1.noderecord import FAILED, FAILURE_WINDOW_DAYS, PASSED

Result = Mapping[str, Any]


def when(result: Result) -> datetime | None:
    """The result's time (its Workflow's end); None when it cannot be read."""
    try:
        return parse_time(str(result.get("time") or ""))
    except ValueError:
        return None


def timed_results(record: Mapping[str, Any] | None) -> Iterator[tuple[datetime, Result]]:
    """Every kept result of the record whose time can be read, every category, in no order."""
    for history in ((record or {}).get("status") or {}).get("categories") or ():
        for result in history.get("results") or ():
            t = when(result)
            if t is not None:
                yield t, result


def of_run(result: Result, uids: Collection[str]) -> bool:
    """The result belongs to the run whose Certification, WorkloadRun or Workflow UIDs are ``uids``."""
    run_uid = (result.get("run") or {}).get("uid")
    workflow_uid = (result.get("workflow") or {}).get("uid")
    return bool((run_uid and run_uid in uids) or (workflow_uid and workflow_uid in uids))


def run_time(record: Mapping[str, Any] | None, uids: Collection[str]) -> datetime | None:
    """When the run of ``uids`` last ended a result of this node (the newest of its results
    the record holds); None when the record holds none of them."""
    times = [t for t, r in timed_results(record) if of_run(r, uids)]
    return max(times, default=None)


def earlier_failures(
    record: Mapping[str, Any] | None,
    until: datetime,
    uids: Collection[str],
    days: int = FAILURE_WINDOW_DAYS,
) -> int:
    """The failed results of other runs than ``uids`` whose time is within ``days`` days up to
    ``until`` (both ends included); a result after ``until`` is not an earlier one."""
    since = until - timedelta(days=days)
    return sum(
        1
        for t, r in timed_results(record)
        if r.get("verdict") == FAILED and since <= t <= until and not of_run(r, uids)
    )


def last_pass(record: Mapping[str, Any] | None) -> datetime | None:
    """The time of the record's newest passed result, every category; None when none passed."""
    return max((t for t, r in timed_results(record) if r.get("verdict") == PASSED), default=None)


def whole_days(since: datetime, now: datetime) -> int:
    """Whole days from ``since`` to ``now`` (rounded down; 0 when ``since`` is later)."""
    return max((now - since) // timedelta(days=1), 0)


def stale(passed: datetime | None, now: datetime, days: int) -> bool:
    """Never passed, or passed more than ``days`` days before ``now``."""
    return passed is None or now - passed > timedelta(days=days)


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``, ``112th``."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


__all__ = [
    "earlier_failures",
    "last_pass",
    "of_run",
    "ordinal",
    "run_time",
    "stale",
    "timed_results",
    "when",
    "whole_days",
]
