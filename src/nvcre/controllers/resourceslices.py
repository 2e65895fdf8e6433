"""The GPUs the NVIDIA DRA driver publishes, read live when nodes are discovered.

A DRA-only node carries no GPU Operator label and no ``nvidia.com/gpu`` allocatable: the
``gpu.nvidia.com`` ResourceSlices are the only record of its GPUs. They are listed once per
discovery (a category's start, a Workflow's first pass), not cached: a manager on a cluster that
does not serve ``resource.k8s.io/v1`` must still start, and an informer that can never list would
hold every cache's sync.
"""

from __future__ import annotations

import logging

from lightkube import ApiError, AsyncClient
from lightkube.resources.resource_v1 import ResourceSlice

from nvcre.platform.dra import GPU_DRIVER, GPUInventory

log = logging.getLogger(__name__)


async def gpu_inventory(client: AsyncClient) -> GPUInventory:
    """The cluster's ``gpu.nvidia.com`` ResourceSlices as a :class:`GPUInventory`; empty when the
    API is not served (404) or not granted (403, logged)."""
    try:
        slices = [s.to_dict() async for s in client.list(ResourceSlice, fields={"spec.driver": GPU_DRIVER})]
    except ApiError as error:
        if error.status.code not in (403, 404):
            raise
        if error.status.code == 403:
            log.warning("cannot list ResourceSlices (%s): nodes without GPU labels are not discovered", error)
        return GPUInventory()
    return GPUInventory.from_slices(slices)
