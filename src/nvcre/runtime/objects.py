"""Plain objects from and for the client: typed lightkube objects as dicts, and decoded JSON
made compact for the caches."""

from __future__ import annotations

import sys
from typing import Any

from lightkube.core import resource as lkr

from nvcre.objects import Obj


def to_plain(resource: type[lkr.Resource], obj: Any) -> Obj:
    """A lightkube object (typed or generic) as a plain dict with apiVersion and kind."""
    data: Obj = obj if isinstance(obj, dict) else obj.to_dict()
    info = lkr.api_info(resource).resource
    data.setdefault("apiVersion", f"{info.group}/{info.version}" if info.group else info.version)
    data.setdefault("kind", info.kind)
    return data


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
