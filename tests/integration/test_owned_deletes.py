"""Deletes of owned objects carry the UID of the object decided on (spec §1.7): one replaced in
between (same name, new UID) is left alone, on the real API server."""

from __future__ import annotations

import pytest
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from nvcre.controllers.children import delete_if_present, delete_referenced

pytestmark = pytest.mark.asyncio


async def create(client: AsyncClient, namespace: str, generation: str) -> str:
    """Create ConfigMap ``held`` and return its UID."""
    created = await client.create(
        ConfigMap(metadata=ObjectMeta(name="held", namespace=namespace), data={"generation": generation})
    )
    assert created.metadata is not None and created.metadata.uid
    return created.metadata.uid


async def test_an_object_replaced_after_the_decision_survives_the_delete(
    async_kube: AsyncClient, namespace: str
) -> None:
    decided_on = await create(async_kube, namespace, "first")
    # someone replaces it between the decision and the delete
    await async_kube.delete(ConfigMap, "held", namespace=namespace)
    replacement = await create(async_kube, namespace, "second")

    assert not await delete_if_present(async_kube, ConfigMap, "held", namespace, uid=decided_on)
    survivor = await async_kube.get(ConfigMap, "held", namespace=namespace)
    assert survivor.metadata is not None
    assert (survivor.metadata.uid, survivor.data) == (replacement, {"generation": "second"})

    # a status reference carries the UID the same way
    ref = {"name": "held", "uid": decided_on}
    assert not await delete_referenced(async_kube, ConfigMap, ref, namespace)
    assert await delete_referenced(async_kube, ConfigMap, {**ref, "uid": replacement}, namespace)
    with pytest.raises(ApiError) as gone:
        await async_kube.get(ConfigMap, "held", namespace=namespace)
    assert gone.value.status.code == 404
    assert not await delete_if_present(async_kube, ConfigMap, "held", namespace, uid=replacement)
