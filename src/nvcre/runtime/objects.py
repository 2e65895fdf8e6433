"""Objects as plain dicts, keyed by namespace and name."""

from __future__ import annotations

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
