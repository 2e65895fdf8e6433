"""update_with_retry on the real API server: writing on top of a cached view never loses a change."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from nvcre.objects import Obj, resource_version
from nvcre.runtime.objects import to_plain
from nvcre.runtime.writes import update_with_retry

pytestmark = pytest.mark.asyncio


async def config_map(client: AsyncClient, namespace: str, data: dict[str, str]) -> Obj:
    created = await client.create(ConfigMap(metadata=ObjectMeta(name="cm", namespace=namespace), data=data))
    return to_plain(ConfigMap, created)


def setting(key: str, value: str) -> Any:
    def mutate(live: Obj) -> Obj:
        live.setdefault("data", {})[key] = value
        return live

    return mutate


async def test_a_fresh_view_is_written_as_is(async_kube: AsyncClient, namespace: str) -> None:
    view = await config_map(async_kube, namespace, {"a": "1"})
    written = await update_with_retry(async_kube, ConfigMap, "cm", namespace, setting("b", "2"), current=view)
    assert written is not None and written["data"] == {"a": "1", "b": "2"}
    assert resource_version(written) > resource_version(view)
    assert view["data"] == {"a": "1"}, "the caller's view is not modified"


async def test_a_stale_view_conflicts_and_the_live_object_wins(
    async_kube: AsyncClient, namespace: str
) -> None:
    stale = await config_map(async_kube, namespace, {"a": "1"})
    await update_with_retry(async_kube, ConfigMap, "cm", namespace, setting("other", "writer"))
    written = await update_with_retry(
        async_kube, ConfigMap, "cm", namespace, setting("b", "2"), current=stale
    )
    assert written is not None
    assert written["data"] == {"a": "1", "other": "writer", "b": "2"}, "the concurrent change survives"


async def test_a_stale_view_never_suppresses_a_needed_write(async_kube: AsyncClient, namespace: str) -> None:
    stale = await config_map(async_kube, namespace, {"a": "1"})
    await update_with_retry(async_kube, ConfigMap, "cm", namespace, setting("a", "changed"))
    # On the stale view setting a=1 is a no-op; on the live object it is not.
    written = await update_with_retry(
        async_kube, ConfigMap, "cm", namespace, setting("a", "1"), current=stale
    )
    assert written is not None and written["data"] == {"a": "1"}
    live = to_plain(ConfigMap, await async_kube.get(ConfigMap, "cm", namespace=namespace))
    assert live["data"] == {"a": "1"}


async def test_gone_is_none(async_kube: AsyncClient, namespace: str) -> None:
    view = await config_map(async_kube, namespace, {"a": "1"})
    await async_kube.delete(ConfigMap, "cm", namespace=namespace)
    assert (
        await update_with_retry(async_kube, ConfigMap, "cm", namespace, setting("b", "2"), current=view)
        is None
    )
