"""Objects as plain dicts, keyed by namespace and name."""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

from lightkube.core import resource as lkr


class ObjectKey(NamedTuple):
    """Identity of an object; ``namespace`` is empty for cluster-scoped kinds."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


Obj = dict[str, Any]


def key_of(obj: Obj) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return ObjectKey(meta.get("namespace") or "", meta.get("name") or "")


def to_plain(resource: type[lkr.Resource], obj: Any) -> Obj:
    """A lightkube object (typed or generic) as a plain dict with apiVersion and kind."""
    data: Obj = obj if isinstance(obj, dict) else obj.to_dict()
    info = lkr.api_info(resource).resource
    data.setdefault("apiVersion", f"{info.group}/{info.version}" if info.group else info.version)
    data.setdefault("kind", info.kind)
    return data


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


def without_managed_fields(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (server-side apply bookkeeping: often the
    largest part of an object, and never read by a controller). An update that omits them
    leaves the server's copy as it is, so writing a cached object back loses nothing."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


_SHORT = 128
"""Strings up to this length are interned by :func:`compact` (names, label values, condition
types, reasons, messages, timestamps); longer ones (a command, a script) are rarely repeated."""


def compact(value: Any) -> Any:
    """``value`` (decoded JSON) rebuilt to take less memory, and equal but for its nulls.

    A JSON decoder makes a fresh string for every key and value of every object, so 4,096 nodes
    hold 4,096 copies of ``"lastTransitionTime"``, ``"KubeletReady"``, ``"nvidia.com/gpu.product"``
    and their values. Interning keys and short string values makes each one string shared by all
    objects (interned strings are freed again once nothing holds them). Null members are dropped,
    as a typed client model omits them, so that ``"x" in obj`` and ``obj.get("x")`` agree.
    """
    if isinstance(value, dict):
        return {_intern(k): compact(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, str) and len(value) <= _SHORT:
        return _intern(value)
    return value


_intern = sys.intern
