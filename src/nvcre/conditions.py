"""Pure functions over ``status.conditions`` lists.

Kubernetes conventions: ``lastTransitionTime`` changes only when ``status`` flips;
``observedGeneration`` records the generation the condition was computed from. On the
execution trio ``InProgress``/``Succeeded``/``Failed`` exactly one is True.

Inputs are never mutated (``Condition`` is frozen and lists are copied); every function that
"changes" conditions returns a new list. The clock is an argument: nothing here reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, NamedTuple

from nvcre.api.v1alpha1.constants import (
    EXCLUSIVE_CONDITION_TYPES,
    TERMINAL_CONDITION_TYPES,
    ConditionStatus,
    ConditionType,
    EventType,
    Reason,
)
from nvcre.api.v1alpha1.meta import Condition, ConditionStatusValue, format_time

__all__ = [
    "PENDING",
    "TransitionEvent",
    "active",
    "condition_of",
    "condition_true",
    "ended",
    "event_for_transition",
    "find",
    "from_status",
    "is_false",
    "is_terminal",
    "is_true",
    "remove_condition",
    "run_state",
    "set_condition",
    "set_exclusive",
    "set_in_status",
    "to_status",
]

PENDING: Final = "Pending"
"""The state of a run, Workflow or Job before the controller wrote its execution condition."""


def find(conds: Sequence[Condition], cond_type: str) -> Condition | None:
    """The condition of that type, or ``None``."""
    for c in conds:
        if c.type == cond_type:
            return c
    return None


def condition_of(obj: Mapping[str, Any], cond_type: str) -> dict[str, Any] | None:
    """The condition of that type in a plain object's ``status.conditions`` (whatever its
    status), or ``None``: the lookup for objects read as dicts, where ``find`` takes models."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == cond_type:
            return dict(c)
    return None


def condition_true(obj: Mapping[str, Any], cond_type: str) -> bool:
    """The plain object's condition of that type is ``True``."""
    c = condition_of(obj, cond_type)
    return c is not None and c.get("status") == ConditionStatus.TRUE


