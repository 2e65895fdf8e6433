"""Which controller, object and pass wrote a log line.

A controller's worker sets :func:`reconciling` around each reconcile; every record logged in
that task (and in the work it hands to :mod:`~nvcre.runtime.offload`, run in a copy of its
context) then carries ``controller``, ``key`` and ``reconcile_id``, added by :class:`ContextFilter`. The id
counts the manager's reconciles, so one pass's lines can be picked out of interleaved ones.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Pass:
    controller: str
    key: str
    reconcile_id: int


_current: ContextVar[Pass | None] = ContextVar("nvcre_reconcile", default=None)
_ids = itertools.count(1)


@contextlib.contextmanager
def reconciling(controller: str, key: object) -> Iterator[Pass]:
    """Mark the lines logged inside as this reconcile's."""
    current = Pass(controller, str(key), next(_ids))
    token = _current.set(current)
    try:
        yield current
    finally:
        _current.reset(token)


def current() -> Pass | None:
    return _current.get()


class ContextFilter(logging.Filter):
    """Adds the reconcile's ``controller``, ``key`` and ``reconcile_id`` to each record (None
    outside a reconcile), and ``context``: ``[controller key #id] `` for a text line, empty
    outside a reconcile. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        now = _current.get()
        record.controller = now.controller if now else None
        record.key = now.key if now else None
        record.reconcile_id = now.reconcile_id if now else None
        record.context = f"[{now.controller} {now.key} #{now.reconcile_id}] " if now else ""
        return True
