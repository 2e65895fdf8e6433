"""Condition model and the condition helpers (metav1.SetStatusCondition semantics, exclusive trio)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from nvcre import conditions as c
from nvcre.api.v1alpha1.constants import EXCLUSIVE_CONDITION_TYPES, ConditionType, Reason
from nvcre.api.v1alpha1.meta import Condition, format_time, parse_time

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)
S0, S1, S2 = "2025-01-02T03:04:05Z", "2025-01-02T03:05:05Z", "2025-01-02T03:06:05Z"

IP, OK, KO = ConditionType.IN_PROGRESS, ConditionType.SUCCEEDED, ConditionType.FAILED


def trio(conds: list[Condition]) -> dict[str, tuple[str, str, str]]:
    out: dict[str, tuple[str, str, str]] = {}
    for t in EXCLUSIVE_CONDITION_TYPES:
        cond = c.find(conds, t)
        assert cond is not None
        out[t] = (cond.status, cond.reason, cond.last_transition_time)
    return out


# --- model -------------------------------------------------------------------------------------


def test_condition_wire_form_is_camel_case_without_none() -> None:
    cond = Condition(type="Succeeded", status="True", reason="Done", message="", last_transition_time=T0)
    assert cond.to_dict() == {
        "type": "Succeeded",
        "status": "True",
        "lastTransitionTime": S0,
        "reason": "Done",
        "message": "",
    }
    with_gen = cond.model_copy(update={"observed_generation": 3})
    assert with_gen.to_dict()["observedGeneration"] == 3
    assert Condition.model_validate(with_gen.to_dict()) == with_gen


def test_condition_accepts_field_names_and_aliases() -> None:
    a = Condition.model_validate(
        {"type": "X", "status": "False", "lastTransitionTime": S0, "reason": "R", "message": "m"}
    )
    b = Condition(type="X", status="False", last_transition_time=S0, reason="R", message="m")
    assert a == b


@pytest.mark.parametrize(
    "bad",
    [
        {"status": "true"},
        {"reason": ""},
        {"reason": "has space"},
        {"last_transition_time": "2025-01-02 03:04:05"},
        {"last_transition_time": "yesterday"},
        {"observed_generation": -1},
        {"unexpected": 1},
        {"type": "not valid!"},
    ],
)
def test_condition_rejects_invalid(bad: dict[str, object]) -> None:
    fields: dict[str, object] = {
        "type": "Failed",
        "status": "True",
        "reason": "Boom",
        "message": "",
        "last_transition_time": S0,
    }
    fields.update(bad)
    with pytest.raises(ValidationError):
        Condition(**fields)


def test_condition_is_frozen() -> None:
    cond = Condition(type="X", status="True", reason="R", message="", last_transition_time=S0)
    with pytest.raises(ValidationError):
        cond.status = "False"  # type: ignore[misc]


def test_time_helpers() -> None:
    assert format_time(T0.replace(microsecond=999_999)) == S0
    assert format_time(datetime(2025, 1, 2, 3, 4, 5)) == S0  # naive = UTC
    plus_two = timezone(timedelta(hours=2))
    assert format_time(datetime(2025, 1, 2, 5, 4, 5, tzinfo=plus_two)) == S0
    assert parse_time(S0) == T0
    assert parse_time("2025-01-02T05:04:05.5+02:00") == T0 + timedelta(microseconds=500_000)
    with pytest.raises(ValueError):
        parse_time("2025-01-02")


# --- set_condition -----------------------------------------------------------------------------


def test_set_condition_appends_new_type() -> None:
    out = c.set_condition([], ConditionType.VALIDATION_FAILED, "False", "ThresholdsMet", "ok", 2, T0)
    assert out == [
        Condition(
            type="ValidationFailed",
            status="False",
            reason="ThresholdsMet",
            message="ok",
            observed_generation=2,
            last_transition_time=S0,
        )
    ]


def test_set_condition_keeps_time_when_only_reason_or_message_change() -> None:
    first = c.set_condition([], IP, "True", "JobCreated", "a", 1, T0)
    second = c.set_condition(first, IP, "True", "JobRunning", "b", 2, T1)
    (cond,) = second
    assert cond.last_transition_time == S0
    assert (cond.reason, cond.message, cond.observed_generation) == ("JobRunning", "b", 2)


def test_set_condition_moves_time_when_status_flips() -> None:
    first = c.set_condition([], ConditionType.HARDWARE_FAILED, "False", "Healthy", "", 1, T0)
    second = c.set_condition(
        first, ConditionType.HARDWARE_FAILED, "True", "HardwareFailureDetected", "x", 1, T1
    )
    assert second[0].last_transition_time == S1
    third = c.set_condition(second, ConditionType.HARDWARE_FAILED, "Unknown", "Probe", "", 1, T2)
    assert third[0].last_transition_time == S2


def test_set_condition_keeps_position_and_other_conditions() -> None:
    conds = c.set_condition([], "A", "True", "R", "", None, T0)
    conds = c.set_condition(conds, "B", "True", "R", "", None, T0)
    conds = c.set_condition(conds, "C", "True", "R", "", None, T0)
    out = c.set_condition(conds, "B", "False", "R2", "", None, T1)
    assert [x.type for x in out] == ["A", "B", "C"]
    assert out[0] == conds[0] and out[2] == conds[2]
    assert out[1].status == "False"


def test_set_condition_does_not_mutate_input() -> None:
    conds = c.set_condition([], "A", "True", "R", "", 1, T0)
    snapshot = copy.deepcopy(conds)
    out = c.set_condition(conds, "A", "False", "R2", "m", 2, T1)
    out2 = c.set_condition(conds, "B", "True", "R", "", 2, T1)
    assert conds == snapshot
    assert out is not conds and out2 is not conds
    assert len(conds) == 1


def test_remove_condition() -> None:
    conds = c.set_condition(c.set_condition([], "A", "True", "R", "", 1, T0), "B", "True", "R", "", 1, T0)
    assert [x.type for x in c.remove_condition(conds, "A")] == ["B"]
    assert c.remove_condition(conds, "Z") == conds
    assert len(conds) == 2


# --- queries -----------------------------------------------------------------------------------


def test_find_is_true_is_false() -> None:
    conds = c.set_condition([], "A", "True", "R", "", 1, T0)
    conds = c.set_condition(conds, "B", "False", "R", "", 1, T0)
    conds = c.set_condition(conds, "U", "Unknown", "R", "", 1, T0)
    assert c.find(conds, "A") is conds[0]
    assert c.find(conds, "missing") is None
    assert c.is_true(conds, "A") and not c.is_true(conds, "B") and not c.is_true(conds, "missing")
    assert c.is_false(conds, "B") and not c.is_false(conds, "A") and not c.is_false(conds, "missing")
    assert not c.is_true(conds, "U") and not c.is_false(conds, "U")


def test_is_terminal_and_active() -> None:
    assert not c.is_terminal([]) and c.active([]) is None
    running, _ = c.set_exclusive([], IP, "JobRunning", "", 1, T0)
    assert not c.is_terminal(running)
    assert c.active(running) == c.find(running, IP)
    done, _ = c.set_exclusive(running, OK, "JobCompleted", "", 1, T1)
    assert c.is_terminal(done)
    failed, _ = c.set_exclusive(running, KO, "IterationsFailed", "", 1, T1)
    assert c.is_terminal(failed)
    assert c.active(failed) == c.find(failed, KO)
    # an additive True condition alone is not terminal
    hw = c.set_condition(running, ConditionType.HARDWARE_FAILED, "True", "HardwareFailureDetected", "", 1, T1)
    assert not c.is_terminal(hw)


# --- set_exclusive -----------------------------------------------------------------------------


def test_set_exclusive_from_empty() -> None:
    out, transitioned = c.set_exclusive([], IP, "GroupsPartitioned", "Partitioned 3 groups", 4, T0)
    assert transitioned
    assert [x.type for x in out] == list(EXCLUSIVE_CONDITION_TYPES)
    assert trio(out) == {
        IP: ("True", "GroupsPartitioned", S0),
        OK: ("False", Reason.NOT_APPLICABLE, S0),
        KO: ("False", Reason.NOT_APPLICABLE, S0),
    }
    assert all(x.observed_generation == 4 for x in out)
    assert [x.message for x in out] == ["Partitioned 3 groups", "", ""]


def test_set_exclusive_same_type_is_not_a_transition_and_keeps_times() -> None:
    first, _ = c.set_exclusive([], IP, "JobCreated", "Iteration 1/1: 2 groups running", 1, T0)
    second, transitioned = c.set_exclusive(first, IP, "JobRunning", "Iteration 1/1: 1 groups running", 2, T1)
    assert not transitioned
    assert trio(second) == {
        IP: ("True", "JobRunning", S0),
        OK: ("False", Reason.NOT_APPLICABLE, S0),
        KO: ("False", Reason.NOT_APPLICABLE, S0),
    }
    assert all(x.observed_generation == 2 for x in second)


def test_set_exclusive_identical_call_changes_nothing() -> None:
    first, _ = c.set_exclusive([], IP, "JobRunning", "m", 1, T0)
    again, transitioned = c.set_exclusive(first, IP, "JobRunning", "m", 1, T2)
    assert again == first
    assert not transitioned


def test_set_exclusive_transition_moves_only_flipped_times() -> None:
    first, _ = c.set_exclusive([], IP, "JobRunning", "", 1, T0)
    out, transitioned = c.set_exclusive(
        first, KO, "IterationsFailed", "1 groups failed across 1 iterations", 1, T1
    )
    assert transitioned
    assert trio(out) == {
        IP: ("False", Reason.NOT_APPLICABLE, S1),
        OK: ("False", Reason.NOT_APPLICABLE, S0),  # was False already: time kept
        KO: ("True", "IterationsFailed", S1),
    }


def test_set_exclusive_keeps_additive_conditions() -> None:
    base = c.set_condition([], ConditionType.HARDWARE_FAILED, "True", "HardwareFailureDetected", "x", 1, T0)
    out, _ = c.set_exclusive(base, IP, "WorkloadRunning", "", 1, T1)
    assert out[0] == base[0]
    assert c.is_true(out, ConditionType.HARDWARE_FAILED)


def test_set_exclusive_superseded_variant() -> None:
    first, _ = c.set_exclusive([], IP, "WorkflowCreated", "Workflow r created", 1, T0, Reason.SUPERSEDED)
    out, transitioned = c.set_exclusive(
        first,
        OK,
        "WorkflowSucceeded",
        "Workflow completed successfully",
        1,
        T1,
        inactive_reason=Reason.SUPERSEDED,
    )
    assert transitioned
    assert trio(out) == {
        IP: ("False", Reason.SUPERSEDED, S1),
        OK: ("True", "WorkflowSucceeded", S1),
        KO: ("False", Reason.SUPERSEDED, S0),
    }


def test_set_exclusive_repairs_two_true_members() -> None:
    # e.g. a Job whose Failed was written directly while InProgress was still True
    broken = c.set_condition([], IP, "True", "WorkloadRunning", "", 1, T0)
    broken = c.set_condition(broken, KO, "True", "JobTimedOut", "Job exceeded timeoutPerJob", 1, T1)
    out, transitioned = c.set_exclusive(broken, KO, "JobTimedOut", "Job exceeded timeoutPerJob", 1, T2)
    assert transitioned  # active() saw InProgress first
    assert [x.status for x in out if x.status == "True"] == ["True"]
    assert c.is_true(out, KO) and c.is_false(out, IP)


def test_set_exclusive_rejects_non_trio_type() -> None:
    with pytest.raises(ValueError):
        c.set_exclusive([], ConditionType.VALIDATION_FAILED, "R", "", 1, T0)


def test_set_exclusive_does_not_mutate_input() -> None:
    first, _ = c.set_exclusive([], IP, "JobRunning", "", 1, T0)
    snapshot = copy.deepcopy(first)
    out, _ = c.set_exclusive(first, OK, "JobCompleted", "", 2, T1)
    assert first == snapshot
    assert out is not first


# --- events ------------------------------------------------------------------------------------


def test_event_for_transition() -> None:
    assert c.event_for_transition([], []) is None
    started, _ = c.set_exclusive([], IP, "GroupsPartitioned", "Partitioned", 1, T0)
    assert c.event_for_transition([], started) == ("Normal", "GroupsPartitioned", "Partitioned")
    still, _ = c.set_exclusive(started, IP, "JobRunning", "running", 1, T1)
    assert c.event_for_transition(started, still) is None
    done, _ = c.set_exclusive(still, OK, "JobCompleted", "All 1 iterations completed successfully", 1, T2)
    assert c.event_for_transition(still, done) == (
        "Normal",
        "JobCompleted",
        "All 1 iterations completed successfully",
    )
    failed, _ = c.set_exclusive(still, KO, "IterationsFailed", "1 groups failed across 1 iterations", 1, T2)
    event = c.event_for_transition(still, failed)
    assert event is not None
    assert (event.type, event.reason, event.message) == (
        "Warning",
        "IterationsFailed",
        "1 groups failed across 1 iterations",
    )
    assert c.event_for_transition(failed, failed) is None


# --- properties --------------------------------------------------------------------------------

trio_types = st.sampled_from(EXCLUSIVE_CONDITION_TYPES)
reasons = st.sampled_from(["JobCreated", "JobRunning", "JobCompleted", "IterationsFailed", "WorkloadFailed"])
messages = st.sampled_from(["", "a", "b"])
steps = st.lists(st.tuples(trio_types, reasons, messages, st.integers(0, 5)), min_size=1, max_size=12)


@given(steps=steps)
def test_exclusive_invariants(steps: list[tuple[str, str, str, int]]) -> None:
    conds: list[Condition] = []
    for i, (cond_type, reason, message, generation) in enumerate(steps):
        now = T0 + timedelta(seconds=i)
        before = list(conds)
        conds, transitioned = c.set_exclusive(conds, cond_type, reason, message, generation, now)
        assert before == list(before)  # untouched
        true_types = [x.type for x in conds if x.status == "True"]
        assert true_types == [cond_type]
        assert all(x.observed_generation == generation for x in conds)
        prev = c.active(before)
        assert transitioned == (prev is None or prev.type != cond_type)
        assert (c.event_for_transition(before, conds) is not None) == transitioned
        for x in conds:
            old = c.find(before, x.type)
            if old is not None and old.status == x.status:
                assert x.last_transition_time == old.last_transition_time
            else:
                assert x.last_transition_time == format_time(now)
        for x in conds:
            if x.type != cond_type:
                assert (x.reason, x.message) == (Reason.NOT_APPLICABLE, "")


def test_condition_lookup_on_plain_objects() -> None:
    obj = {
        "status": {
            "conditions": [
                {"type": "Failed", "status": "False", "reason": "NotApplicable"},
                {"type": "Succeeded", "status": "True", "reason": "Done"},
            ]
        }
    }
    assert c.condition_of(obj, "Failed") == {"type": "Failed", "status": "False", "reason": "NotApplicable"}
    assert c.condition_of(obj, "InProgress") is None
    assert c.condition_of({}, "Failed") is None
    assert c.condition_true(obj, "Succeeded") and not c.condition_true(obj, "Failed")
    assert not c.condition_true({"status": None}, "Succeeded")
