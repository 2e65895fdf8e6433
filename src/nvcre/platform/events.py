"""An event a decision wants emitted, as data: the shell turns it into a Kubernetes Event."""

from __future__ import annotations

from dataclasses import dataclass

from nvcre.api.v1alpha1.constants import EventType


@dataclass(frozen=True)
class Event:
    """``type`` is ``Normal`` or ``Warning``; ``reason`` is one of the ``EventReason`` constants."""

    type: str
    reason: str
    message: str

    @classmethod
    def normal(cls, reason: str, message: str) -> Event:
        return cls(EventType.NORMAL, reason, message)

    @classmethod
    def warning(cls, reason: str, message: str) -> Event:
        return cls(EventType.WARNING, reason, message)


def warning_if(reason: str, message: str) -> tuple[Event, ...]:
    """A detection's events: a Warning ``reason`` with its ``message``, none when the message is
    empty (nothing to warn of)."""
    return (Event.warning(reason, message),) if message else ()
