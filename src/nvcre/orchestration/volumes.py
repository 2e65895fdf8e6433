"""The volume behind a Workflow's claim goes with the claim (spec §5.9; pure).

A checkpoint PersistentVolumeClaim is a Workflow dependency, deleted with its group or its
Workflow (or by the garbage collector with the Job that owns a Job-scoped copy). The volume a
provisioner bound to it follows the storage class's reclaim policy: ``Retain`` would keep it, and
its storage, after the claim is gone, with nothing left naming it. So before the claim (or the
Job owning it) is deleted, the volume bound to it is marked as the Workflow's (the
``nvcre.nvidia.com/workflow-uid`` annotation) and its reclaim policy switched to ``Delete``.
"""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.constants import Annotation
from nvcre.objects import Obj

RETAIN = "Retain"
DELETE = "Delete"


def release_patch(claim: Obj, volume: Obj, workflow_uid: str) -> dict[str, Any] | None:
    """The merge patch that marks ``volume`` as the Workflow's and makes it go with ``claim``;
    None when it is not bound to that claim (its ``claimRef`` names another UID: someone
    else's volume is never touched) or says so already."""
    claim_ref = (volume.get("spec") or {}).get("claimRef") or {}
    if not claim_ref.get("uid") or claim_ref.get("uid") != claim["metadata"].get("uid"):
        return None
    patch: dict[str, Any] = {}
    if (volume["metadata"].get("annotations") or {}).get(Annotation.WORKFLOW_UID) != workflow_uid:
        patch["metadata"] = {"annotations": {Annotation.WORKFLOW_UID: workflow_uid}}
    if (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") == RETAIN:
        patch["spec"] = {"persistentVolumeReclaimPolicy": DELETE}
    return patch or None
