"""Which pods a TrainJob ran: the chain of controller ownerReferences (pure).

Kubeflow Trainer runs a TrainJob as a JobSet, JobSet runs each replicated job as batch Jobs, and
each Job runs pods; each of them names its creator in an ownerReference with ``controller: true``
and the creator's UID. A pod is the TrainJob's when that chain leads from the pod to the
TrainJob's UID: Pod -> batch Job -> JobSet -> TrainJob. Labels say nothing of the kind: anyone
who may create a pod in the namespace may give it the launcher's labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import TRAINER_GROUP, TrainerKind

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"

GroupKind = tuple[str, str]
BATCH_JOB: GroupKind = ("batch", "Job")
JOBSET: GroupKind = (JOBSET_GROUP, "JobSet")
TRAIN_JOB: GroupKind = (TRAINER_GROUP, TrainerKind.TRAIN_JOB)

CHAIN: tuple[GroupKind, ...] = (BATCH_JOB, JOBSET, TRAIN_JOB)
"""The kinds of a workload pod's controllers, from its own up to the TrainJob."""


@dataclass(frozen=True)
class OwnerRef:
    """An object's controller, as its ownerReference names it."""

    group: str
    kind: str
    name: str
    uid: str

    @property
    def group_kind(self) -> GroupKind:
        return self.group, self.kind


def controller_of(obj: Mapping[str, Any]) -> OwnerRef | None:
    """The ownerReference with ``controller: true`` (Kubernetes allows one), None without one."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") is True and ref.get("uid") and ref.get("name"):
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            return OwnerRef(group, str(ref.get("kind") or ""), str(ref["name"]), str(ref["uid"]))
    return None


def parent(obj: Mapping[str, Any], ref: OwnerRef) -> OwnerRef | None:
    """``obj``'s controller when ``obj`` is the object ``ref`` names (same UID) and its controller
    is the next kind of :data:`CHAIN` after ``ref``'s; None otherwise."""
    if (obj.get("metadata") or {}).get("uid") != ref.uid or ref.group_kind not in CHAIN[:-1]:
        return None
    owner = controller_of(obj)
    expected = CHAIN[CHAIN.index(ref.group_kind) + 1]
    return owner if owner is not None and owner.group_kind == expected else None
