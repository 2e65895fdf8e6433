"""The images a Job's workload ran (nvcre.decide.job.images), from its pods' container statuses."""

from __future__ import annotations

from typing import Any

from nvcre.decide.job.images import images_of, record

IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
DIGEST = "nvcr.io/nvidia/pytorch@sha256:" + "a" * 64


def pod(*containers: tuple[str, str], init: tuple[str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "containerStatuses": [{"name": "c", "image": i, "imageID": d} for i, d in containers]
    }
    if init:
        status["initContainerStatuses"] = [{"name": "init", "image": init[0], "imageID": init[1]}]
    return {"status": status}


def test_each_distinct_image_and_digest_once_and_unresolved_ones_left_out() -> None:
    pods = [
        pod((IMAGE, DIGEST), init=("busybox:1.36", "docker.io/library/busybox@sha256:" + "b" * 64)),
        pod((IMAGE, DIGEST)),
        pod((IMAGE, "")),  # still pulling: no digest yet
        {"status": {}},
    ]
    assert images_of(pods) == [
        {"image": "busybox:1.36", "imageID": "docker.io/library/busybox@sha256:" + "b" * 64},
        {"image": IMAGE, "imageID": DIGEST},
    ]


def test_recording_adds_new_images_and_keeps_those_of_pods_that_are_gone() -> None:
    status: dict[str, Any] = {}
    record(status, [pod((IMAGE, DIGEST))])
    assert status["images"] == [{"image": IMAGE, "imageID": DIGEST}]
    before = dict(status)
    record(status, [])  # the pods are gone (a restart): nothing is taken away
    assert status == before
    newer = "nvcr.io/nvidia/pytorch@sha256:" + "c" * 64  # the tag moved between two restarts
    record(status, [pod((IMAGE, newer))])
    assert status["images"] == [{"image": IMAGE, "imageID": DIGEST}, {"image": IMAGE, "imageID": newer}]
