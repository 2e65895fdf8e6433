"""Base model configuration and the Kubernetes Condition type."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class NvcreModel(BaseModel):
    """Base of every API model: camelCase wire names, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """Wire form: camelCase keys, only the fields that were set or defaulted by the schema."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Condition(NvcreModel):
    """``metav1.Condition``."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(default="", max_length=32768)
    last_transition_time: str = Field(json_schema_extra={"format": "date-time"})
    observed_generation: int | None = Field(default=None, ge=0)
