"""Writes that survive conflicts: re-read, re-apply the change, try again."""

from __future__ import annotations

import copy
from collections.abc import Callable

from lightkube import ApiError, AsyncClient
from lightkube.core import resource as lkr

from nvcre.objects import Obj
from nvcre.runtime.objects import to_plain

Mutation = Callable[[Obj], Obj | None]
"""Gets a fresh copy of the object; returns the object to write, or None to write nothing."""


class ConflictRetriesExhausted(Exception):
    pass


class Conflict(Exception):
    """The object changed since it was read; the decision based on it must be made again."""


async def update_with_retry(
    client: AsyncClient,
    resource: type[lkr.Resource],
    name: str,
    namespace: str | None,
    mutate: Mutation,
    *,
    status: bool = False,
    attempts: int = 10,
    base: Obj | None = None,
    current: Obj | None = None,
    settled: bool = False,
) -> Obj | None:
    """Apply ``mutate`` to the live object and write it (the status subresource if ``status``).

    On 409 the object is read again and ``mutate`` applied to the fresh copy, so a change made
    meanwhile by someone else is never overwritten. Returns the object as written, the live
    object when ``mutate`` changes nothing, or None when the object is gone.

    With ``base`` (the object a decision was made from) there is no re-read: the write carries
    ``base``'s resourceVersion and a 409 raises :class:`Conflict`, because a decision made from
    an outdated view must be made again, not re-applied over someone else's change.

    ``current`` (ignored with ``base``) is the caller's latest view of the object, e.g. an
    informer's cached copy: the first attempt writes on top of it without reading first,
    guarded by its resourceVersion, as controller-runtime does. A stale view costs one 409 and
    then the live object is read as usual; a ``mutate`` that wants no write on the view also
    falls back to the live object, so a stale view never suppresses a write. Neither ``base``
    nor ``current`` is modified.

    ``settled``: ``current`` is an informer's copy (or the caller's own last write on top of
    one), so any newer state is on its way as a watch event that makes the caller decide
    again; a ``mutate`` that wants no write on it then writes nothing and reads nothing.
    """
    scope = {"namespace": namespace} if namespace else {}
    view = None
    if base is None and current is not None and (current.get("metadata") or {}).get("resourceVersion"):
        view = current
    for _ in range(1 if base is not None else attempts):
        cached = False
        if base is not None:
            live = copy.deepcopy(base)
        elif view is not None:
            live, view, cached = view, None, True
        else:
            try:
                live = to_plain(resource, await client.get(resource, name, **scope))
            except ApiError as error:
                if error.status.code == 404:
                    return None
                raise
        wanted = mutate(copy.deepcopy(live))
        if wanted is None or wanted == live:
            if cached and not settled:
                continue  # nothing to write on the view: decide on the live object instead
            return live
        try:
            if status:
                body = resource.Status.from_dict(wanted)  # type: ignore[attr-defined]
                written = await client.replace(body, name, **scope)  # type: ignore[call-overload]
            else:
                written = await client.replace(resource.from_dict(wanted))  # type: ignore[attr-defined]
        except ApiError as error:
            if error.status.code == 409:
                if base is not None:
                    raise Conflict(
                        f"{resource.__name__} {namespace}/{name} changed since it was read"
                    ) from error
                continue
            if error.status.code == 404:
                return None
            raise
        return to_plain(resource, written)
    raise ConflictRetriesExhausted(
        f"{resource.__name__} {namespace}/{name}: still conflicting after {attempts} attempts"
    )
