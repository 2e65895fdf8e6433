"""A Workflow's claim takes its volume with it, even from a ``Retain`` storage class (spec §5.9).

The control plane has no provisioner or volume binder: the test provides each volume and binds
it to the claim the Workflow created, as they would.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim
from lightkube.types import PatchType

from nvcre import resources
from nvcre.testing.builders import new_pool
from nvcre.testing.inspect import get
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import workflow

CLASS = "retained"


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": CLASS,
        },
    }


@pytest.fixture
def volumes(kube: Client, namespace: str) -> Iterator[list[str]]:
    """The names of the volumes the test creates (cluster-scoped: deleted afterwards)."""
    names: list[str] = []
    yield names
    for name in names:
        try:
            kube.delete(PersistentVolume, name)
        except ApiError as error:
            if error.status.code != 404:
                raise


def provide(kube: Client, name: str, claim_of: dict[str, Any]) -> None:
    """A volume of the ``Retain`` class, bound to ``claim_of`` (the claim's UID in its claimRef),
    as a provisioner and the volume binder would make it."""
    meta = claim_of["metadata"]
    kube.create(
        PersistentVolume.from_dict(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "hostPath": {"path": f"/tmp/{name}"},
                    "storageClassName": CLASS,
                    "persistentVolumeReclaimPolicy": "Retain",
                    "claimRef": {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "namespace": meta["namespace"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                    },
                },
            }
        )
    )


def bind(kube: Client, namespace: str, claim_name: str, volume: str) -> None:
    kube.patch(
        PersistentVolumeClaim,
        claim_name,
        {"spec": {"volumeName": volume}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )


def test_a_deleted_workflow_switches_its_claims_retained_volume_to_delete(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, volumes: list[str]
) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    kube.create(
        resources.Workflow.from_dict(
            workflow("vol", namespace, pool, 1, dependencies=[claim("ckpt"), claim("other")])
        )
    )
    ckpt, other = (
        wait_for(
            lambda n=n: get(kube, PersistentVolumeClaim, n, namespace),
            60,
            what=f"claim {n}",
            ignore=(ApiError,),
        )
        for n in ("ckpt", "other")
    )
    ours, foreign = f"{namespace}-ckpt", f"{namespace}-foreign"
    volumes.extend([ours, foreign])
    provide(kube, ours, ckpt)
    bind(kube, namespace, "ckpt", ours)
    # a volume the claim names but that is bound to another claim (another UID) is not ours
    provide(kube, foreign, {"metadata": {**other["metadata"], "uid": "0a1b2c3d-someone-else"}})
    bind(kube, namespace, "other", foreign)
    workflow_uid = get(kube, resources.Workflow, "vol", namespace)["metadata"]["uid"]

    kube.delete(resources.Workflow, "vol", namespace=namespace)
    wait_for(
        lambda: not [w for w in kube.list(resources.Workflow, namespace=namespace)],
        120,
        what="the Workflow's cleanup to end",
    )

    released = kube.get(PersistentVolume, ours).to_dict()
    assert released["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert released["metadata"]["annotations"]["nvcre.nvidia.com/workflow-uid"] == workflow_uid
    untouched = kube.get(PersistentVolume, foreign).to_dict()
    assert untouched["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert "nvcre.nvidia.com/workflow-uid" not in (untouched["metadata"].get("annotations") or {})
    for name in ("ckpt", "other"):  # deleted (kept by pvc-protection: no controller-manager here)
        left = kube.list(PersistentVolumeClaim, namespace=namespace, fields={"metadata.name": name})
        assert all(c.metadata and c.metadata.deletionTimestamp for c in left), name
