"""An ended Workflow lets its workloads go and proves it: it deletes its Jobs' TrainJobs and
Job-scoped TrainingRuntime copies (the Jobs stay for the report), then writes
``ResourcesReleased`` from what the caches still hold of them, their JobSets and pods
(:mod:`nvcre.decide.release` decides what belongs to the run and what the condition says)."""

from __future__ import annotations

from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import Label, TrainerKind
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import ended
from nvcre.controllers import indexes
from nvcre.controllers.children import delete_if_present
from nvcre.controllers.context import Context
from nvcre.controllers.releases import write_release
from nvcre.decide import release
from nvcre.objects import Obj
from nvcre.runtime.controller import Result
from nvcre.runtime.informer import Informer

_DELETED: dict[str, Any] = {
    TrainerKind.TRAIN_JOB: resources.TrainJob,
    TrainerKind.TRAINING_RUNTIME: resources.TrainingRuntime,
}


class Releaser:
    def __init__(self, ctx: Context, jobs: Informer, pods: Informer, timeout: float) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self.pods = pods
        self.timeout = timeout
        manager = ctx.manager
        self.trainjobs = manager.informer(resources.TrainJob)
        self.jobsets = indexes.jobsets(manager)
        self.runtime_copies = indexes.runtime_copies(manager)

    def leftovers(self, workflow: Obj) -> list[release.Leftover]:
        namespace, name = workflow["metadata"]["namespace"], workflow["metadata"]["name"]
        out: list[release.Leftover] = []
        for job in self.jobs.items(namespace):
            if (job["metadata"].get("labels") or {}).get(Label.WORKFLOW) != name:
                continue
            workload, copy = release.lookup_names(job)
            found = release.Candidates(
                pods=[
                    p
                    for p in self.pods.by_index(indexes.POD_JOB_INDEX, job["metadata"]["name"])
                    if p["metadata"].get("namespace") == namespace
                ],
                trainjob=self.trainjobs.get(namespace, workload),
                jobset=self.jobsets.get(namespace, workload),
                runtime_copy=self.runtime_copies.get(namespace, copy) if copy else None,
            )
            out.extend(release.leftovers_of(job, found))
        return out

    async def release(self, workflow: Obj) -> Result | None:
        """The pass of an ended Workflow (one that is not being deleted)."""
        end = ended(workflow)
        if end is None or not end[1]:
            return None
        leftovers = self.leftovers(workflow)
        for item in release.to_delete(leftovers):
            await delete_if_present(
                self.ctx.client, _DELETED[item.kind], item.name, item.namespace, uid=item.uid
            )
        decided = release.decide(parse_time(end[1]), leftovers, self.ctx.clock.now(), self.timeout)
        await write_release(self.ctx, resources.Workflow, workflow, decided)
        return None if decided.recheck_after is None else Result(requeue_after=decided.recheck_after)
