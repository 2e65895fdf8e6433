"""Creating, adopting and cleaning up a Workflow's dependency objects."""

from __future__ import annotations

import copy
from typing import Any

from lightkube import ApiError
from lightkube.types import PatchType

from nvcre.api.v1alpha1.constants import Annotation, Label, WorkflowReason
from nvcre.controllers.children import (
    HolderTerminating,
    NameTaken,
    create_or_adopt,
    delete_if_present,
    get_live,
)
from nvcre.controllers.kinds import UnknownKind, namespaced, resource_of
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.orchestration.dependencies import DependencyScopeError, check_cluster_scoped
from nvcre.runtime.errors import is_invalid
from nvcre.runtime.objects import Obj


class DependencyError(Exception):
    """Creating a dependency failed; ``collision`` when a foreign object holds its name."""

    def __init__(self, message: str, *, collision: bool = False) -> None:
        super().__init__(message)
        self.collision = collision

    @property
    def reason(self) -> str:
        return (
            WorkflowReason.DEPENDENCY_NAME_COLLISION
            if self.collision
            else WorkflowReason.DEPENDENCY_CREATION_ERROR
        )


class DependencyNotReady(Exception):
    """A ComputeDomain was just created (give its driver time before the Job starts), or the
    object holding a dependency's name is being deleted: try again later."""


class CopyVanished(Exception):
    """A Job-scoped copy was deleted before its Job owned it; the launch is retried."""


def _owned(obj: Obj, state: WorkflowState) -> bool:
    meta = obj.get("metadata") or {}
    if (meta.get("annotations") or {}).get(Annotation.WORKFLOW_UID) == state.uid:
        return True
    return any(ref.get("uid") == state.uid for ref in meta.get("ownerReferences") or ())


async def create_dependency(state: WorkflowState, dependency: Obj, *, owner: bool) -> dict[str, Any]:
    """Create (or adopt our own earlier copy of) one dependency; returns its status ref."""
    body = copy.deepcopy(dependency)
    body.pop("when", None)
    api_version, kind = str(body.get("apiVersion", "")), str(body.get("kind", ""))
    name = str((body.get("metadata") or {}).get("name", ""))
    try:
        resource = await resource_of(state.ctx.client, api_version, kind)
    except UnknownKind as error:
        raise DependencyError(f"{kind}/{name}: {error}") from error
    meta = body.setdefault("metadata", {})
    scoped = namespaced(resource)
    if scoped:
        # Only ever the Workflow's namespace (the resolve refused any other one, naming the field).
        meta["namespace"] = state.namespace
        if owner:
            meta.setdefault("ownerReferences", []).append(state.owner_reference(controller=False))
    else:
        try:
            check_cluster_scoped(api_version, kind, name)
        except DependencyScopeError as error:
            raise DependencyError(str(error)) from error
        meta.pop("namespace", None)
    meta.setdefault("labels", {})[Label.WORKFLOW] = state.name
    meta.setdefault("annotations", {})[Annotation.WORKFLOW_UID] = state.uid
    try:
        await create_or_adopt(state.ctx.client, resource, body, lambda live: _owned(live, state))
    except ApiError as error:
        if is_invalid(error):
            raise DependencyError(f"{kind}/{name}: {error.status.message}") from error
        raise  # transient: the Workflow reconcile is retried with backoff
    except HolderTerminating as error:
        raise DependencyNotReady(f"{kind}/{name}: {error}") from error
    except NameTaken as error:
        raise DependencyError(
            f'{kind} "{name}" already exists and is not owned by Workflow "{state.name}"; refusing to adopt it',
            collision=True,
        ) from error
    ref = {"apiVersion": api_version, "kind": kind, "name": name}
    if scoped:
        ref["namespace"] = meta["namespace"]
    return ref


async def add_job_owner(state: WorkflowState, ref: dict[str, Any], job: Obj) -> None:
    """Make a namespaced Job-scoped copy cascade with its Job (an owner reference to it).

    The copy exists before its Job (the Job's workload names it, and Trainer refuses a TrainJob
    whose runtime does not exist yet), so the owner, whose UID exists only once the Job is
    created, is added afterwards: one merge patch, no read (the copy is ours and its Job is its
    only owner; the patch is idempotent). Any error, and a copy that vanished meanwhile, raises,
    so the launch is retried and recreates what is missing: a copy without its owner would
    outlive its Job.
    """
    if not ref.get("namespace"):
        return
    resource = await resource_of(state.ctx.client, ref["apiVersion"], ref["kind"])
    owner = {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
    }
    patch = {"metadata": {"ownerReferences": [owner]}}
    try:
        await state.ctx.client.patch(
            resource, ref["name"], patch, namespace=ref["namespace"], patch_type=PatchType.MERGE
        )
    except ApiError as error:
        if error.status.code == 404:
            raise CopyVanished(
                f"{ref['kind']}/{ref['name']} was deleted before its Job owner was added"
            ) from error
        raise


async def delete_refs(state: WorkflowState, refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delete our objects among ``refs`` in reverse creation order; returns the refs to keep
    (deletions that failed, to retry). Objects that are not ours, or gone, are forgotten."""
    keep: list[dict[str, Any]] = []
    client = state.ctx.client
    for ref in reversed(refs):
        try:
            resource = await resource_of(client, ref["apiVersion"], ref["kind"])
            live = await get_live(client, resource, ref["name"], ref.get("namespace"))
            if live is not None and _owned(live, state):
                await delete_if_present(client, resource, ref["name"], ref.get("namespace"))
        except ApiError:
            keep.insert(0, ref)
        except UnknownKind:
            continue
    return keep
