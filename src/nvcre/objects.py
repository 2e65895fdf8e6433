"""Objects as plain dicts, keyed by namespace and name, and the status changes decided on them.

Imports no client: the pure core and the shell share these types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class ObjectKey(NamedTuple):
    """Identity of an object; ``namespace`` is empty for cluster-scoped kinds."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


Obj = dict[str, Any]

StatusChange = Callable[[dict[str, Any]], None]
"""Mutates ``status`` in place; applied again to a fresh copy after every conflict."""


def key_of(obj: Obj) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return ObjectKey(meta.get("namespace") or "", meta.get("name") or "")


def controller_owner(obj: Obj) -> dict[str, Any] | None:
    """The owner reference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def resource_version(obj: Obj) -> int:
    """resourceVersion as a number, for ordering observations of one object (0 if absent)."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0
