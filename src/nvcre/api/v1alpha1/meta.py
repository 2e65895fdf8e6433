"""Shared model base and the Kubernetes ``metav1.Condition`` type."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

NVCRE_MODEL_CONFIG = ConfigDict(
    alias_generator=to_camel,
    populate_by_name=True,
    serialize_by_alias=True,
    extra="forbid",
    defer_build=True,
)
"""Config of every API model: snake_case in Python, camelCase on the wire, unknown fields rejected.

Schemas are built on first use, so a command pays only for the models it validates."""


class NvcreModel(BaseModel):
    """Base of the API models. ``to_dict()`` gives the wire form (camelCase, ``None`` omitted)."""

    model_config = NVCRE_MODEL_CONFIG

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- time --------------------------------------------------------------------------------------

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def format_time(t: datetime) -> str:
    """``metav1.Time`` wire form: UTC, whole seconds, ``YYYY-MM-DDTHH:MM:SSZ``. Naive means UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(s: str) -> datetime:
    """Parse an RFC 3339 timestamp into an aware datetime; ``ValueError`` if it is not one."""
    if not _RFC3339.match(s):
        raise ValueError(f"not an RFC 3339 timestamp: {s!r}")
    return datetime.fromisoformat(s)


# --- Condition ---------------------------------------------------------------------------------

ConditionStatusValue = Literal["True", "False", "Unknown"]

# Same constraints as the OpenAPI schema of metav1.Condition.
_CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(NvcreModel):
    """One entry of a ``status.conditions`` list (``metav1.Condition``). Immutable."""

    model_config = ConfigDict(frozen=True)

    type: Annotated[str, Field(max_length=316, pattern=_CONDITION_TYPE_PATTERN)]
    status: ConditionStatusValue
    observed_generation: Annotated[int | None, Field(ge=0)] = None
    last_transition_time: Annotated[str, Field(json_schema_extra={"format": "date-time"})]
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=_CONDITION_REASON_PATTERN)]
    message: Annotated[str, Field(max_length=32768)]

    @field_validator("last_transition_time", mode="before")
    @classmethod
    def _check_time(cls, value: object) -> object:
        if isinstance(value, datetime):
            return format_time(value)
        if isinstance(value, str):
            parse_time(value)
        return value
