"""Node-result ConfigMap payloads: gzip CSV of succeeded nodes, gzip JSON of failed ones."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from typing import Any

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import FAILED_NODES_KEY, SUCCEEDED_NODES_KEY

__all__ = ["FAILED_NODES_KEY", "SUCCEEDED_NODES_KEY", "merge_failed", "merge_succeeded"]


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
