"""An in-memory stand-in for lightkube's ``AsyncClient``, for unit tests of reconcile paths.

It is not an API server and does not replace one (integration tests use the real
kube-apiserver): no schema, no admission, no watches, no garbage collector. It keeps plain
objects by API group, kind, namespace and name, assigns uid and resourceVersion, and answers
get / list / create / replace / delete / log the way the API server does (404, 409 AlreadyExists, 409
on a stale resourceVersion, finalizers hold a delete). Two hooks make the rare branches cheap to
reach:

* ``fail(verb, kind, *errors)`` makes the next matching calls raise those errors (422, 429,
  500, 409...), so the error branches of a controller run in milliseconds;
* ``stop_at = n`` raises :class:`Stopped` when the n-th write is attempted, as if the process
  were killed just before it, so a test can restart a reconcile after any line.

Events are appended to ``events``; ``fail("create", "Event", ...)`` fails their writes, which
are never counted as writes and never stop.

:class:`FakeManager` builds a real controller on the fake client, with caches of one of two
kinds: ``follow=True`` informers read the client's objects directly (a cache that is never
stale); otherwise they are never started and a test fills them with :meth:`FakeManager.cache`,
so a cache lags the fake API server exactly as far as the test wants.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError
from lightkube.core import resource as lkr
from lightkube.models.meta_v1 import Status, StatusDetails
from lightkube.types import PatchType

from nvcre.controllers.context import Context
from nvcre.controllers.events import Recorder
from nvcre.controllers.ownership import Ownership
from nvcre.controllers.status import StatusWriter
from nvcre.objects import Obj
from nvcre.runtime.clock import Clock, SystemClock
from nvcre.runtime.informer import Informer

Key = tuple[str, str, str, str]
"""(API group, kind, namespace, name)."""

_REASONS = {404: "NotFound", 409: "Conflict", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError"}


class Stopped(BaseException):
    """The process "died" before a write (a BaseException, so no ``except Exception`` in the
    code under test can swallow it)."""


@dataclass(frozen=True)
class Call:
    verb: str
    """get, list, create, replace, patch, delete or log."""
    kind: str
    namespace: str
    name: str
    subresource: str = ""
    """"status" for a status write."""


def api_error(code: int, message: str = "", *, retry_after: int | None = None) -> ApiError:
    details = StatusDetails(retryAfterSeconds=retry_after) if retry_after is not None else None
    return ApiError(
        status=Status(
            code=code,
            message=message or _REASONS.get(code, str(code)),
            reason=_REASONS.get(code),
            details=details,
        )
    )


def _info(resource: Any) -> tuple[str, str, str | None]:
    info = lkr.api_info(resource)
    return info.resource.group, info.resource.kind, info.action


def _key(obj: Obj) -> Key:
    api_version, meta = str(obj["apiVersion"]), obj["metadata"]
    group = api_version.rpartition("/")[0]
    return group, obj["kind"], meta.get("namespace") or "", meta["name"]


def _merge(target: Obj, patch: Obj) -> Obj:
    """RFC 7386: objects merge key by key, ``None`` removes a key, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            target[key] = _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Fault:
    verbs: Collection[str]
    kind: str
    subresource: str
    errors: list[ApiError]
    answered: list[Call]

    def matches(self, call: Call) -> bool:
        return (
            bool(self.errors)
            and call.verb in self.verbs
            and (call.kind, call.subresource) == (self.kind, self.subresource)
        )


@dataclass
class _Request:
    resource: Any
    name: str
    namespace: str | None
    data: Any = None


class _Http:
    """The part of lightkube's generic client that a DELETE with a DeleteOptions body goes
    through (``nvcre.controllers.children``; lightkube's ``delete`` sends none)."""

    def __init__(self, fake: FakeClient) -> None:
        self.fake = fake

    def prepare_request(
        self, method: str, resource: Any, name: str, namespace: str | None = None, **_: Any
    ) -> _Request:
        assert method == "delete", method
        return _Request(resource, name, namespace)

    def build_adapter_request(self, request: _Request) -> _Request:
        return request

    async def send(self, request: _Request) -> None:
        preconditions = (request.data or {}).get("preconditions")
        await self.fake.delete(
            request.resource, request.name, namespace=request.namespace, preconditions=preconditions
        )

    def raise_for_status(self, response: None) -> None:
        """``send`` raised already."""


