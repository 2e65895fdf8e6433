"""Whether an ended run has released its resources: the ``ResourcesReleased`` condition (pure).

A run's resources are the pods, JobSets, TrainJobs and Job-scoped TrainingRuntime copies of its
Workflows' Jobs, each known by what nvcre itself renders: the ``nvcre.nvidia.com/job`` label
(on the TrainJob, on its pods through nvcre's runtime patch, and on the copy), and the name
JobSet inherits from its TrainJob with that TrainJob as its controller. Once the run has ended
the condition is False ``Releasing`` while any remains (its message counts them by kind and
names the first few), True ``Released`` once none does, and False ``ReleaseTimedOut`` when some
still remain the release timeout after the end (naming what is stuck and its finalizers).
A Workflow decides it from its own Jobs; a WorkloadRun or a Certification combines its
Workflows' conditions (:func:`combine`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from nvcre.api.v1alpha1.constants import (
    Annotation,
    ConditionStatus,
    ConditionType,
    Default,
    Label,
    ReleaseReason,
    TrainerKind,
)
from nvcre.conditions import condition_of, condition_true
from nvcre.durations import format_duration
from nvcre.naming import trainjob_name
from nvcre.objects import Obj

POD: Final = "Pod"
JOBSET: Final = "JobSet"
KINDS: Final = (POD, JOBSET, TrainerKind.TRAIN_JOB, TrainerKind.TRAINING_RUNTIME)
"""What a run leaves behind, in the order messages count them."""
SHOWN: Final = 3
"""Names shown per kind in a message; the rest are counted."""
RELEASED_MESSAGE: Final = "No pod, JobSet, TrainJob or Job-scoped TrainingRuntime copy of the run remains"
DELETED_KINDS: Final = (TrainerKind.TRAIN_JOB, TrainerKind.TRAINING_RUNTIME)
"""What an ended run deletes itself: its pods and JobSets go with their TrainJob."""


@dataclass(frozen=True)
class Leftover:
    """One object of the run that still exists."""

    kind: str
    namespace: str
    name: str
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    uid: str | None = field(default=None, compare=False)
    """The object seen: a delete of it leaves a later one of its name alone."""

    @classmethod
    def of(cls, kind: str, obj: Obj) -> Leftover:
        meta = obj["metadata"]
        return cls(
            kind,
            str(meta.get("namespace") or ""),
            str(meta["name"]),
            tuple(meta.get("finalizers") or ()),
            bool(meta.get("deletionTimestamp")),
            meta.get("uid"),
        )


@dataclass(frozen=True)
class Candidates:
    """What the caches hold under the names a Job's objects would have (absent: None/empty)."""

    pods: Sequence[Obj] = ()
    trainjob: Obj | None = None
    jobset: Obj | None = None
    runtime_copy: Obj | None = None


def lookup_names(job: Obj) -> tuple[str, str | None]:
    """(the TrainJob's and JobSet's name, the runtime copy's name) a Job's objects are found by."""
    meta = job["metadata"]
    copy = (meta.get("annotations") or {}).get(Annotation.RUNTIME_COPY)
    return trainjob_name(meta["name"]), copy


def _labelled(obj: Obj, job: str) -> bool:
    return (obj["metadata"].get("labels") or {}).get(Label.JOB) == job


def _controlled_by_trainjob(jobset: Obj, name: str) -> bool:
    refs = jobset["metadata"].get("ownerReferences") or ()
    return any(
        r.get("controller") and r.get("kind") == TrainerKind.TRAIN_JOB and r.get("name") == name for r in refs
    )


def leftovers_of(job: Obj, found: Candidates) -> list[Leftover]:
    """The Job's objects among ``found`` (all in the Job's namespace), decided by nvcre's labels."""
    name = job["metadata"]["name"]
    workload, _ = lookup_names(job)
    out = [Leftover.of(POD, p) for p in found.pods if _labelled(p, name)]
    if found.jobset is not None and _controlled_by_trainjob(found.jobset, workload):
        out.append(Leftover.of(JOBSET, found.jobset))
    if found.trainjob is not None and _labelled(found.trainjob, name):
        out.append(Leftover.of(TrainerKind.TRAIN_JOB, found.trainjob))
    if found.runtime_copy is not None and _labelled(found.runtime_copy, name):
        out.append(Leftover.of(TrainerKind.TRAINING_RUNTIME, found.runtime_copy))
    return out


def to_delete(leftovers: Iterable[Leftover]) -> list[Leftover]:
    """What the ended run deletes: its TrainJobs and runtime copies not already going."""
    return [x for x in leftovers if x.kind in DELETED_KINDS and not x.deleting]


@dataclass(frozen=True)
class Release:
    """The ``ResourcesReleased`` condition to write, and when to look again (None: only on a
    change)."""

    status: str
    reason: str
    message: str
    recheck_after: float | None = None

    @property
    def timed_out(self) -> bool:
        return self.reason == ReleaseReason.RELEASE_TIMED_OUT


