"""Writing the node-result ConfigMaps (create or merge) and their status refs."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from lightkube import ApiError
from lightkube.resources.core_v1 import ConfigMap

from nvcre.api.v1alpha1.constants import FAILED_NODES_KEY, SUCCEEDED_NODES_KEY
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.naming import failed_nodes_config_map_name, succeeded_nodes_config_map_name
from nvcre.orchestration.results import merge_failed, merge_succeeded
from nvcre.runtime.objects import to_plain


async def _merge(
    state: WorkflowState, name: str, key: str, merge: Any, entries: list[Any], ref_field: str
) -> None:
    if not entries:
        return
    client = state.ctx.client
    for _ in range(5):
        try:
            live = to_plain(ConfigMap, await client.get(ConfigMap, name, namespace=state.namespace))
        except ApiError as error:
            if error.status.code != 404:
                raise
            live = None
        existing = base64.b64decode(((live or {}).get("binaryData") or {}).get(key, "")) or None
        payload = base64.b64encode(merge(existing, entries)).decode()
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
                    "binaryData": {key: payload},
                }
                await client.create(ConfigMap.from_dict(body))  # type: ignore[call-overload]
            else:
                live.setdefault("binaryData", {})[key] = payload
                await client.replace(ConfigMap.from_dict(live))  # type: ignore[call-overload]
            break
        except ApiError as error:
            if error.status.code != 409:
                raise
    state.refs[ref_field] = {"kind": "ConfigMap", "name": name}


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
    await _merge(
        state,
        failed_nodes_config_map_name(state.uid),
        FAILED_NODES_KEY,
        merge_failed,
        list(entries),
        "failedNodesRef",
    )
