"""A Workflow whose ``spec.orchestration.deadlineTime`` passed (its run's ``spec.deadline``): what
to stop is :func:`nvcre.decide.limits.stop`'s; this deletes the unfinished Jobs (each Job's
finalizer takes its TrainJob and pods with it), records the nodes of the groups that succeeded and
ends the Workflow Failed, DeadlineExceeded. Deletes are idempotent: a pass killed before the
status write does them again."""

from __future__ import annotations

from nvcre import resources
from nvcre.api.v1alpha1.constants import ConditionType, Label, WorkflowReason
from nvcre.controllers.children import delete_if_present
from nvcre.controllers.workflow.dependencies import release_volumes
from nvcre.controllers.workflow.results import failed_node_names, record_succeeded
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.decide import limits
from nvcre.orchestration.iterations import succeeded_nodes


async def stop(state: WorkflowState) -> None:
    jobs = [
        j
        for j in state.caches.jobs.items(state.namespace)
        if (j["metadata"].get("labels") or {}).get(Label.WORKFLOW) == state.name
    ]
    decided = limits.stop(state.workflow, state.groups, jobs)
    uids = {j["metadata"]["name"]: j["metadata"].get("uid") for j in jobs}
    if decided.jobs:
        # the garbage collector takes the Jobs' claims with them: their volumes first
        await release_volumes(state, list(state.dependency_refs))
    for name in decided.jobs:
        await delete_if_present(state.ctx.client, resources.Job, name, state.namespace, uid=uids.get(name))
    state.orchestration["groups"] = decided.groups
    await record_succeeded(state, succeeded_nodes(decided.groups, await failed_node_names(state)))
    await state.record(ConditionType.FAILED, WorkflowReason.DEADLINE_EXCEEDED, decided.message)
