"""Creating a child with the name-collision policy every tier shares (spec §1.7).

On ``AlreadyExists`` the existing object is read live: one being deleted (ours or not) means
"try again later"; one the caller recognises as ours (for a controlled child: the same owner
UID) is an earlier create of ours and is adopted; anything else is a foreign object that is
never adopted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightkube import ApiError, AsyncClient

from nvcre.objects import Obj, controller_owner
from nvcre.runtime.informer import Informer
from nvcre.runtime.objects import to_plain


class NameTaken(Exception):
    """A foreign object holds the child's name; the caller fails with its collision reason."""

    def __init__(self, existing: Obj) -> None:
        super().__init__(existing["metadata"]["name"])
        self.existing = existing


class HolderTerminating(Exception):
    """The object holding the name is being deleted (or vanished): retry after it is gone."""


@dataclass(frozen=True)
class Created:
    obj: Obj
    adopted: bool
    """True when the child already existed and is ours (a create before a crash or a cache lag)."""


def owner_reference(owner: Obj) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controlled_by(obj: Obj, owner: Obj) -> bool:
    ref = controller_owner(obj)
    return ref is not None and ref.get("uid") == owner["metadata"].get("uid")


async def get_live(client: AsyncClient, resource: Any, name: str, namespace: str | None) -> Obj | None:
    """An uncached read: the object as the API server has it now, or None when it is gone."""
    try:
        return to_plain(resource, await client.get(resource, name, namespace=namespace))
    except ApiError as error:
        if error.status.code == 404:
            return None
        raise


async def cached_or_live(
    cache: Informer, client: AsyncClient, resource: Any, name: str, namespace: str
) -> Obj | None:
    """The object from ``cache``, else as the API server has it: a cache miss is no proof that
    it is gone (the cache may not have seen it yet); None only when a live read says so."""
    found = cache.get(namespace, name)
    return found if found is not None else await get_live(client, resource, name, namespace)


async def delete_if_present(
    client: AsyncClient, resource: Any, name: str, namespace: str | None, *, uid: str | None
) -> bool:
    """Delete the object of ``uid``, the one the caller decided on; False when it is gone (a 404)
    or was replaced by another object of its name (a 409 on the UID precondition: the new one is
    left alone). ``uid`` is required: None only where no UID was ever recorded (a status an older
    manager wrote)."""
    try:
        await _delete(client, resource, name, namespace, {"uid": uid})
    except ApiError as error:
        if error.status.code in (404, 409):
            return False
        raise
    return True


async def delete_referenced(client: AsyncClient, resource: Any, ref: dict[str, Any], namespace: str) -> bool:
    """Delete the object a status reference names (``name``, ``namespace`` or else ``namespace``,
    ``uid``): never a later object of its name. (A ref written without a UID, by an older
    manager, names whichever object holds the name.)"""
    where = ref.get("namespace") or namespace
    return await delete_if_present(client, resource, ref["name"], where, uid=ref.get("uid"))


async def delete_unchanged(
    client: AsyncClient, resource: Any, name: str, namespace: str | None, uid: str, resource_version: str
) -> None:
    """DELETE with preconditions on the ``uid`` and ``resource_version`` the caller decided on
    (a 409 when the object changed since)."""
    await _delete(client, resource, name, namespace, {"uid": uid, "resourceVersion": resource_version})


async def _delete(
    client: AsyncClient, resource: Any, name: str, namespace: str | None, preconditions: dict[str, str | None]
) -> None:
    """DELETE with the preconditions that are set (lightkube's ``delete`` sends no DeleteOptions
    body)."""
    http = client._client
    request = http.prepare_request("delete", resource, name=name, namespace=namespace)
    request.data = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {k: v for k, v in preconditions.items() if v},
    }
    response = await http.send(http.build_adapter_request(request))  # type: ignore[no-untyped-call]
    http.raise_for_status(response)  # type: ignore[no-untyped-call]


def adopt(existing: Obj, ours: Callable[[Obj], bool]) -> Created:
    """The collision policy for ``existing``, the live holder of a child's name.

    Raises :class:`HolderTerminating` when it is being deleted and :class:`NameTaken` when it
    is not ours.
    """
    name = existing["metadata"]["name"]
    if existing["metadata"].get("deletionTimestamp"):
        # Ours or not: an object on its way out is no child to follow; create after it is gone.
        raise HolderTerminating(f"{name} is being deleted")
    if ours(existing):
        return Created(existing, adopted=True)
    raise NameTaken(existing)


async def create_or_adopt(
    client: AsyncClient, resource: Any, body: Obj, ours: Callable[[Obj], bool]
) -> Created:
    """Create ``body``; on ``AlreadyExists`` apply :func:`adopt` to the live holder.

    Raises :class:`NameTaken`, :class:`HolderTerminating`, or the ``ApiError`` of a call.
    """
    try:
        created = await client.create(resource.from_dict(body))
        return Created(to_plain(resource, created), adopted=False)
    except ApiError as error:
        if error.status.code != 409:
            raise
    meta = body["metadata"]
    existing = await get_live(client, resource, meta["name"], meta.get("namespace"))
    if existing is None:
        raise HolderTerminating(f"{meta['name']} vanished after a create conflict")
    return adopt(existing, ours)


async def create_controlled(client: AsyncClient, resource: Any, body: Obj, owner: Obj) -> Created:
    """Create ``body`` controlled by ``owner``, adopting our own earlier create (see
    :func:`create_or_adopt`)."""
    meta = body.setdefault("metadata", {})
    meta["namespace"] = owner["metadata"]["namespace"]
    meta["ownerReferences"] = [owner_reference(owner)]
    return await create_or_adopt(client, resource, body, lambda live: controlled_by(live, owner))
