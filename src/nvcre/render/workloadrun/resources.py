"""GPU and NIC requests of the workload container."""

from __future__ import annotations

import copy
from typing import Any

from nvcre.api.v1alpha1.constants import NodeLabel

GPU_RESOURCE = NodeLabel.GPU_RESOURCE
LAUNCHER_RESOURCES: dict[str, Any] = {"limits": {"cpu": "2", "memory": "1Gi"}}


def workload_resources(user: dict[str, Any] | None, gpus_per_node: int) -> dict[str, Any]:
    """``spec.resources`` with the GPU count added to limits and requests unless either names it.

    Without ``spec.resources`` the container asks for exactly ``nvidia.com/gpu: "<gpusPerNode>"``.
    Explicit values, even ``0``, are kept as written.
    """
    gpu = str(gpus_per_node)
    if user is None:
        return {"limits": {GPU_RESOURCE: gpu}, "requests": {GPU_RESOURCE: gpu}}
    out = copy.deepcopy(user)
    limits = out.get("limits") or {}
    requests = out.get("requests") or {}
    if GPU_RESOURCE not in limits and GPU_RESOURCE not in requests:
        out["limits"] = {**limits, GPU_RESOURCE: gpu}
        out["requests"] = {**requests, GPU_RESOURCE: gpu}
    return out


def launcher_resources() -> dict[str, Any]:
    return copy.deepcopy(LAUNCHER_RESOURCES)
