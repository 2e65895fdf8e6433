"""Creating a controlled child with the name-collision policy every tier shares (spec §1.7).

On ``AlreadyExists`` the existing object is read live: one being deleted (ours or not) means
"try again later"; one controlled by the same owner (same UID) is an earlier create of ours and
is adopted; anything else is a foreign object that is never adopted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lightkube import ApiError, AsyncClient

from nvcre.runtime.objects import Obj, controller_owner, to_plain


class NameTaken(Exception):
    """A foreign object holds the child's name; the caller fails with its collision reason."""

    def __init__(self, existing: Obj) -> None:
        super().__init__(existing["metadata"]["name"])
        self.existing = existing


class HolderTerminating(Exception):
    """A foreign object holding the name is being deleted: retry after it is gone."""


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


async def delete_if_present(client: AsyncClient, resource: Any, name: str, namespace: str | None) -> bool:
    """Delete an object; False when it was already gone (a 404 is success for a delete)."""
    try:
        await client.delete(resource, name, namespace=namespace)
    except ApiError as error:
        if error.status.code == 404:
            return False
        raise
    return True


async def create_controlled(client: AsyncClient, resource: Any, body: Obj, owner: Obj) -> Created:
    """Create ``body`` controlled by ``owner``, adopting our own earlier create.

    Raises :class:`NameTaken`, :class:`HolderTerminating`, or the ``ApiError`` of the create.
    """
    meta = body.setdefault("metadata", {})
    meta["namespace"] = owner["metadata"]["namespace"]
    meta["ownerReferences"] = [owner_reference(owner)]
    try:
        created = await client.create(resource.from_dict(body))
        return Created(to_plain(resource, created), adopted=False)
    except ApiError as error:
        if error.status.code != 409:
            raise
    existing = await get_live(client, resource, meta["name"], meta["namespace"])
    if existing is None:
        raise HolderTerminating(f"{meta['name']} vanished after a create conflict")
    if existing["metadata"].get("deletionTimestamp"):
        # Ours or not: an object on its way out is no child to follow; create after it is gone.
        raise HolderTerminating(f"{meta['name']} is being deleted")
    if controlled_by(existing, owner):
        return Created(existing, adopted=True)
    raise NameTaken(existing)