def _plural(kind: str, count: int) -> str:
    return kind if count == 1 else f"{kind}s"


def summary(leftovers: Sequence[Leftover]) -> str:
    """``2 Pods (a, b), 1 JobSet (c)``: counts by kind, the first names of each."""
    parts = []
    for kind in KINDS:
        names = sorted(x.name for x in leftovers if x.kind == kind)
        if not names:
            continue
        shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
        parts.append(f"{len(names)} {_plural(kind, len(names))} ({shown})")
    return ", ".join(parts)


def _stuck(leftovers: Sequence[Leftover]) -> Leftover:
    """The one to name first: one held by a finalizer, else the first in message order."""
    ordered = sorted(leftovers, key=lambda x: (not x.finalizers, KINDS.index(x.kind), x.name))
    return ordered[0]


def decide(
    ended_at: datetime,
    leftovers: Sequence[Leftover],
    now: datetime,
    timeout: float = Default.RELEASE_TIMEOUT_SECONDS,
) -> Release:
    """The condition of a run that ended at ``ended_at`` and of which ``leftovers`` remain."""
    if not leftovers:
        return Release(ConditionStatus.TRUE, ReleaseReason.RELEASED, RELEASED_MESSAGE)
    remaining = f"{len(leftovers)} of the run's objects remain: {summary(leftovers)}"
    left = timeout - (now - ended_at).total_seconds()
    if left > 0:
        return Release(
            ConditionStatus.FALSE,
            ReleaseReason.RELEASING,
            remaining,
            min(left, Default.RELEASE_RECHECK_SECONDS),
        )
    stuck = _stuck(leftovers)
    held = (
        f"; it has finalizer{'s' if len(stuck.finalizers) > 1 else ''} {', '.join(stuck.finalizers)}"
        if stuck.finalizers
        else ""
    )
    message = (
        f"{stuck.kind} {stuck.namespace}/{stuck.name} still exists "
        f"{format_duration(round(timeout * 1e9))} after the run ended{held}; {remaining}"
    )
    return Release(
        ConditionStatus.FALSE, ReleaseReason.RELEASE_TIMED_OUT, message, Default.REQUEUE_SECONDS * 4
    )


def proven(owner: Obj) -> bool:
    """The ended run already says Released: what it held is gone and an ended run makes nothing
    new, so nothing changes that, not even its Workflows going afterwards."""
    return condition_true(owner, ConditionType.RESOURCES_RELEASED)


def combine(workflows: Mapping[str, Obj | None]) -> Release | None:
    """An ended owner's condition from its Workflows' (by name; None: one a live read found
    gone): None while one has not decided yet; else timed out if one timed out, releasing if one
    is releasing; Unknown if one was deleted before it decided (its finalizer let it go once its
    Jobs had, a Job once its pods stopped or their drain grace passed: nothing proves them gone);
    released when all are, or when none was ever made (a run refused before its first Workflow
    holds nothing). Each message names its Workflow when there are several."""
    decided: list[tuple[str, dict[str, Any]]] = []
    for name, workflow in sorted(workflows.items()):
        if workflow is None:
            continue
        condition = condition_of(workflow, ConditionType.RESOURCES_RELEASED)
        if condition is None:
            return None
        decided.append((name, condition))
    for reason in (ReleaseReason.RELEASE_TIMED_OUT, ReleaseReason.RELEASING):
        matching = [
            (n, c)
            for n, c in decided
            if c.get("status") != ConditionStatus.TRUE and c.get("reason") == reason
        ]
        if matching:
            named = len(workflows) > 1
            message = "; ".join(
                f"Workflow {n}: {c.get('message') or ''}" if named else str(c.get("message") or "")
                for n, c in matching
            )
            return Release(ConditionStatus.FALSE, reason, message)
    deleted = sorted(name for name, workflow in workflows.items() if workflow is None)
    if deleted:
        return Release(ConditionStatus.UNKNOWN, ReleaseReason.WORKFLOW_DELETED, _unproven(deleted))
    if not workflows:
        return Release(
            ConditionStatus.TRUE, ReleaseReason.RELEASED, "No Workflow was created: the run holds nothing"
        )
    if all(c.get("status") == ConditionStatus.TRUE for _, c in decided):
        return Release(ConditionStatus.TRUE, ReleaseReason.RELEASED, RELEASED_MESSAGE)
    return None


def _unproven(deleted: Sequence[str]) -> str:
    many = len(deleted) > 1
    return (
        f"Workflow{'s' if many else ''} {', '.join(deleted)} {'were' if many else 'was'} deleted before "
        f"{'they' if many else 'it'} proved the run's pods gone (a Workflow goes once its Jobs have; "
        f"a Job once its pods stopped or {format_duration(round(Default.POD_DRAIN_GRACE_SECONDS * 1e9))} "
        "passed); pods of the run, labelled nvcre.nvidia.com/job, may remain"
    )
