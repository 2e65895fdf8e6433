"""The measurement shell: one controller per measurement kind, the kind a plugin
(:class:`~.kind.MeasurementKind`, one module each, listed in :mod:`.registry`).

The shell holds the informers (its kind, Jobs, LogProfiles, the pod index) and the watches (a
Job and, for a kind that asks, a workload pod wake the measurement of that Job; a LogProfile
wakes the measurements naming it), and runs the reconcile skeleton: the measurement gone (the
kind forgets it), already complete (frozen), its sample interval, its profile as a typed result
(:data:`~.kind.Profile`), its Job; the Job ended: the kind's final read, else the kind's
sample. What the kinds use (a Job's pods, a pod's log streamed into a kind's fold, status
writes through ``ctx.status``) is its base, :class:`~.kind.Shell`.
"""

from __future__ import annotations

from nvcre import resources
from nvcre.api.v1alpha1.constants import Label
from nvcre.conditions import ended
from nvcre.controllers.context import Context
from nvcre.controllers.measurement.kind import MeasurementKind, Measuring, ProfileMissing, Shell, Stop
from nvcre.controllers.podlogs import LogReader, stream_lines
from nvcre.measure.interval import sample_interval
from nvcre.measure.profile import CompiledProfile, ProfileCache, ProfileError
from nvcre.objects import Obj, ObjectKey
from nvcre.runtime.controller import Controller, Result


class MeasurementController(Shell):
    def __init__(
        self, ctx: Context, kind: MeasurementKind, *, workers: int = 1, logs: LogReader = stream_lines
    ) -> None:
        super().__init__(ctx, kind.resource, logs)
        self.kind = kind
        manager = ctx.manager
        self.measurements = manager.informer(kind.resource)
        self.profiles = manager.informer(resources.LogProfile)
        self.compiled = ProfileCache()
        self.controller = Controller(kind.name, self.reconcile, workers=workers)
        self.controller.watch(self.measurements)
        self.controller.watch(self.jobs, self._job_to_measurement)
        if kind.watches_pods:
            self.controller.watch(self.pods, self._pod_to_measurement)
        self.controller.watch(self.profiles, self._profile_to_measurements)
        manager.add(self.controller)

    # -- watches --------------------------------------------------------------------------------

    def _job_to_measurement(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        meta = new["metadata"]
        return [ObjectKey(meta.get("namespace", ""), self.kind.measurement_name(meta["name"]))]

    def _pod_to_measurement(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        job = (new["metadata"].get("labels") or {}).get(Label.JOB)
        return (
            [ObjectKey(new["metadata"].get("namespace", ""), self.kind.measurement_name(job))] if job else []
        )

    def _profile_to_measurements(self, event: str, old: Obj | None, new: Obj) -> list[ObjectKey]:
        name = new["metadata"]["name"]
        return [
            ObjectKey(m["metadata"].get("namespace", ""), m["metadata"]["name"])
            for m in self.measurements.items()
            if (m.get("spec") or {}).get("logProfileRef") == name
        ]

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result | None:
        kind = self.kind
        obj = self.measurements.get(key.namespace, key.name)
        if obj is None:
            kind.forget(key)
            return None
        if kind.is_complete(obj):
            await kind.completed(self, key, obj)
            return None
        interval = sample_interval(obj)
        profile = self.profile(obj)
        if isinstance(profile, ProfileMissing):
            stop = await kind.without_profile(self, obj, profile, interval)
            if stop is not None:
                return stop.result
        job = await kind.job(self, key, obj, interval)
        if isinstance(job, Stop):
            return job.result
        measuring = Measuring(key, obj, job, profile, interval)
        end = ended(job)
        if end is not None:
            return await kind.finalize(self, measuring, end)
        return await kind.sample(self, measuring)

    def profile(self, obj: Obj) -> CompiledProfile | ProfileMissing:
        """The measurement's LogProfile compiled (once per resourceVersion) and fit for its kind,
        or why not (its creation or change wakes the measurement)."""
        name = str((obj.get("spec") or {}).get("logProfileRef") or "")
        body = self.profiles.get("", name)
        if body is None:
            return ProfileMissing(name)
        try:
            compiled = self.compiled.get(body)
            self.kind.check(compiled)
        except ProfileError as error:
            return ProfileMissing(name, error)
        return compiled
