"""Creating, adopting and cleaning up a Workflow's dependency objects."""

from __future__ import annotations

import copy
from typing import Any

from lightkube import ApiError
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim
from lightkube.types import PatchType

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation, Label, WorkflowReason
from nvcre.controllers.children import (
    HolderTerminating,
    NameTaken,
    create_or_adopt,
    delete_if_present,
    delete_referenced,
    get_live,
)
from nvcre.controllers.kinds import UnknownKind, namespaced, resource_of
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.objects import Obj
from nvcre.orchestration.dependencies import (
    DependencyScopeError,
    check_cluster_scoped,
    creation_order,
    job_scoped,
)
from nvcre.orchestration.volumes import release_patch
from nvcre.runtime.errors import is_invalid


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
    """A ComputeDomain was just created (give its driver time before the rest of its group's
    copies, and with them the workload), or the object holding a dependency's name is being
    deleted (or still belongs to a retried group's earlier Job): try again later."""


def _owned(obj: Obj, state: WorkflowState) -> bool:
    meta = obj.get("metadata") or {}
    if (meta.get("annotations") or {}).get(Annotation.WORKFLOW_UID) == state.uid:
        return True
    return any(ref.get("uid") == state.uid for ref in meta.get("ownerReferences") or ())


def _stale_owner(live: Obj, owner: dict[str, Any]) -> bool:
    """Owned by an earlier object of the owner's kind and name (a retried group's previous
    Job): the garbage collector is about to delete it."""
    return any(
        ref.get("kind") == owner["kind"]
        and ref.get("name") == owner["name"]
        and ref.get("uid") != owner["uid"]
        for ref in (live.get("metadata") or {}).get("ownerReferences") or ()
    )


async def create_dependency(
    state: WorkflowState,
    dependency: Obj,
    *,
    owner: dict[str, Any] | None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create (or adopt our own earlier copy of) one dependency, with ``owner`` (an owner
    reference, set only on a namespaced object) and ``labels`` in its one create; returns its
    status ref."""
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
        if owner is not None:
            meta.setdefault("ownerReferences", []).append(owner)
    else:
        try:
            check_cluster_scoped(api_version, kind, name)
        except DependencyScopeError as error:
            raise DependencyError(str(error)) from error
        meta.pop("namespace", None)
    meta.setdefault("labels", {}).update({**(labels or {}), Label.WORKFLOW: state.name})
    meta.setdefault("annotations", {})[Annotation.WORKFLOW_UID] = state.uid
    try:
        created = await create_or_adopt(state.ctx.client, resource, body, lambda live: _owned(live, state))
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
    if created.adopted and scoped and owner is not None and _stale_owner(created.obj, owner):
        raise DependencyNotReady(f"{kind}/{name} still belongs to an earlier {owner['kind']}")
    ref = {"apiVersion": api_version, "kind": kind, "name": name}
    if scoped:
        ref["namespace"] = meta["namespace"]
    return ref


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
                if _is_claim(ref):
                    await _release_volume(state, live)
                await delete_if_present(
                    client, resource, ref["name"], ref.get("namespace"), uid=live["metadata"].get("uid")
                )
        except ApiError:
            keep.insert(0, ref)
        except UnknownKind:
            continue
    return keep


async def owned_refs(state: WorkflowState) -> list[dict[str, Any]]:
    """The refs the status records and, after them in creation order, those of the spec's
    Workflow-scoped dependencies it does not: a pass stopped between a create and the status
    write that records it (the Workflow deleted meanwhile, a 409, a kill) left one unrecorded.
    Deleting takes it too; only an object carrying this Workflow's mark is ever deleted."""
    spec = state.workflow.get("spec") or {}
    dependencies = list(spec.get("dependencies") or ())
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    scoped = set(job_scoped(dependencies, job_spec))
    refs = list(state.dependency_refs)
    recorded = {(r.get("apiVersion"), r.get("kind"), r.get("name")) for r in refs}
    for index in creation_order(dependencies, [i for i in range(len(dependencies)) if i not in scoped]):
        dependency = dependencies[index]
        api_version, kind = str(dependency.get("apiVersion", "")), str(dependency.get("kind", ""))
        name = str((dependency.get("metadata") or {}).get("name", ""))
        if (api_version, kind, name) in recorded:
            continue
        try:
            resource = await resource_of(state.ctx.client, api_version, kind)
        except UnknownKind:
            continue
        ref = {"apiVersion": api_version, "kind": kind, "name": name}
        if namespaced(resource):
            ref["namespace"] = state.namespace
        refs.append(ref)
    return refs


def _is_claim(ref: dict[str, Any]) -> bool:
    return (ref.get("apiVersion"), ref.get("kind")) == ("v1", "PersistentVolumeClaim")


async def _release_volume(state: WorkflowState, claim: Obj) -> None:
    """Mark the volume bound to our ``claim`` as ours and switch a ``Retain`` reclaim policy to
    ``Delete`` (see :mod:`nvcre.orchestration.volumes`)."""
    name = (claim.get("spec") or {}).get("volumeName")
    volume = await get_live(state.ctx.client, PersistentVolume, name, None) if name else None
    patch = release_patch(claim, volume, state.uid) if volume is not None else None
    if name and patch is not None:
        await state.ctx.client.patch(PersistentVolume, name, patch, patch_type=PatchType.MERGE)


async def release_volumes(state: WorkflowState, refs: list[dict[str, Any]]) -> None:
    """:func:`_release_volume` for each of our claims among ``refs``: before a Job owning
    Job-scoped copies is deleted (the garbage collector then takes the claims, not us)."""
    for ref in refs:
        if not _is_claim(ref):
            continue
        claim = await get_live(state.ctx.client, PersistentVolumeClaim, ref["name"], ref.get("namespace"))
        if claim is not None and _owned(claim, state):
            await _release_volume(state, claim)


def job_scoped_refs(state: WorkflowState, group: dict[str, Any]) -> list[dict[str, Any]]:
    """The status refs of the group's Job-scoped copies of the current iteration."""
    iteration = state.orchestration.get("currentIteration", 1)
    return [
        r
        for r in state.dependency_refs
        if r.get("scope") == "job" and r.get("groupName") == group["name"] and r.get("iteration") == iteration
    ]


async def delete_group_job(state: WorkflowState, group: dict[str, Any]) -> None:
    """Delete the Job the group's ``jobRef`` names (of its UID), the volumes of the claims among
    its Job-scoped copies made to go with them first."""
    await release_volumes(state, job_scoped_refs(state, group))
    await delete_referenced(state.ctx.client, resources.Job, group["jobRef"], state.namespace)
