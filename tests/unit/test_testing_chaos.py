"""The reliability suite's fault schedules are a pure function of (kind, seed)."""

from __future__ import annotations

from itertools import islice

import pytest

from nvcre.testing.chaos import KINDS, MAX_RESTARTS, schedule, throttle_documents


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "none"])
def test_the_same_seed_replays_the_same_faults(kind: str) -> None:
    first = list(islice(schedule(kind, 1234), 20))
    assert len(first) == (MAX_RESTARTS if kind.endswith("_restart") else 20)
    assert first == list(islice(schedule(kind, 1234), 20))
    assert first != list(islice(schedule(kind, 1235), 20))
    assert {f.kind for f in first} == {kind}
    assert all(f.gap > 0 and f.hold >= 0 for f in first)


def test_watch_drops_use_every_variant() -> None:
    variants = {f.variant for f in islice(schedule("watch_drop", 7), 60)}
    assert variants == {"disable", "limit_data", "timeout"}


def test_the_reference_run_has_no_fault() -> None:
    assert list(schedule("none", 1)) == []


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault kind 'partition'"):
        next(schedule("partition", 1))


def test_the_throttle_rejects_only_the_given_user() -> None:
    level, flow_schema = throttle_documents("system:serviceaccount:nvcre:nvcre-manager")
    assert level["spec"]["limited"]["limitResponse"] == {"type": "Reject"}
    assert level["spec"]["limited"]["borrowingLimitPercent"] == 0
    (rule,) = flow_schema["spec"]["rules"]
    assert rule["subjects"] == [
        {"kind": "User", "user": {"name": "system:serviceaccount:nvcre:nvcre-manager"}}
    ]
    # ahead of the built-in service-accounts schema (9000), behind exempt (1)
    assert 1 < flow_schema["spec"]["matchingPrecedence"] < 9000
