"""Node-result ConfigMap payloads: gzip CSV of succeeded nodes, gzip JSON of failed ones."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from typing import Any

from nvcre.api.v1alpha1.constants import FAILED_NODES_KEY, SUCCEEDED_NODES_KEY

__all__ = ["FAILED_NODES_KEY", "SUCCEEDED_NODES_KEY", "merge_failed", "merge_succeeded"]


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def decode_succeeded(payload: bytes | None) -> list[str]:
    if not payload:
        return []
    return [n.strip() for n in gzip.decompress(payload).decode().split(",") if n.strip()]


def decode_failed(payload: bytes | None) -> list[dict[str, str]]:
    if not payload:
        return []
    entries: list[dict[str, str]] = json.loads(gzip.decompress(payload))
    return entries


def merge_succeeded(existing: bytes | None, nodes: Iterable[str]) -> bytes:
    merged = sorted(set(decode_succeeded(existing)) | {n.strip() for n in nodes if n.strip()})
    return _gzip(",".join(merged).encode())


def merge_failed(existing: bytes | None, entries: Iterable[Mapping[str, Any]]) -> bytes:
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for entry in [*decode_failed(existing), *entries]:
        key = (str(entry["name"]), str(entry["reason"]))
        if key not in seen:
            seen[key] = {"name": key[0], "reason": key[1], "message": str(entry.get("message") or "")}
    ordered = sorted(seen.values(), key=lambda e: (e["name"], e["reason"]))
    return _gzip(json.dumps(ordered, separators=(",", ":")).encode())
