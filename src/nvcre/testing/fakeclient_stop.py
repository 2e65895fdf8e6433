"""An in-memory stand-in for lightkube's ``AsyncClient``, for unit tests of reconcile paths.

It is not an API server and does not replace one (integration tests use the real
kube-apiserver): no schema, no admission, no watches, no garbage collector. It keeps plain
objects, assigns uid and resourceVersion, and answers get / create / replace / delete the way
the API server does (404, 409 AlreadyExists, 409 on a stale resourceVersion, finalizers hold a
delete). Two hooks make the rare branches cheap to reach:

* ``fail(call)`` returns an HTTP status code to answer a call with instead (429, 500, 409...);
* ``stop_at = n`` raises :class:`Stopped` when the n-th write is attempted, as if the process
  were killed just before it, so a test can restart a reconcile after any line.

:class:`FakeManager` hands out informers that read the client's objects directly (a cache that
is never stale), so a real controller object can be built on top of the fake client.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError
from lightkube.core import resource as lkr
from lightkube.models.meta_v1 import Status

from nvcre.runtime.objects import Obj

Key = tuple[str, str, str, str]
"""(API group, kind, namespace, name)."""


class Stopped(BaseException):
    """The process "died" before a write (a BaseException, so no ``except Exception`` in the
    code under test can swallow it)."""


@dataclass(frozen=True)
class Call:
    verb: str
    kind: str
    namespace: str
    name: str
    subresource: str = ""


def api_error(code: int, message: str = "") -> ApiError:
    reasons = {404: "NotFound", 409: "Conflict", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError"}
    return ApiError(
        status=Status(code=code, message=message or reasons.get(code, str(code)), reason=reasons.get(code))
    )


def _info(resource: Any) -> tuple[str, str, str | None]:
    info = lkr.api_info(resource)
    return info.resource.group, info.resource.kind, info.action


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeClient:
    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.events: list[Obj] = []
        self.calls: list[Call] = []
        self.writes = 0
        self.stop_at: int | None = None
        self.fail: Callable[[Call], int | None] | None = None
        self._versions = itertools.count(1)

    # -- test helpers ---------------------------------------------------------------------

    def put(self, resource: Any, obj: Obj) -> Obj:
        """Store ``obj`` as if it had been created (no hooks, not counted as a write)."""
        group, kind, _ = _info(resource)
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[(group, kind, meta.get("namespace") or "", meta["name"])] = stored
        return copy.deepcopy(stored)

    def peek(self, resource: Any, name: str, namespace: str | None = None) -> Obj | None:
        group, kind, _ = _info(resource)
        found = self.objects.get((group, kind, namespace or "", name))
        return copy.deepcopy(found) if found is not None else None

    def all(self, resource: Any, namespace: str | None = None) -> list[Obj]:
        group, kind, _ = _info(resource)
        return [
            copy.deepcopy(o)
            for (g, k, ns, _), o in sorted(self.objects.items())
            if (g, k) == (group, kind) and (namespace is None or ns == namespace)
        ]

    # -- the client -------------------------------------------------------------------------

    def _enter(self, call: Call, *, write: bool) -> None:
        self.calls.append(call)
        if write:
            self.writes += 1
            if self.stop_at is not None and self.writes >= self.stop_at:
                raise Stopped(f"stopped before write {self.writes}: {call}")
        code = self.fail(call) if self.fail is not None else None
        if code is not None:
            raise api_error(code, f"injected {code} for {call.verb} {call.kind} {call.name}")

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        group, kind, _ = _info(resource)
        self._enter(Call("get", kind, namespace or "", name), write=False)
        found = self.objects.get((group, kind, namespace or "", name))
        if found is None:
            raise api_error(404, f'{kind} "{name}" not found')
        return resource.from_dict(copy.deepcopy(found))

    async def create(self, obj: Any, *, namespace: str | None = None) -> Any:
        resource = type(obj)
        group, kind, _ = _info(resource)
        data = obj.to_dict()
        meta = data.setdefault("metadata", {})
        ns = meta.get("namespace") or namespace or ""
        meta["namespace"] = ns or None
        if kind == "Event":
            self.events.append(data)
            return obj
        self._enter(Call("create", kind, ns, meta["name"]), write=True)
        if (group, kind, ns, meta["name"]) in self.objects:
            raise api_error(409, f'{kind} "{meta["name"]}" already exists')
        if not ns:
            meta.pop("namespace")
        meta.pop("resourceVersion", None)
        return resource.from_dict(self.put(resource, data))

    async def replace(self, obj: Any, name: str | None = None, *, namespace: str | None = None) -> Any:
        resource = type(obj)
        group, kind, action = _info(resource)
        data = obj.to_dict()
        meta = data["metadata"]
        ns, name = meta.get("namespace") or namespace or "", name or meta["name"]
        self._enter(Call("replace", kind, ns, name, action or ""), write=True)
        key = (group, kind, ns, name)
        stored = self.objects.get(key)
        if stored is None:
            raise api_error(404, f'{kind} "{name}" not found')
        if meta.get("resourceVersion") not in (None, stored["metadata"]["resourceVersion"]):
            raise api_error(
                409, f'the object has been modified; please apply your changes to {kind} "{name}"'
            )
        if action == "status":
            updated = copy.deepcopy(stored)
            updated["status"] = copy.deepcopy(data.get("status"))
        else:
            updated = copy.deepcopy(data)
            for kept in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
                if kept in stored["metadata"]:
                    updated["metadata"][kept] = stored["metadata"][kept]
            if "status" in stored:
                updated["status"] = copy.deepcopy(stored["status"])
            if updated.get("spec") != stored.get("spec"):
                updated["metadata"]["generation"] = int(stored["metadata"].get("generation") or 1) + 1
        updated["metadata"]["resourceVersion"] = str(next(self._versions))
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get("finalizers"):
            del self.objects[key]
        else:
            self.objects[key] = updated
        return resource.from_dict(copy.deepcopy(updated))

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None) -> None:
        group, kind, _ = _info(resource)
        self._enter(Call("delete", kind, namespace or "", name), write=True)
        key = (group, kind, namespace or "", name)
        stored = self.objects.get(key)
        if stored is None:
            raise api_error(404, f'{kind} "{name}" not found')
        if stored["metadata"].get("finalizers"):
            stored["metadata"].setdefault("deletionTimestamp", _now())
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
        else:
            del self.objects[key]


class FakeInformer:
    """An informer whose cache is the fake client's objects of one kind."""

    def __init__(self, client: FakeClient, resource: Any) -> None:
        self.client = client
        self.resource = resource
        self._index_funcs: dict[str, Callable[[Obj], Iterable[str]]] = {}

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.client.peek(self.resource, name, namespace or None)

    def items(self, namespace: str | None = None) -> list[Obj]:
        return self.client.all(self.resource, namespace)

    def has_index(self, name: str) -> bool:
        return name in self._index_funcs

    def add_index(self, name: str, func: Callable[[Obj], Iterable[str]]) -> None:
        self._index_funcs[name] = func

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [o for o in self.items() if value in self._index_funcs[index](o)]

    def add_handler(self, handler: Callable[[str, Obj | None, Obj], None]) -> None:
        """Nothing is ever delivered: the test calls reconcile itself."""


class FakeManager:
    """Enough of :class:`nvcre.runtime.manager.Manager` to build a controller on the fake client."""

    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self._informers: dict[Any, FakeInformer] = {}
        self.controllers: list[Any] = []

    def informer(self, resource: Any, *, namespace: str | None = None) -> FakeInformer:
        if resource not in self._informers:
            self._informers[resource] = FakeInformer(self.client, resource)
        return self._informers[resource]

    def add(self, controller: Any) -> None:
        self.controllers.append(controller)
