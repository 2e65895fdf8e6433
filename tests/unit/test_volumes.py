"""The volume bound to a Workflow's claim is made to go with it (nvcre.orchestration.volumes)."""

from __future__ import annotations

from typing import Any

from nvcre.orchestration.volumes import release_patch

UID = "wf-uid"
CLAIM = {"metadata": {"name": "ckpt", "namespace": "team", "uid": "claim-uid"}}


def volume(claim_uid: str | None, policy: str, **annotations: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"persistentVolumeReclaimPolicy": policy}
    if claim_uid is not None:
        spec["claimRef"] = {"name": "ckpt", "namespace": "team", "uid": claim_uid}
    return {"metadata": {"name": "pv-1", "annotations": annotations}, "spec": spec}


def test_a_retained_volume_bound_to_the_claim_is_marked_and_switched_to_delete() -> None:
    assert release_patch(CLAIM, volume("claim-uid", "Retain"), UID) == {
        "metadata": {"annotations": {"nvcre.nvidia.com/workflow-uid": UID}},
        "spec": {"persistentVolumeReclaimPolicy": "Delete"},
    }


def test_a_deleting_volume_is_only_marked_and_a_marked_one_is_left_as_it_is() -> None:
    assert release_patch(CLAIM, volume("claim-uid", "Delete"), UID) == {
        "metadata": {"annotations": {"nvcre.nvidia.com/workflow-uid": UID}}
    }
    marked = volume("claim-uid", "Delete", **{"nvcre.nvidia.com/workflow-uid": UID})
    assert release_patch(CLAIM, marked, UID) is None


def test_a_volume_bound_to_another_claim_or_to_none_is_never_touched() -> None:
    assert release_patch(CLAIM, volume("earlier-claim-uid", "Retain"), UID) is None
    assert release_patch(CLAIM, volume(None, "Retain"), UID) is None
