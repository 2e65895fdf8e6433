"""Creating, adopting and cleaning up a Workflow's dependency objects."""

from __future__ import annotations

import copy
from typing import Any

from lightkube import ApiError

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
from nvcre.objects import Obj
from nvcre.orchestration.dependencies import DependencyScopeError, check_cluster_scoped
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
                await delete_if_present(client, resource, ref["name"], ref.get("namespace"))
        except ApiError:
            keep.insert(0, ref)
        except UnknownKind:
            continue
    return keep
