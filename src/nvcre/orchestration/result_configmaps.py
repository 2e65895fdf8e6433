"""The node-result ConfigMaps' one codec: ``binaryData`` holds a gzip CSV of succeeded nodes or a
gzip JSON list of failed ones. The controllers, the CLI and the report read them only here."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from collections.abc import Iterable, Mapping
from typing import Any

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import FAILED_NODES_KEY, SUCCEEDED_NODES_KEY

__all__ = [
    "FAILED_NODES_KEY",
    "SUCCEEDED_NODES_KEY",
    "failed_entries",
    "merge_failed",
    "merge_succeeded",
    "payload",
    "succeeded_names",
]


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def decode_succeeded(payload: bytes | None) -> list[str]:
    if not payload:
        return []
    return [n.strip() for n in gzip.decompress(payload).decode().split(",") if n.strip()]


def decode_failed(payload: bytes | None) -> list[failednodes.Entry]:
    """The entries of ``failed-nodes.json.gz``, each with a ``cause`` (derived for old entries)."""
    if not payload:
        return []
    return [failednodes.normalise(e) for e in json.loads(gzip.decompress(payload))]


def merge_succeeded(existing: bytes | None, nodes: Iterable[str]) -> bytes:
    merged = sorted(set(decode_succeeded(existing)) | {n.strip() for n in nodes if n.strip()})
    return _gzip(",".join(merged).encode())


def merge_failed(existing: bytes | None, entries: Iterable[Mapping[str, Any]]) -> bytes:
    """A JSON list of ``{name, reason, cause, message}``, one per (name, reason), the first kept."""
    merged = failednodes.merge(decode_failed(existing), entries)
    return _gzip(json.dumps(merged, separators=(",", ":")).encode())


def payload(config_map: Mapping[str, Any] | None, key: str) -> bytes | None:
    """The bytes under ``binaryData[key]``; None when absent or not base64 (a hand-edited map)."""
    text = ((config_map or {}).get("binaryData") or {}).get(key)
    if not text:
        return None
    try:
        return base64.b64decode(text) or None
    except (binascii.Error, ValueError):
        return None


def failed_entries(config_map: Mapping[str, Any] | None) -> list[failednodes.Entry]:
    """The failed-nodes ConfigMap's entries (``name``, ``reason``, ``cause``, ``message``)."""
    return decode_failed(payload(config_map, FAILED_NODES_KEY))


def succeeded_names(config_map: Mapping[str, Any] | None) -> list[str]:
    """The succeeded-nodes ConfigMap's node names."""
    return decode_succeeded(payload(config_map, SUCCEEDED_NODES_KEY))
