"""Provenance: what a run really ran against what nvcre rendered for it (``status.provenance``).

The Workflow writes it (:mod:`nvcre.decide.provenance` decides it); the Certification copies
each category's Workflow's into the category's status, the WorkloadRun its Workflow's.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from nvcre.api.v1alpha1.limits import MAX_IMAGES
from nvcre.api.v1alpha1.meta import NvcreModel

IMAGE_REFERENCE_MAX_LENGTH = 512


class ImageProvenance(NvcreModel):
    image: str = Field(
        max_length=IMAGE_REFERENCE_MAX_LENGTH,
        description="The image as the rendered Workflow spec names it; for an image it does not name, "
        "as the pod ran it.",
    )
    image_ids: list[Annotated[str, Field(max_length=IMAGE_REFERENCE_MAX_LENGTH)]] = Field(
        alias="imageIDs",
        max_length=MAX_IMAGES,
        description="What it really ran as: the imageID (digest) the kubelet reported for the "
        "containers of the run's pods that ran it.",
    )
    mismatch: str | None = Field(
        default=None,
        max_length=1024,
        description="Set when a pod ran something other than what was rendered: an image the spec "
        "does not name (another repository or tag), or a digest other than the one it pins.",
    )


class Provenance(NvcreModel):
    spec_digest: str = Field(
        max_length=80,
        description="sha256 of the Workflow's spec as canonical JSON (keys sorted, no spaces, UTF-8): "
        "runs with one digest ran one configuration.",
    )
    images: list[ImageProvenance] | None = Field(
        default=None, max_length=MAX_IMAGES, description="Each image the run's pods ran, by digest."
    )
