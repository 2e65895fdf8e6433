"""Adding and removing a finalizer without clobbering concurrent writers."""

from __future__ import annotations

from lightkube import AsyncClient
from lightkube.core import resource as lkr

from nvcre.objects import Obj
from nvcre.runtime.writes import update_with_retry


async def ensure_finalizer(
    client: AsyncClient, resource: type[lkr.Resource], obj: Obj, finalizer: str
) -> bool:
    """Add ``finalizer``; True when it was added (the caller waits for the next event)."""
    if finalizer in (obj["metadata"].get("finalizers") or ()):
        return False

    def add(live: Obj) -> Obj | None:
        if live["metadata"].get("deletionTimestamp"):
            return None
        finalizers = live["metadata"].setdefault("finalizers", [])
        if finalizer not in finalizers:
            finalizers.append(finalizer)
        return live

    meta = obj["metadata"]
    await update_with_retry(client, resource, meta["name"], meta.get("namespace"), add, current=obj)
    return True


async def remove_finalizer(
    client: AsyncClient, resource: type[lkr.Resource], obj: Obj, finalizer: str
) -> None:
    def drop(live: Obj) -> Obj:
        live["metadata"]["finalizers"] = [
            f for f in live["metadata"].get("finalizers") or () if f != finalizer
        ]
        return live

    meta = obj["metadata"]
    await update_with_retry(client, resource, meta["name"], meta.get("namespace"), drop, current=obj)
