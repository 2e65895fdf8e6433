"""Provenance (nvcre.decide.provenance): the spec digest, and each image a run's pods ran under
the reference the rendered spec names, with a mismatch when it is not what was rendered."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from nvcre.decide.provenance import (
    fold,
    new_mismatches,
    parse,
    recorded_mismatches,
    rendered_images,
    spec_digest,
    status,
)
from nvcre.testing.builders import Workflow

PYTORCH = "nvcr.io/nvidia/pytorch:26.01-py3"
PYTORCH_ID = "nvcr.io/nvidia/pytorch@sha256:" + "a" * 64
PINNED = "nvcr.io/nvidia/pytorch:26.01-py3@sha256:" + "a" * 64


def ran(image: str, image_id: str) -> dict[str, str]:
    """An entry of a Job's ``status.images``."""
    return {"image": image, "imageID": image_id}


def test_spec_digest_is_sha256_of_canonical_json_whatever_the_key_order() -> None:
    spec = Workflow("wf").with_runtime().obj()["spec"]
    reordered = dict(reversed(list(spec.items())))
    assert spec_digest(spec) == spec_digest(reordered)
    assert spec_digest({"b": [1, "é"], "a": 1}) == (
        "sha256:" + hashlib.sha256('{"a":1,"b":[1,"é"]}'.encode()).hexdigest()
    )
    assert spec_digest({**spec, "extra": 1}) != spec_digest(spec)


def test_rendered_images_are_every_image_of_the_job_template_and_the_dependencies() -> None:
    spec = Workflow("wf").with_runtime(launcher=True).obj()["spec"]
    spec["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["image"] = PYTORCH
    assert rendered_images(spec) == sorted({"img", PYTORCH})


@pytest.mark.parametrize(
    ("reference", "repository", "tag", "digest"),
    [
        ("busybox", "docker.io/library/busybox", "latest", None),
        ("busybox:1.36", "docker.io/library/busybox", "1.36", None),
        ("docker.io/library/busybox:1.36", "docker.io/library/busybox", "1.36", None),
        ("team/tool", "docker.io/team/tool", "latest", None),
        (PYTORCH, "nvcr.io/nvidia/pytorch", "26.01-py3", None),
        (PINNED, "nvcr.io/nvidia/pytorch", "26.01-py3", "sha256:" + "a" * 64),
        (PYTORCH_ID, "nvcr.io/nvidia/pytorch", None, "sha256:" + "a" * 64),
        ("localhost:5000/img", "localhost:5000/img", "latest", None),
        ("registry:5000/a/b:v1", "registry:5000/a/b", "v1", None),
    ],
)
def test_references_are_read_as_the_container_runtime_reads_them(
    reference: str, repository: str, tag: str | None, digest: str | None
) -> None:
    parsed = parse(reference)
    assert (parsed.repository, parsed.tag, parsed.digest) == (repository, tag, digest)


def test_an_image_that_ran_is_recorded_under_its_rendered_reference_with_each_digest() -> None:
    other = "nvcr.io/nvidia/pytorch@sha256:" + "b" * 64
    images = fold([], [PYTORCH, "busybox:1.36"], [ran(PYTORCH, PYTORCH_ID), ran(PYTORCH, other)])
    assert images == [{"image": PYTORCH, "imageIDs": [PYTORCH_ID, other]}]
    # the runtime's spelling of a Docker Hub image is the rendered one
    hub = "docker.io/library/busybox@sha256:" + "c" * 64
    again = fold(images, [PYTORCH, "busybox:1.36"], [ran("docker.io/library/busybox:1.36", hub)])
    assert again == [{"image": "busybox:1.36", "imageIDs": [hub]}, *images]


def test_an_image_the_spec_does_not_name_is_a_mismatch() -> None:
    swapped = "nvcr.io/nvidia/pytorch:25.01-py3"
    images = fold([], [PYTORCH], [ran(swapped, "nvcr.io/nvidia/pytorch@sha256:" + "d" * 64)])
    assert images == [
        {
            "image": swapped,
            "imageIDs": ["nvcr.io/nvidia/pytorch@sha256:" + "d" * 64],
            "mismatch": f"a pod ran {swapped}, which the rendered spec does not name",
        }
    ]


def test_a_digest_other_than_the_pinned_one_is_a_mismatch_and_the_pinned_one_is_not() -> None:
    assert fold([], [PINNED], [ran(PYTORCH, PYTORCH_ID)]) == [{"image": PINNED, "imageIDs": [PYTORCH_ID]}]
    other = "nvcr.io/nvidia/pytorch@sha256:" + "e" * 64
    assert fold([], [PINNED], [ran(PYTORCH, other)]) == [
        {
            "image": PINNED,
            "imageIDs": [other],
            "mismatch": f"a pod ran {PINNED} as sha256:{'e' * 64}, not the pinned sha256:{'a' * 64}",
        }
    ]
    # a simulated node's imageID names no digest: nothing to compare, no mismatch
    assert fold([], [PINNED], [ran(PYTORCH, f"kwok://{PYTORCH}")]) == [
        {"image": PINNED, "imageIDs": [f"kwok://{PYTORCH}"]}
    ]


def test_only_new_mismatches_are_announced() -> None:
    first = fold([], [PYTORCH], [ran("busybox", "docker.io/library/busybox@sha256:" + "f" * 64)])
    assert new_mismatches([], first) == ["a pod ran busybox, which the rendered spec does not name"]
    assert new_mismatches(first, fold(first, [PYTORCH], [ran(PYTORCH, PYTORCH_ID)])) == []


def test_the_record_is_bounded_and_keeps_mismatches() -> None:
    many: list[dict[str, Any]] = [ran(f"nvcr.io/team/tool-{i:02}:v1", f"id-{i}") for i in range(20)]
    rendered = [f"nvcr.io/team/tool-{i:02}:v1" for i in range(1, 20)]
    images = fold([], rendered, many)
    assert len(images) == 16
    assert images[0]["image"] == "nvcr.io/team/tool-00:v1" and images[0]["mismatch"]


def test_status_holds_the_digest_and_the_images_only_when_any_ran() -> None:
    spec = Workflow("wf").with_runtime().obj()["spec"]
    assert status(spec, []) == {"specDigest": spec_digest(spec)}
    images = fold([], rendered_images(spec), [ran("img", "docker.io/library/img@sha256:" + "1" * 64)])
    assert status(spec, images) == {"specDigest": spec_digest(spec), "images": images}


def test_a_runs_copy_announces_the_mismatches_it_brings() -> None:
    record = status({}, fold([], [PYTORCH], [ran("busybox", "docker.io/library/busybox@sha256:" + "f" * 64)]))
    message = "a pod ran busybox, which the rendered spec does not name"
    assert recorded_mismatches(None, record) == [message]
    assert recorded_mismatches(record, record) == []
    assert recorded_mismatches(record, None) == []
