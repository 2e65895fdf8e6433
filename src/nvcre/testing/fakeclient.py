"""An in-memory stand-in for lightkube's ``AsyncClient``, for unit tests of reconcile paths.

It keeps objects by kind, namespace and name, bumps ``resourceVersion`` on every write, answers
409 for a create of an existing name or a replace at an old ``resourceVersion``, and 404 for a
missing object, the way the API server does. ``fail`` makes the next calls of one verb on one
kind raise a given status (422, 429, 500...), so the error branches of a controller run in
milliseconds; the real API server (tests/integration) keeps schema, CEL, watches and restarts.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from lightkube import ApiError
from lightkube.core import resource as lkr
from lightkube.models.meta_v1 import Status, StatusDetails

from nvcre.controllers.context import Context
from nvcre.controllers.events import Recorder
from nvcre.controllers.status import StatusWriter
from nvcre.runtime.informer import Informer
from nvcre.runtime.objects import Obj


def api_error(code: int, message: str, *, retry_after: int | None = None) -> ApiError:
    details = StatusDetails(retryAfterSeconds=retry_after) if retry_after is not None else None
    return ApiError(status=Status(code=code, message=message, details=details))


def _kind(resource: Any) -> str:
    return str(lkr.api_info(resource if isinstance(resource, type) else type(resource)).resource.kind)


@dataclass
class Call:
    verb: str
    kind: str
    name: str
    namespace: str | None


@dataclass
class FakeClient:
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    logs: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    _faults: dict[tuple[str, str], list[ApiError]] = field(default_factory=dict)
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- test setup --------------------------------------------------------------------------

    def put(self, obj: Obj) -> Obj:
        """Store ``obj`` as if created by someone else; returns the stored copy."""
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[(stored["kind"], meta.get("namespace") or "", meta["name"])] = stored
        return copy.deepcopy(stored)

    def fail(self, verb: str, kind: str, *errors: ApiError) -> None:
        """The next ``len(errors)`` calls of ``verb`` on ``kind`` raise these errors, in order."""
        self._faults.setdefault((verb, kind), []).extend(errors)

    def stored(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        found = self.objects.get((kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def count(self, verb: str, kind: str) -> int:
        return sum(1 for c in self.calls if (c.verb, c.kind) == (verb, kind))

    # -- the AsyncClient surface the controllers use -----------------------------------------

    def _enter(self, verb: str, kind: str, name: str, namespace: str | None) -> None:
        self.calls.append(Call(verb, kind, name, namespace))
        pending = self._faults.get((verb, kind))
        if pending:
            raise pending.pop(0)

    def _missing(self, kind: str, name: str) -> ApiError:
        return api_error(404, f'{kind.lower()}s "{name}" not found')

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Obj:
        kind = _kind(resource)
        self._enter("get", kind, name, namespace)
        found = self.stored(kind, name, namespace or "")
        if found is None:
            raise self._missing(kind, name)
        return found

    async def create(self, obj: Any) -> Obj:
        data = obj if isinstance(obj, dict) else obj.to_dict()
        kind, meta = _kind(obj), data["metadata"]
        self._enter("create", kind, meta["name"], meta.get("namespace"))
        if (kind, meta.get("namespace") or "", meta["name"]) in self.objects:
            raise api_error(409, f'{kind.lower()}s "{meta["name"]}" already exists')
        data.setdefault("kind", kind)
        return self.put(data)

    async def replace(self, obj: Any, name: str | None = None, *, namespace: str | None = None) -> Obj:
        data = copy.deepcopy(obj if isinstance(obj, dict) else obj.to_dict())
        kind, meta = _kind(obj), data["metadata"]
        status_only = lkr.api_info(type(obj)).action == "status"
        key = (kind, meta.get("namespace") or "", meta["name"])
        self._enter("replace-status" if status_only else "replace", kind, meta["name"], meta.get("namespace"))
        live = self.objects.get(key)
        if live is None:
            raise self._missing(kind, meta["name"])
        if meta.get("resourceVersion") != live["metadata"]["resourceVersion"]:
            raise api_error(
                409, "the object has been modified; please apply your changes to the latest version"
            )
        if status_only:
            written = {**copy.deepcopy(live), "status": data.get("status") or {}}
        else:
            written = {k: v for k, v in data.items() if k != "status"}
            if "status" in live:  # a main-resource write never changes status
                written["status"] = copy.deepcopy(live["status"])
            if live["metadata"].get("deletionTimestamp") and not data["metadata"].get("finalizers"):
                del self.objects[key]
                return data
        written["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[key] = written
        return copy.deepcopy(written)

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None) -> None:
        kind = _kind(resource)
        self._enter("delete", kind, name, namespace)
        key = (kind, namespace or "", name)
        if key not in self.objects:
            raise self._missing(kind, name)
        if self.objects[key]["metadata"].get("finalizers"):
            self.objects[key]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        else:
            del self.objects[key]

    async def log(
        self, name: str, *, namespace: str | None = None, container: str | None = None, **_: Any
    ) -> AsyncIterator[str]:
        self._enter("log", "Pod", name, namespace)
        for line in self.logs.get((namespace or "", name), []):
            yield line


class FakeManager:
    """The part of :class:`nvcre.runtime.manager.Manager` a controller's constructor uses, with
    informers that are never started: a test fills their caches with :meth:`cache`, so a cache
    can lag the fake API server exactly as far as the test wants."""

    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.controllers: list[Any] = []
        self._informers: dict[Any, Informer] = {}

    def informer(self, resource: Any, *, namespace: str | None = None) -> Informer:
        if resource not in self._informers:
            self._informers[resource] = Informer(self.client, resource)  # type: ignore[arg-type]
        return self._informers[resource]

    def add(self, controller: Any) -> None:
        self.controllers.append(controller)

    def cache(self, obj: Obj, event: str = "ADDED") -> None:
        """Deliver ``obj`` to the informer of its kind as a watch event would."""
        informer = next(i for r, i in self._informers.items() if _kind(r) == obj["kind"])
        informer._apply(event, copy.deepcopy(obj))


def context(client: FakeClient) -> Context:
    """A controller :class:`~nvcre.controllers.context.Context` over ``client`` and a FakeManager."""
    recorder = Recorder(client)  # type: ignore[arg-type]
    return Context(client, FakeManager(client), recorder, StatusWriter(client, recorder))  # type: ignore[arg-type]