class FakeClient:
    def __init__(self) -> None:
        self._client = _Http(self)
        self.objects: dict[Key, Obj] = {}
        self.events: list[Obj] = []
        self.calls: list[Call] = []
        self.logs: dict[tuple[str, str], list[str]] = {}
        """Lines ``log`` streams, by (namespace, pod name)."""
        self.writes = 0
        self.stop_at: int | None = None
        self._faults: list[_Fault] = []
        self._versions = itertools.count(1)

    # -- test helpers ---------------------------------------------------------------------

    def put(self, obj: Obj) -> Obj:
        """Store ``obj`` (with its apiVersion and kind) as if someone else had written it: no
        hooks, not counted as a write. Returns the stored copy."""
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[_key(stored)] = stored
        return copy.deepcopy(stored)

    def stored(self, resource: Any, name: str, namespace: str | None = None) -> Obj | None:
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

    def fail(
        self, verb: str | Collection[str], kind: str, *errors: ApiError, subresource: str = ""
    ) -> list[Call]:
        """The next ``len(errors)`` calls of ``verb`` (or any of several verbs) on ``kind`` (its
        ``subresource``, e.g. "status") raise these errors, in order. Returns the list of the
        calls answered so, filled as they happen."""
        verbs = (verb,) if isinstance(verb, str) else verb
        fault = _Fault(verbs, kind, subresource, list(errors), [])
        self._faults.append(fault)
        return fault.answered

    def count(self, verb: str, kind: str, subresource: str = "") -> int:
        return sum(1 for c in self.calls if (c.verb, c.kind, c.subresource) == (verb, kind, subresource))

    # -- the AsyncClient surface the controllers use -----------------------------------------

    def _enter(self, call: Call, *, write: bool) -> None:
        self.calls.append(call)
        if write:
            self.writes += 1
            if self.stop_at is not None and self.writes >= self.stop_at:
                raise Stopped(f"stopped before write {self.writes}: {call}")
        self._raise_fault(call)

    def _raise_fault(self, call: Call) -> None:
        fault = next((f for f in self._faults if f.matches(call)), None)
        if fault is not None:
            fault.answered.append(call)
            raise fault.errors.pop(0)

    def _existing(self, group: str, call: Call, *, write: bool) -> tuple[Key, Obj]:
        """Enter ``call`` and return the key and the stored object it names; 404 when none is."""
        self._enter(call, write=write)
        key = (group, call.kind, call.namespace, call.name)
        stored = self.objects.get(key)
        if stored is None:
            raise api_error(404, f'{call.kind} "{call.name}" not found')
        return key, stored

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        group, kind, _ = _info(resource)
        _, found = self._existing(group, Call("get", kind, namespace or "", name), write=False)
        return resource.from_dict(copy.deepcopy(found))

    async def list(
        self, resource: Any, *, namespace: str | None = None, fields: dict[str, str] | None = None
    ) -> AsyncIterator[Any]:
        """The stored objects of ``resource`` (in ``namespace``) whose field at each dotted path of
        ``fields`` (a field selector) equals its value."""
        _, kind, _ = _info(resource)
        self._enter(Call("list", kind, namespace or "", ""), write=False)
        for obj in self.all(resource, namespace):
            if all(_at(obj, path) == value for path, value in (fields or {}).items()):
                yield resource.from_dict(obj)

    async def create(self, obj: Any, *, namespace: str | None = None) -> Any:
        resource = type(obj)
        group, kind, _ = _info(resource)
        data = obj.to_dict()
        meta = data.setdefault("metadata", {})
        ns = meta.get("namespace") or namespace or ""
        meta["namespace"] = ns or None
        if kind == "Event":
            self._raise_fault(Call("create", kind, ns, meta["name"]))
            self.events.append(data)
            return obj
        self._enter(Call("create", kind, ns, meta["name"]), write=True)
        if (group, kind, ns, meta["name"]) in self.objects:
            raise api_error(409, f'{kind} "{meta["name"]}" already exists')
        if not ns:
            meta.pop("namespace")
        meta.pop("resourceVersion", None)
        return resource.from_dict(self.put(data))

    async def replace(self, obj: Any, name: str | None = None, *, namespace: str | None = None) -> Any:
        resource = type(obj)
        group, kind, action = _info(resource)
        data = obj.to_dict()
        meta = data["metadata"]
        ns, name = meta.get("namespace") or namespace or "", name or meta["name"]
        key, stored = self._existing(group, Call("replace", kind, ns, name, action or ""), write=True)
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
            if "status" in stored:  # a main-resource write never changes status
                updated["status"] = copy.deepcopy(stored["status"])
            if updated.get("spec") != stored.get("spec"):
                updated["metadata"]["generation"] = int(stored["metadata"].get("generation") or 1) + 1
        updated["metadata"]["resourceVersion"] = str(next(self._versions))
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get("finalizers"):
            del self.objects[key]
        else:
            self.objects[key] = updated
        return resource.from_dict(copy.deepcopy(updated))

    async def patch(
        self,
        resource: Any,
        name: str,
        obj: Obj,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.STRATEGIC,
    ) -> Any:
        """A JSON merge patch (RFC 7386) of the main resource; the only patch the controllers send."""
        if patch_type is not PatchType.MERGE:
            raise NotImplementedError(f"{patch_type} patches")
        group, kind, _ = _info(resource)
        key, stored = self._existing(group, Call("patch", kind, namespace or "", name), write=True)
        updated = _merge(copy.deepcopy(stored), obj)
        updated["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[key] = updated
        return resource.from_dict(copy.deepcopy(updated))

    async def delete(
        self,
        resource: Any,
        name: str,
        *,
        namespace: str | None = None,
        preconditions: dict[str, str] | None = None,
    ) -> None:
        """``preconditions`` (``uid``, ``resourceVersion``): a 409 when the stored object differs,
        as the API server answers a DeleteOptions body (see :class:`_Http`)."""
        group, kind, _ = _info(resource)
        key, stored = self._existing(group, Call("delete", kind, namespace or "", name), write=True)
        meta = stored["metadata"]
        for field, wanted in (preconditions or {}).items():
            if meta.get(field) != wanted:
                raise api_error(
                    409, f"Precondition failed: {field}: {wanted}, {field} in object meta: {meta.get(field)}"
                )
        if stored["metadata"].get("finalizers"):
            stored["metadata"].setdefault("deletionTimestamp", _now())
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
        else:
            del self.objects[key]

    async def log(
        self, name: str, *, namespace: str | None = None, container: str | None = None, **_: Any
    ) -> AsyncIterator[str]:
        self._enter(Call("log", "Pod", namespace or "", name), write=False)
        for line in self.logs.get((namespace or "", name), []):
            yield line


class _FollowingInformer:
    """An informer whose cache is the fake client's objects of one kind. Nothing is ever
    delivered to its handlers: the test calls reconcile itself."""

    def __init__(self, client: FakeClient, resource: Any) -> None:
        self.client = client
        self.resource = resource
        self._index_funcs: dict[str, Callable[[Obj], Iterable[str]]] = {}

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.client.stored(self.resource, name, namespace or None)

    def items(self, namespace: str | None = None) -> list[Obj]:
        return self.client.all(self.resource, namespace)

    def has_index(self, name: str) -> bool:
        return name in self._index_funcs

    def add_index(self, name: str, func: Callable[[Obj], Iterable[str]]) -> None:
        self._index_funcs[name] = func

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [o for o in self.items() if value in self._index_funcs[index](o)]

    def add_handler(self, handler: Callable[[str, Obj | None, Obj], None]) -> None:
        pass


class FakeManager:
    """The part of :class:`nvcre.runtime.manager.Manager` a controller's constructor uses.

    With ``follow=True`` its informers read the client's objects (never stale, no events);
    otherwise they are real informers that are never started, filled by :meth:`cache`."""

    def __init__(self, client: FakeClient, *, follow: bool = False) -> None:
        self.client = client
        self.follow = follow
        self.controllers: list[Any] = []
        self._informers: dict[Any, Informer | _FollowingInformer] = {}

    def informer(
        self,
        resource: Any,
        *,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> Any:
        """One cache per kind; a label selector and a transform are the real manager's business
        (a test puts only the objects it means into a cache)."""
        if resource not in self._informers:
            self._informers[resource] = (
                _FollowingInformer(self.client, resource) if self.follow else Informer(self.client, resource)  # type: ignore[arg-type]
            )
        return self._informers[resource]

    def add(self, controller: Any) -> None:
        self.controllers.append(controller)

    def cache(self, obj: Obj, event: str = "ADDED") -> None:
        """Deliver ``obj`` to the informer of its kind as a watch event would."""
        if self.follow:
            raise TypeError("a following cache is the client's objects: put them there instead")
        informer = next(i for r, i in self._informers.items() if _info(r)[1] == obj["kind"])
        assert isinstance(informer, Informer)
        informer._apply(event, copy.deepcopy(obj))


def context(client: FakeClient, *, follow: bool = False, clock: Clock | None = None) -> Context:
    """A controller :class:`~nvcre.controllers.context.Context` over ``client`` and a
    :class:`FakeManager` (``follow`` as there), on ``clock`` (the machine's by default)."""
    clock = clock or SystemClock()
    recorder = Recorder(client)  # type: ignore[arg-type]
    manager = FakeManager(client, follow=follow)
    status = StatusWriter(client, recorder, clock)  # type: ignore[arg-type]
    return Context(client, manager, recorder, status, Ownership(client), clock)  # type: ignore[arg-type]


def _at(obj: Obj, path: str) -> Any:
    """The value at a dotted path (``spec.driver``), None where a step is missing."""
    value: Any = obj
    for step in path.split("."):
        value = value.get(step) if isinstance(value, dict) else None
    return value