def ended(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(``Succeeded`` or ``Failed``, when it became True) of a plain object whose terminal
    condition is True (an empty time when the condition has none), else ``None``."""
    for cond_type in TERMINAL_CONDITION_TYPES:
        c = condition_of(obj, cond_type)
        if c is not None and c.get("status") == ConditionStatus.TRUE:
            return cond_type, str(c.get("lastTransitionTime") or "")
    return None


def from_status(status: Mapping[str, Any]) -> list[Condition]:
    """A plain ``status``'s conditions as models (the read half of every status round trip)."""
    return [Condition.model_validate(c) for c in status.get("conditions") or ()]


def to_status(status: dict[str, Any], conds: Sequence[Condition]) -> None:
    """Write ``conds`` into a plain ``status`` in the form the API takes (the write half)."""
    status["conditions"] = [c.to_dict() for c in conds]


def set_in_status(
    status: dict[str, Any],
    cond_type: str,
    value: ConditionStatusValue,
    reason: str,
    message: str,
    generation: int | None,
    now: datetime,
) -> None:
    """:func:`set_condition` on a plain ``status``, in place."""
    to_status(status, set_condition(from_status(status), cond_type, value, reason, message, generation, now))


def run_state(obj: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """(state, reason, message) of a plain object: its True member of the execution trio
    (``InProgress``, ``Succeeded``, ``Failed``), or :data:`PENDING` before one was written.

    The one run-state vocabulary of the CLI's status commands, the ``--wait`` progress view and
    the report.
    """
    for cond_type in EXCLUSIVE_CONDITION_TYPES:
        c = condition_of(obj or {}, cond_type)
        if c is not None and c.get("status") == ConditionStatus.TRUE:
            return cond_type, str(c.get("reason") or ""), str(c.get("message") or "")
    return PENDING, "", ""


def is_true(conds: Sequence[Condition], cond_type: str) -> bool:
    c = find(conds, cond_type)
    return c is not None and c.status == ConditionStatus.TRUE


def is_false(conds: Sequence[Condition], cond_type: str) -> bool:
    c = find(conds, cond_type)
    return c is not None and c.status == ConditionStatus.FALSE


def set_condition(
    conds: Sequence[Condition],
    cond_type: str,
    status: ConditionStatusValue,
    reason: str,
    message: str,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """Set one condition (``meta.SetStatusCondition`` semantics) and return the new list.

    A new type is appended with ``lastTransitionTime = now``. An existing one keeps its place
    and gets the new reason, message and observedGeneration; its ``lastTransitionTime`` moves to
    ``now`` only if ``status`` changed.
    """
    existing = find(conds, cond_type)
    transition_time = (
        existing.last_transition_time
        if existing is not None and existing.status == status
        else format_time(now)
    )
    updated = Condition(
        type=cond_type,
        status=status,
        observed_generation=generation,
        last_transition_time=transition_time,
        reason=reason,
        message=message,
    )
    if existing is None:
        return [*conds, updated]
    return [updated if c.type == cond_type else c for c in conds]


def remove_condition(conds: Sequence[Condition], cond_type: str) -> list[Condition]:
    """The list without the condition of that type."""
    return [c for c in conds if c.type != cond_type]


def active(conds: Sequence[Condition]) -> Condition | None:
    """The True member of the execution trio (first in trio order), or ``None``."""
    for cond_type in EXCLUSIVE_CONDITION_TYPES:
        c = find(conds, cond_type)
        if c is not None and c.status == ConditionStatus.TRUE:
            return c
    return None


def is_terminal(conds: Sequence[Condition]) -> bool:
    """``Succeeded`` or ``Failed`` is True."""
    return any(is_true(conds, t) for t in TERMINAL_CONDITION_TYPES)


def set_exclusive(
    conds: Sequence[Condition],
    cond_type: str,
    reason: str,
    message: str,
    generation: int | None,
    now: datetime,
    inactive_reason: str = Reason.NOT_APPLICABLE,
) -> tuple[list[Condition], bool]:
    """Make ``cond_type`` the True member of the execution trio.

    The chosen type gets ``True`` with ``reason`` and ``message``; the other two get ``False``
    with ``inactive_reason`` (``NotApplicable``; ``Superseded`` on WorkloadRun) and an empty
    message. All three carry ``observedGeneration = generation``. Other conditions are kept.

    Returns ``(new_conditions, transitioned)``; ``transitioned`` is True when the True type
    changed (including from none), which is when an event is due. Callers skip the status
    write when ``new_conditions == conds``.
    """
    if cond_type not in EXCLUSIVE_CONDITION_TYPES:
        raise ValueError(f"{cond_type!r} is not one of {', '.join(EXCLUSIVE_CONDITION_TYPES)}")
    before = active(conds)
    result = list(conds)
    for t in EXCLUSIVE_CONDITION_TYPES:
        if t == cond_type:
            result = set_condition(result, t, ConditionStatus.TRUE, reason, message, generation, now)
        else:
            result = set_condition(result, t, ConditionStatus.FALSE, inactive_reason, "", generation, now)
    transitioned = before is None or before.type != cond_type
    return result, transitioned


class TransitionEvent(NamedTuple):
    """A Kubernetes event to emit for a change of the True execution condition."""

    type: str
    reason: str
    message: str


def event_for_transition(before: Sequence[Condition], after: Sequence[Condition]) -> TransitionEvent | None:
    """The event due when the True trio member differs between ``before`` and ``after``.

    ``Warning`` if the new True type is ``Failed``, else ``Normal``; reason and message are the
    new condition's. ``None`` when the True type did not change or nothing is True afterwards.
    """
    old, new = active(before), active(after)
    if new is None or (old is not None and old.type == new.type):
        return None
    event_type = EventType.WARNING if new.type == ConditionType.FAILED else EventType.NORMAL
    return TransitionEvent(event_type, new.reason, new.message)
