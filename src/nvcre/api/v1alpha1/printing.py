"""What ``kubectl get`` shows of a kind: its printer columns (the CRD's ``additionalPrinterColumns``).

Each kind lists its columns next to its model (``Resource.COLUMNS``); the CRD generator writes
them. A column reads one JSONPath of the object; a filter picks a list entry
(``.status.conditions[?(@.status=="True")].type``) and the API server shows the first match, or
nothing when there is none. Priority 0 is the default table, 1 only ``-o wide``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from nvcre.api.v1alpha1.constants import ConditionType

ColumnType = Literal["string", "integer", "number", "boolean", "date"]


@dataclass(frozen=True)
class Column:
    name: str
    json_path: str
    description: str
    type: ColumnType = "string"
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The ``additionalPrinterColumns`` entry."""
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "jsonPath": self.json_path,
            "description": self.description,
        }
        if self.priority:
            out["priority"] = self.priority
        return out


def label_path(key: str) -> str:
    """The JSONPath of the label ``key`` (its dots escaped)."""
    return ".metadata.labels." + key.replace(".", "\\.")


AGE = Column("Age", ".metadata.creationTimestamp", "Time since the object was created.", "date")

_TRUE = '[?(@.status=="True")]'


def state_columns(what: str) -> tuple[Column, ...]:
    """STATUS and REASON of a kind with the execution trio (``MESSAGE`` adds its message).

    The trio is written before any additive condition (ValidationFailed, HardwareFailed), so the
    first True condition is the trio's: ``InProgress``, ``Succeeded`` or ``Failed``.
    """
    return (
        Column(
            "Status",
            f".status.conditions{_TRUE}.type",
            f"The {what}'s state: {ConditionType.IN_PROGRESS}, {ConditionType.SUCCEEDED} or "
            f"{ConditionType.FAILED} (the True condition of the three); empty until the manager saw it.",
        ),
        Column("Reason", f".status.conditions{_TRUE}.reason", "The reason of that condition."),
    )


MESSAGE = Column(
    "Message", f".status.conditions{_TRUE}.message", "The message of that condition.", priority=1
)


def measurement_columns() -> tuple[Column, ...]:
    """COMPLETE (its final read is done) and REASON (why it measures, waits or ended) of a measurement."""
    complete = f'.status.conditions[?(@.type=="{ConditionType.COMPLETE}")]'
    measuring = f'.status.conditions[?(@.type=="{ConditionType.MEASURING}")]'
    return (
        Column(
            "Complete", f"{complete}.status", "True once the final read is written (it never changes after)."
        ),
        Column(
            "Reason",
            f"{measuring}.reason",
            "JobRunning while it samples; then why it waits or how it ended (the Complete reason).",
        ),
    )


JOB = Column("Job", ".spec.jobRef.name", "The nvcre Job it measures.", priority=1)
