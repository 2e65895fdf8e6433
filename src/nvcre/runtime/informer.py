"""List+watch informer with a local cache, indexes, bookmarks and re-list after 410 Gone.

An informer can be narrowed to the objects a label selector matches (the API server filters the
list and the watch, and sends DELETED, with the last matching state, for an object that stops
matching and ADDED for one that starts to) and can trim each object before caching it (``transform``, as client-go's
``SetTransform``), so the cache holds only what its readers use.

Objects are decoded from the API server's JSON straight into plain dicts (no typed model in
between) and :func:`~nvcre.runtime.objects.compact`-ed: keys and short strings shared by every
object instead of one copy per object. A list is read in pages of :data:`LIST_PAGE` objects, as
client-go's reflector does, so that a re-list of thousands of nodes never holds the whole
response and its decoded form at once.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.core import resource as lkr
from lightkube.core.exceptions import NotReadyError
from lightkube.core.selector import build_selector
from lightkube.types import OnErrorAction, OnErrorResult

from nvcre.objects import Obj, ObjectKey, key_of
from nvcre.runtime.metrics import CACHED_OBJECTS
from nvcre.runtime.objects import compact

log = logging.getLogger(__name__)

EventHandler = Callable[[str, Obj | None, Obj], None]
"""Called as ``handler(event, old, new)`` with event ADDED, MODIFIED or DELETED."""

IndexFunc = Callable[[Obj], Iterable[str]]

Transform = Callable[[Obj], Obj]
"""Applied to every object the API server sends, before it is cached or handed to handlers."""


LIST_PAGE = 500
"""Objects per page of a list (``limit``), client-go's page size."""


class _Raw(dict[str, Any]):
    """An object as lightkube decodes a dict-based resource: the plain JSON, wrapped. Its watch
    reads ``metadata.resourceVersion`` as an attribute to resume from; nothing else is parsed."""

    @property
    def metadata(self) -> SimpleNamespace:
        return SimpleNamespace(resourceVersion=(self.get("metadata") or {}).get("resourceVersion"))


class _Relist(Exception):
    """The watch can no longer continue from its resourceVersion."""


