"""Writing the node-result ConfigMaps (create or merge) and their status refs.

A ref is set only once its ConfigMap holds the entries: a write that keeps conflicting raises
(the reconcile is retried with backoff and merges again), it never gives up silently.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lightkube import ApiError
from lightkube.resources.core_v1 import ConfigMap

from nvcre.api.v1alpha1.constants import FAILED_NODES_KEY, SUCCEEDED_NODES_KEY
from nvcre.controllers.children import get_live
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.naming import failed_nodes_config_map_name, succeeded_nodes_config_map_name
from nvcre.orchestration.result_configmaps import (
    decode_failed,
    failed_entries,
    merge_failed,
    merge_succeeded,
    payload,
)
from nvcre.runtime.writes import ConflictRetriesExhausted

ATTEMPTS = 10


async def _merge(
    state: WorkflowState,
    name: str,
    key: str,
    merge: Callable[[bytes | None, Any], bytes],
    entries: list[Any],
    ref_field: str,
) -> bytes | None:
    """Merge ``entries`` into the ConfigMap and set its ref; the merged payload (None: nothing
    to merge)."""
    if not entries:
        return None
    client = state.ctx.client
    for _ in range(ATTEMPTS):
        live = await get_live(client, ConfigMap, name, state.namespace)
        encoded = base64.b64encode(merge(payload(live, key), entries)).decode()
        try:
            if live is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "namespace": state.namespace,
                        "ownerReferences": [state.owner_reference(controller=True)],
                    },
                    "binaryData": {key: encoded},
                }
                await client.create(ConfigMap.from_dict(body))  # type: ignore[call-overload]
            else:
                live.setdefault("binaryData", {})[key] = encoded
                await client.replace(ConfigMap.from_dict(live))  # type: ignore[call-overload]
        except ApiError as error:
            if error.status.code == 409:
                continue  # someone wrote it meanwhile: merge into the fresh copy
            raise
        state.refs[ref_field] = {"kind": "ConfigMap", "name": name}
        return base64.b64decode(encoded)
    raise ConflictRetriesExhausted(
        f"ConfigMap {state.namespace}/{name}: still conflicting after {ATTEMPTS} attempts"
    )


async def record_succeeded(state: WorkflowState, nodes: Iterable[str]) -> None:
    await _merge(
        state,
        succeeded_nodes_config_map_name(state.uid),
        SUCCEEDED_NODES_KEY,
        merge_succeeded,
        sorted(set(nodes)),
        "succeededNodesRef",
    )


async def record_failed(state: WorkflowState, entries: Iterable[Mapping[str, Any]]) -> None:
    """Merge ``entries`` into the failed-nodes ConfigMap; its ref and the count of the nodes it
    names go in the status."""
    merged = await _merge(
        state,
        failed_nodes_config_map_name(state.uid),
        FAILED_NODES_KEY,
        merge_failed,
        list(entries),
        "failedNodesRef",
    )
    if merged is not None:
        state.refs["failedNodeCount"] = len({str(e["name"]) for e in decode_failed(merged)})


async def failed_node_names(state: WorkflowState) -> set[str]:
    """Every node the failed-nodes ConfigMap names, read live (it is the record)."""
    live = await get_live(
        state.ctx.client, ConfigMap, failed_nodes_config_map_name(state.uid), state.namespace
    )
    return {str(e["name"]) for e in failed_entries(live)}
