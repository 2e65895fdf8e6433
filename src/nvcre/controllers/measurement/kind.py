"""What a measurement kind plugs into the measurement shell (:mod:`.shell`), and what the shell
offers it (:class:`Shell`, the base of the shell's controller).

A kind is one object answering the reconcile skeleton's questions for its measurement: how its
name follows from its Job's, whether a profile fits it, what a frozen or a deleted measurement
needs, what to do without a profile, how it finds its Job, its final read when the Job ended
and its sample while it runs. The shell owns the rest: the informers, the watches, the profile
lookup (a typed :data:`Profile`), the pod selection, the log reading and the status writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from lightkube.core import resource as lkr

from nvcre import resources
from nvcre.controllers import indexes
from nvcre.controllers.context import Context
from nvcre.controllers.indexes import POD_JOB_INDEX
from nvcre.controllers.podlogs import LogReader, container_of, pod_phase, workload_pods
from nvcre.measure.profile import CompiledProfile, ProfileError
from nvcre.objects import Obj, ObjectKey, StatusChange
from nvcre.runtime import offload
from nvcre.runtime.controller import Result


@dataclass(frozen=True)
class ProfileMissing:
    """Why a measurement has no usable LogProfile: none of that name (``error`` None), or one
    this kind cannot use (``error``: why)."""

    name: str
    error: ProfileError | None = None

    @property
    def message(self) -> str:
        """The ``LogProfileNotFound`` condition's message, the same for every kind."""
        if self.error is None:
            return f'LogProfile "{self.name}" not found'
        return f'LogProfile "{self.name}" cannot be used: {self.error}'


Profile = CompiledProfile | ProfileMissing
"""The measurement's compiled LogProfile, or why there is none."""


@dataclass(frozen=True)
class Stop:
    """The pass ends here, with ``result`` (a requeue, or None)."""

    result: Result | None = None


class Shell:
    """What the shell offers a kind's hooks: the context, the Jobs' informer, a Job's pods, a
    pod's log and the measurement's status writes."""

    def __init__(self, ctx: Context, resource: type[lkr.Resource], logs: LogReader) -> None:
        self.ctx = ctx
        self.resource = resource
        self.logs = logs
        self.jobs = ctx.manager.informer(resources.Job)
        self.pods = indexes.pods(ctx.manager)

    def job_pods(self, job: Obj, replicated_job: str | None) -> list[Obj]:
        """The workload pods labelled with ``job`` in its namespace, of that replicated job (any
        when None), in the stable order of :func:`~nvcre.controllers.podlogs.workload_pods`."""
        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        labelled = [
            p for p in self.pods.by_index(POD_JOB_INDEX, name) if p["metadata"].get("namespace") == namespace
        ]
        return workload_pods(labelled, name, replicated_job)

    async def owned(self, job: Obj, pods: list[Obj]) -> list[Obj]:
        """Those of ``pods`` that ``job``'s own TrainJob ran."""
        return await self.ctx.ownership.pods_of(job, pods)

    async def read(
        self,
        pod: Obj,
        profile: CompiledProfile,
        fold: Callable[[list[str]], object],
        *,
        since_time: datetime | None = None,
    ) -> None:
        """Stream the profile's container log of ``pod`` (from ``since_time``) into ``fold``, in
        batches off the event loop; raises :class:`~nvcre.controllers.podlogs.LogsError`."""
        meta = pod["metadata"]
        lines = self.logs(
            self.ctx.client,
            meta["name"],
            meta["namespace"],
            container_of(pod, profile.container_name),
            since_time=since_time,
            still_writing=pod_phase(pod) == "Running",
        )
        await offload.in_batches(lines, fold)

    async def write(self, obj: Obj, change: StatusChange, *, base: Obj | None = None) -> Obj | None:
        """Apply ``change`` to the measurement's status (see ``ctx.status.update``)."""
        return await self.ctx.status.update(self.resource, obj, change, base=base)


@dataclass(frozen=True)
class Measuring:
    """A pass over a measurement whose Job was found: what the shell read for the kind's final
    read or sample."""

    key: ObjectKey
    obj: Obj
    job: Obj
    profile: Profile
    interval: float
    """The measurement's sample interval, in seconds."""


class MeasurementKind(Protocol):
    """One kind of measurement, plugged into :class:`~.shell.MeasurementController`."""

    name: str
    """The controller's name (work queue, log lines)."""
    resource: type[lkr.Resource]
    watches_pods: bool
    """Whether a workload pod's events wake the measurement of its Job."""

    def measurement_name(self, job: str) -> str:
        """The name of the measurement of Job ``job``."""
        ...

    def check(self, profile: CompiledProfile) -> None:
        """Raise :class:`~nvcre.measure.profile.ProfileError` when this kind cannot use it."""
        ...

    def forget(self, key: ObjectKey) -> None:
        """The measurement is gone: drop what is kept for it (metrics, memory)."""
        ...

    def is_complete(self, obj: Obj) -> bool: ...

    async def completed(self, shell: Shell, key: ObjectKey, obj: Obj) -> None:
        """A pass over a complete (frozen) measurement."""
        ...

    async def without_profile(
        self, shell: Shell, obj: Obj, missing: ProfileMissing, interval: float
    ) -> Stop | None:
        """The profile is missing: a :class:`Stop`, or None to go on without it."""
        ...

    async def job(self, shell: Shell, key: ObjectKey, obj: Obj, interval: float) -> Obj | Stop:
        """The measured Job, or a :class:`Stop` (not there yet, gone)."""
        ...

    async def finalize(self, shell: Shell, m: Measuring, ended: tuple[str, str]) -> Result | None:
        """The Job ended (``ended``: its terminal condition type and when): the final status."""
        ...

    async def sample(self, shell: Shell, m: Measuring) -> Result | None:
        """The Job has not ended: a provisional sample (or a wait)."""
        ...