class Informer:
    """Keeps a cache of one resource type in sync with the API server and fans out events."""

    def __init__(
        self,
        client: AsyncClient,
        resource: type[lkr.Resource],
        *,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
        transform: Transform | None = None,
        retry_delay: float = 1.0,
    ) -> None:
        """``labels`` is a lightkube label selector (``{"key": None}`` means the key exists)."""
        self.client = client
        self.resource = resource
        self._namespace = namespace
        self._labels = labels
        self._selector = build_selector(labels) if labels else None
        self.transform = transform
        self._retry_delay = retry_delay
        self._cache: dict[ObjectKey, Obj] = {}
        self._handlers: list[EventHandler] = []
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indexes: dict[str, defaultdict[str, set[ObjectKey]]] = {}
        self.synced = asyncio.Event()
        info = lkr.api_info(resource).resource
        self._api_version = sys.intern(info.api_version)
        self.kind = sys.intern(info.kind)
        self._cached = CACHED_OBJECTS.labels(kind=self.kind)
        self._cached.inc(0)  # the series exists, at 0, before the first list

    @property
    def selector(self) -> str | None:
        """The label selector sent to the API server, in its own syntax (None: every object)."""
        return self._selector

    # -- reading the cache ------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._cache.get(ObjectKey(namespace, name))

    def items(self, namespace: str | None = None) -> list[Obj]:
        return [o for k, o in self._cache.items() if namespace is None or k.namespace == namespace]

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [self._cache[k] for k in sorted(self._indexes[index].get(value, ()))]

    # -- wiring -----------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def has_index(self, name: str) -> bool:
        return name in self._index_funcs

    def add_index(self, name: str, func: IndexFunc) -> None:
        self._index_funcs[name] = func
        index: defaultdict[str, set[ObjectKey]] = defaultdict(set)
        for key, obj in self._cache.items():
            for value in func(obj):
                index[value].add(key)
        self._indexes[name] = index

    # -- cache maintenance ------------------------------------------------------------------

    def _store(self, key: ObjectKey, obj: Obj | None) -> None:
        old = self._cache.get(key)
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            if old is not None:
                for value in func(old):
                    index[value].discard(key)
                    if not index[value]:
                        del index[value]
            if obj is not None:
                for value in func(obj):
                    index[value].add(key)
        if obj is None:
            if self._cache.pop(key, None) is not None:
                self._cached.dec()
        else:
            if old is None:
                self._cached.inc()
            self._cache[key] = obj

    def _emit(self, event: str, old: Obj | None, new: Obj) -> None:
        for handler in self._handlers:
            try:
                handler(event, old, new)
            except Exception:
                log.exception("event handler failed for %s %s", self.kind, key_of(new))

    def _apply(self, event: str, obj: Obj) -> None:
        key = key_of(obj)
        old = self._cache.get(key)
        if event == "DELETED":
            self._store(key, None)
            self._emit("DELETED", old, obj)
        else:
            self._store(key, obj)
            self._emit("ADDED" if old is None else "MODIFIED", old, obj)

    def _replace(self, objects: list[Obj]) -> None:
        """Adopt a fresh list: emit what appeared, changed or vanished since the last view."""
        fresh = {key_of(o): o for o in objects}
        for key in [k for k in self._cache if k not in fresh]:
            gone = self._cache[key]
            self._store(key, None)
            self._emit("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = self._cache.get(key)
            if old is None or old.get("metadata", {}).get("resourceVersion") != obj["metadata"].get(
                "resourceVersion"
            ):
                self._apply("MODIFIED" if old else "ADDED", obj)

    # -- list and watch ---------------------------------------------------------------------

    def _scope(self) -> dict[str, Any]:
        if issubclass(self.resource, lkr.NamespacedResource):
            return {"namespace": self._namespace or "*"}
        return {}

    def _plain(self, obj: Obj) -> Obj:
        plain: Obj = compact(obj)
        plain.setdefault("apiVersion", self._api_version)  # a list's items of built-in kinds
        plain.setdefault("kind", self.kind)  # carry neither
        return self.transform(plain) if self.transform else plain

    def _request(self, params: dict[str, Any], *, watch: bool = False) -> Any:
        """A list or watch request whose objects lightkube hands over as plain JSON."""
        if self._selector:
            params["labelSelector"] = self._selector
        request = self.client._client.prepare_request(
            "list", res=self.resource, watch=watch, params=params, **self._scope()
        )
        request.response_type = _Raw  # type: ignore[assignment]  # lightkube wraps dict subclasses too
        return request

    async def _list(self) -> str:
        pages = self.client._client.list(self._request({"limit": LIST_PAGE}))
        objects = [self._plain(o) async for o in pages]
        try:
            version = str(pages.resourceVersion)
        except NotReadyError:
            version = ""
        self._replace(objects)
        return version

    def _on_watch_error(self, error: Exception, count: int) -> OnErrorResult:
        if isinstance(error, ApiError) and error.status.code == 410:
            raise _Relist from error
        log.warning("watch of %s failed (%s); retrying", self.kind, error)
        return OnErrorResult(OnErrorAction.RETRY, sleep=min(self._retry_delay * count, 30.0))

    async def _watch(self, version: str) -> None:
        params: dict[str, Any] = {"allowWatchBookmarks": "true", "resourceVersion": version or None}
        request = self._request(params, watch=True)
        async for event, obj in self.client._client.watch(request, on_error=self._on_watch_error):
            if event == "BOOKMARK":
                continue
            self._apply(event, self._plain(obj))

    async def run(self) -> None:
        """List, then watch forever; re-list whenever the watch cannot resume."""
        while True:
            try:
                version = await self._list()
                self.synced.set()
                await self._watch(version)
            except _Relist:
                log.info("watch of %s expired; re-listing", self.kind)
            except (httpx2.HTTPError, OSError) as error:
                log.warning("list of %s failed (%s); retrying", self.kind, error)
                await asyncio.sleep(self._retry_delay)
            except Exception:  # never let one bad object or bug stop the cache for good
                log.exception("informer of %s failed; re-listing", self.kind)
                await asyncio.sleep(self._retry_delay)
