"""The container images a Job's workload ran, by digest (pure): ``status.images``.

Read from its pods' container statuses (``imageID`` is the digest the kubelet resolved the image
to), merged into what earlier passes recorded, so a restart's new pods add to the list and a pod
that is gone takes nothing away. The NodeRecord keeps them with each result: which exact image a
node passed or failed with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nvcre.api.v1alpha1.limits import MAX_IMAGES


def images_of(pods: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Each distinct (image, imageID) the pods' containers run or ran, sorted; a container whose
    image is not resolved yet (no imageID) is left out."""
    found = set()
    for pod in pods:
        status = pod.get("status") or {}
        for container in (
            *(status.get("initContainerStatuses") or ()),
            *(status.get("containerStatuses") or ()),
        ):
            if container.get("imageID"):
                found.add((str(container.get("image") or ""), str(container["imageID"])))
    return [{"image": image, "imageID": digest} for image, digest in sorted(found)]


def record(status: dict[str, Any], pods: Iterable[Mapping[str, Any]]) -> None:
    """Add the pods' images to ``status.images`` (unchanged when they hold nothing new)."""
    kept = [dict(i) for i in status.get("images") or ()]
    known = {(i.get("image"), i.get("imageID")) for i in kept}
    new = [i for i in images_of(pods) if (i["image"], i["imageID"]) not in known]
    if new:
        status["images"] = sorted([*kept, *new], key=lambda i: (i.get("image", ""), i.get("imageID", "")))[
            :MAX_IMAGES
        ]
