"""Which of a Job's labelled pods its own TrainJob ran (the shell of :mod:`nvcre.workload.ownership`).

The pods a measurement reads (the launcher's nccl-tests table, the trainer's steps) and the pod
whose log tail a failed Job quotes are found by the ``nvcre.nvidia.com/job`` label, then kept
only when their controller chain (Pod -> batch Job -> JobSet -> TrainJob) ends at the TrainJob
the Job created, ``status.workloadRef.uid``: a pod given the launcher's labels by anyone else is
never read. The batch Jobs and JobSets on the way are read live (a GET each): what each one's
controller is, is remembered by its UID (a UID never names another object), for the
:data:`CAPACITY` most recently used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.batch_v1 import Job as BatchJob

from nvcre import resources
from nvcre.controllers.children import get_live
from nvcre.objects import Obj
from nvcre.workload.ownership import BATCH_JOB, CHAIN, JOBSET, GroupKind, OwnerRef, controller_of, parent

CAPACITY = 4096
"""Batch Jobs and JobSets whose controller is remembered (a few dozen bytes each)."""
_RESOURCES: dict[GroupKind, Any] = {BATCH_JOB: BatchJob, JOBSET: resources.JobSet}


def workload_uid(job: Obj) -> str | None:
    """The UID of the TrainJob an nvcre Job created (None before it did)."""
    return ((job.get("status") or {}).get("workloadRef") or {}).get("uid") or None


class Ownership:
    """Follows pods' controller chains up to their TrainJob, shared by every controller."""

    def __init__(self, client: AsyncClient, *, capacity: int = CAPACITY) -> None:
        self.client = client
        self.capacity = capacity
        self._parents: OrderedDict[str, OwnerRef | None] = OrderedDict()

    async def pods_of(self, job: Obj, pods: Iterable[Obj]) -> list[Obj]:
        """The ``pods`` (in their order) that ``job``'s TrainJob ran."""
        uid = workload_uid(job)
        if uid is None:
            return []
        return [pod for pod in pods if await self.trainjob_of(pod) == uid]

    async def trainjob_of(self, pod: Obj) -> str | None:
        """The UID of the TrainJob the pod's controller chain ends at; None when the chain is
        broken (no controller, a kind out of place, an owner gone or of another UID)."""
        ref = controller_of(pod)
        if ref is None or ref.group_kind != CHAIN[0]:
            return None
        namespace = pod["metadata"].get("namespace")
        for _ in CHAIN[1:]:
            ref = await self._parent(ref, namespace)
            if ref is None:
                return None
        return ref.uid

    async def _parent(self, ref: OwnerRef, namespace: str | None) -> OwnerRef | None:
        if ref.uid in self._parents:
            self._parents.move_to_end(ref.uid)
            return self._parents[ref.uid]
        live = await get_live(self.client, _RESOURCES[ref.group_kind], ref.name, namespace)
        found = parent(live, ref) if live is not None else None
        self._parents[ref.uid] = found
        if len(self._parents) > self.capacity:
            self._parents.popitem(last=False)
        return found
