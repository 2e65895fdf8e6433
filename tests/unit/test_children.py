"""The one name-collision policy (spec §1.7) on the fake client: every tier's create adopts its
own earlier create, waits for a holder that is being deleted (ours or not) and never adopts a
foreign one."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import ApiError
from lightkube.resources.core_v1 import ConfigMap, Node

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation
from nvcre.controllers.children import HolderTerminating, NameTaken, create_controlled, create_or_adopt
from nvcre.controllers.workflow.dependencies import DependencyError, DependencyNotReady, create_dependency
from nvcre.controllers.workflow.state import Caches, WorkflowState
from nvcre.testing.fakeclient import FakeClient, api_error, context

pytestmark = pytest.mark.asyncio

NS = "team"
OWNER = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "wf", "namespace": NS, "uid": "wf-uid"},
}


def config_map(**metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": NS, **metadata}}


def being_deleted(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"] |= {"finalizers": ["example.com/hold"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    return obj


def ours(obj: dict[str, Any]) -> bool:
    return (obj["metadata"].get("labels") or {}).get("mine") == "yes"


async def test_a_free_name_is_created() -> None:
    client = FakeClient()
    created = await create_or_adopt(client, ConfigMap, config_map(labels={"mine": "yes"}), ours)
    assert not created.adopted
    assert created.obj["metadata"]["uid"] == (client.stored(ConfigMap, "cfg", NS) or {})["metadata"]["uid"]


async def test_our_own_earlier_create_is_adopted() -> None:
    client = FakeClient()
    earlier = client.put(config_map(labels={"mine": "yes"}))
    created = await create_or_adopt(client, ConfigMap, config_map(labels={"mine": "yes"}), ours)
    assert created.adopted and created.obj["metadata"]["uid"] == earlier["metadata"]["uid"]
    assert client.count("create", "ConfigMap") == 1


@pytest.mark.parametrize("mine", ["yes", "no"])
async def test_a_holder_being_deleted_means_try_again_later_even_our_own(mine: str) -> None:
    client = FakeClient()
    client.put(being_deleted(config_map(labels={"mine": mine})))
    with pytest.raises(HolderTerminating):
        await create_or_adopt(client, ConfigMap, config_map(labels={"mine": "yes"}), ours)


async def test_a_holder_that_vanished_after_the_conflict_means_try_again_later() -> None:
    client = FakeClient()
    client.fail("create", "ConfigMap", api_error(409, 'ConfigMap "cfg" already exists'))
    with pytest.raises(HolderTerminating):
        await create_or_adopt(client, ConfigMap, config_map(), ours)


async def test_a_foreign_holder_is_never_adopted_nor_touched() -> None:
    client = FakeClient()
    foreign = client.put(config_map(labels={"mine": "no"}))
    with pytest.raises(NameTaken) as taken:
        await create_or_adopt(client, ConfigMap, config_map(labels={"mine": "yes"}), ours)
    assert taken.value.existing["metadata"]["uid"] == foreign["metadata"]["uid"]
    assert client.stored(ConfigMap, "cfg", NS) == foreign
    assert [c.verb for c in client.calls] == ["create", "get"]


async def test_any_other_create_error_is_the_callers() -> None:
    client = FakeClient()
    client.fail("create", "ConfigMap", api_error(500))
    with pytest.raises(ApiError) as raised:
        await create_or_adopt(client, ConfigMap, config_map(), ours)
    assert raised.value.status.code == 500


async def test_a_controlled_child_is_ours_by_its_controller_uid() -> None:
    client = FakeClient()

    def job() -> dict[str, Any]:
        return {"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Job", "metadata": {"name": "wf-job"}}

    first = await create_controlled(client, resources.Job, job(), OWNER)
    again = await create_controlled(client, resources.Job, job(), OWNER)
    assert (first.adopted, again.adopted) == (False, True)
    assert again.obj["metadata"]["uid"] == first.obj["metadata"]["uid"]
    other = {**OWNER, "metadata": {**OWNER["metadata"], "uid": "other-uid"}}
    with pytest.raises(NameTaken):
        await create_controlled(client, resources.Job, job(), other)


# -- dependencies: ours by the Workflow's UID, in an owner reference or an annotation -------------


def workflow_state(client: FakeClient) -> WorkflowState:
    ctx = context(client, follow=True)
    caches = Caches(
        jobs=ctx.manager.informer(resources.Job),
        nodes=ctx.manager.informer(Node),
        pods=None,
        records=ctx.manager.informer(resources.NodeRecord),
    )
    return WorkflowState.of(ctx, caches, client.put({**OWNER, "spec": {}}))


DEPENDENCY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}


async def test_a_dependency_of_ours_is_adopted() -> None:
    client = FakeClient()
    client.put(config_map(annotations={Annotation.WORKFLOW_UID: "wf-uid"}))
    ref = await create_dependency(workflow_state(client), DEPENDENCY, owner=None)
    assert ref == {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "namespace": NS}


async def test_a_foreign_dependency_holder_is_a_name_collision() -> None:
    client = FakeClient()
    client.put(config_map())
    with pytest.raises(DependencyError, match="refusing to adopt it") as raised:
        await create_dependency(workflow_state(client), DEPENDENCY, owner=None)
    assert raised.value.collision


@pytest.mark.parametrize("uid", ["wf-uid", "someone-else"])
async def test_a_dependency_holder_being_deleted_is_waited_for_even_our_own(uid: str) -> None:
    client = FakeClient()
    client.put(being_deleted(config_map(annotations={Annotation.WORKFLOW_UID: uid})))
    with pytest.raises(DependencyNotReady):
        await create_dependency(workflow_state(client), DEPENDENCY, owner=None)


JOB_OWNER = {"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Job", "name": "wf-group-0", "uid": "job-2"}


@pytest.mark.parametrize(("uid", "adopted"), [("job-2", True), ("job-1", False)])
async def test_a_job_scoped_copy_of_ours_is_adopted_unless_an_earlier_job_owns_it(
    uid: str, adopted: bool
) -> None:
    """A retried group reuses its Job's name: a copy that still names the earlier Job as owner is
    about to be garbage collected, so the launch waits instead of adopting it."""
    client = FakeClient()
    held = config_map(annotations={Annotation.WORKFLOW_UID: "wf-uid"})
    held["metadata"]["ownerReferences"] = [{**JOB_OWNER, "uid": uid}]
    client.put(held)
    state = workflow_state(client)
    if adopted:
        ref = await create_dependency(state, DEPENDENCY, owner=JOB_OWNER)
        assert ref["name"] == "cfg"
    else:
        with pytest.raises(DependencyNotReady, match="earlier Job"):
            await create_dependency(state, DEPENDENCY, owner=JOB_OWNER)
