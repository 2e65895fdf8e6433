"""Provenance (pure): what a run really ran, against what nvcre rendered for it.

A Workflow's ``status.provenance`` holds ``specDigest``, the sha256 of its spec as canonical
JSON (two runs with one digest ran one configuration), and ``images``: each image its pods ran
(from its Jobs' ``status.images``, the kubelet's ``imageID``) under the reference the rendered
spec names for it. An image that no rendered reference names (another repository or tag), or
that ran as a digest other than the one its reference pins, carries a ``mismatch`` message.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.limits import MAX_IMAGES

DOCKER_HUB = "docker.io"


def spec_digest(spec: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of ``spec`` as canonical JSON: keys sorted, no spaces, UTF-8."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def rendered_images(spec: Mapping[str, Any]) -> list[str]:
    """Every image the Workflow spec names (its Job template and its dependencies, e.g. the
    TrainingRuntime's containers), sorted."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key == "image" and isinstance(item, str) and item:
                    found.add(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(spec.get("jobTemplate"))
    walk(spec.get("dependencies"))
    return sorted(found)


@dataclass(frozen=True)
class Reference:
    """An image reference with the container runtime's defaults filled in."""

    repository: str
    """With its registry: ``docker.io/library/busybox``."""
    tag: str | None
    digest: str | None


@functools.lru_cache(maxsize=1024)
def parse(reference: str) -> Reference:
    """``busybox`` -> ``docker.io/library/busybox:latest``; ``repo:tag@sha256:...`` keeps both.
    Cached: a large run's passes read the same few references thousands of times."""
    name, _, digest = reference.strip().partition("@")
    tag = None
    head, colon, tail = name.rpartition(":")
    if colon and "/" not in tail:
        name, tag = head, tail
    parts = name.split("/")
    if len(parts) == 1 or ("." not in parts[0] and ":" not in parts[0] and parts[0] != "localhost"):
        parts = [DOCKER_HUB, *parts]
    if parts[0] == DOCKER_HUB and len(parts) == 2:
        parts = [DOCKER_HUB, "library", parts[1]]
    if tag is None and not digest:
        tag = "latest"
    return Reference("/".join(parts), tag, digest or None)


def digest_of(image_id: str) -> str | None:
    """The digest an ``imageID`` names (``repo@sha256:...``); None when it names none (an image
    ID without a repository digest, a simulated node's ``kwok://...``)."""
    _, at, digest = image_id.rpartition("@")
    return digest if at and digest else None


def _names(rendered: Reference, ran: Reference) -> bool:
    """The rendered reference names the image the pod ran: one repository, and one tag when both
    say one (a pod that ran ``repo@sha256:...`` names no tag)."""
    return rendered.repository == ran.repository and (
        rendered.tag is None or ran.tag is None or rendered.tag == ran.tag
    )


def _mismatch(rendered: str | None, pinned: str | None, image: str, image_id: str) -> str | None:
    if rendered is None:
        return f"a pod ran {image}, which the rendered spec does not name"
    digest = digest_of(image_id) or parse(image).digest
    if pinned and digest and digest != pinned:
        return f"a pod ran {rendered} as {digest}, not the pinned {pinned}"
    return None


def fold(
    recorded: Sequence[Mapping[str, Any]], rendered: Iterable[str], ran: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``recorded`` (``status.provenance.images``) with the images ``ran`` (entries of Jobs'
    ``status.images``) added under the ``rendered`` reference that names each; at most
    :data:`MAX_IMAGES` entries (mismatches kept first), sorted by image."""
    entries = {str(e["image"]): {**e, "imageIDs": list(e.get("imageIDs") or ())} for e in recorded}
    references = [(r, parse(r)) for r in sorted(set(rendered))]
    # thousands of Jobs run the same few images: each pair once
    pairs = {(str(i.get("image") or ""), str(i.get("imageID") or "")) for i in ran}
    for image, image_id in sorted(pairs):
        if not image or not image_id:
            continue
        match = next(((r, p) for r, p in references if _names(p, parse(image))), None)
        key = match[0] if match else image
        entry = entries.setdefault(key, {"image": key, "imageIDs": []})
        if image_id not in entry["imageIDs"] and len(entry["imageIDs"]) < MAX_IMAGES:
            entry["imageIDs"] = sorted([*entry["imageIDs"], image_id])
        message = _mismatch(match[0] if match else None, match[1].digest if match else None, image, image_id)
        if message and not entry.get("mismatch"):
            entry["mismatch"] = message
    kept = sorted(entries.values(), key=lambda e: (not e.get("mismatch"), e["image"]))[:MAX_IMAGES]
    return sorted(kept, key=lambda e: str(e["image"]))


def new_mismatches(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> list[str]:
    """The mismatch messages of ``after`` that ``before`` did not have (one Warning each)."""
    known = {e.get("mismatch") for e in before}
    return [str(e["mismatch"]) for e in after if e.get("mismatch") and e["mismatch"] not in known]


def recorded_mismatches(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
    """:func:`new_mismatches` of two ``status.provenance`` records (a run's copies of its
    Workflow's; None when there is none)."""
    return new_mismatches((before or {}).get("images") or (), (after or {}).get("images") or ())


def status(spec: Mapping[str, Any], images: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A Workflow's ``status.provenance``."""
    out: dict[str, Any] = {"specDigest": spec_digest(spec)}
    if images:
        out["images"] = [dict(i) for i in images]
    return out
