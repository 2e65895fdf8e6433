"""Resource classes for arbitrary apiVersion/kind pairs (Workflow dependencies can be anything)."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from lightkube.codecs import resource_registry
from lightkube.core import resource as lkr
from lightkube.core.exceptions import LoadResourceError
from lightkube.generic_resource import async_load_in_cluster_generic_resources


class UnknownKind(LookupError):
    pass


async def resource_of(client: AsyncClient, api_version: str, kind: str) -> Any:
    """The resource class of a kind, loading the cluster's CRDs once when it is not yet known."""
    try:
        return resource_registry.load(api_version, kind)
    except LoadResourceError:
        await async_load_in_cluster_generic_resources(client)
    try:
        return resource_registry.load(api_version, kind)
    except LoadResourceError as error:
        raise UnknownKind(f"the API server does not serve {kind} in {api_version}") from error


def namespaced(resource: Any) -> bool:
    return issubclass(resource, lkr.NamespacedResource)
