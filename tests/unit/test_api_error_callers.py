"""Every controller acts on the one API-error table: a throttled or failing server never fails an
object (the reconcile is retried), a refused request does, with the server's message."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.resources.core_v1 import Node

from nvcre import resources
from nvcre.controllers.certification import CertificationController
from nvcre.controllers.workflow.dependencies import DependencyError, create_dependency
from nvcre.controllers.workflow.state import Caches, WorkflowState
from nvcre.controllers.workloadrun import WorkloadRunController
from nvcre.objects import ObjectKey
from nvcre.testing.fakeclient import FakeClient, api_error, context
from nvcre.testing.nodes import gpu_node
from nvcre.testing.rejections import CERT, RUN

pytestmark = pytest.mark.asyncio

NS = "team"
TRANSIENT = [429, 500, 503]
REFUSAL = 'Workflow.nvcre.nvidia.com "x" is invalid: spec.orchestration: Invalid value'


def true_condition(obj: dict[str, Any] | None) -> tuple[str, str, str] | None:
    assert obj is not None
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c["type"] in ("InProgress", "Succeeded", "Failed") and c["status"] == "True":
            return c["type"], c["reason"], c["message"]
    return None


def stored(client: FakeClient, doc: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(doc)
    obj["metadata"]["namespace"] = NS
    return client.put(obj)


@pytest.mark.parametrize("code", TRANSIENT)
async def test_workloadrun_retries_a_transient_workflow_create(code: int) -> None:
    client = FakeClient()
    controller = WorkloadRunController(context(client))
    stored(client, RUN)
    client.fail("create", "Workflow", api_error(code, "please retry", retry_after=1))
    with pytest.raises(ApiError):
        await controller.reconcile(ObjectKey(NS, "run"))
    assert (true_condition(client.stored(resources.WorkloadRun, "run", NS)) or ("",))[0] != "Failed"
    await controller.reconcile(ObjectKey(NS, "run"))
    assert client.stored(resources.Workflow, "run", NS) is not None


async def test_workloadrun_fails_on_a_refused_workflow_with_the_servers_message() -> None:
    client = FakeClient()
    controller = WorkloadRunController(context(client))
    stored(client, RUN)
    client.fail("create", "Workflow", api_error(422, REFUSAL))
    await controller.reconcile(ObjectKey(NS, "run"))
    found = true_condition(client.stored(resources.WorkloadRun, "run", NS))
    assert found is not None and found[0] == "Failed" and REFUSAL in found[2]


async def _certification_until_workflow_create(client: FakeClient) -> CertificationController:
    ctx = context(client)
    controller = CertificationController(ctx)
    ctx.manager.cache(gpu_node("gpu-0").to_dict() | {"apiVersion": "v1", "kind": "Node"})  # type: ignore[attr-defined]
    stored(client, CERT)
    return controller


@pytest.mark.parametrize("code", TRANSIENT)
async def test_certification_retries_a_transient_workflow_create(code: int) -> None:
    client = FakeClient()
    controller = await _certification_until_workflow_create(client)
    client.fail("create", "Workflow", api_error(code, "please retry"))
    raised = False
    for _ in range(5):  # initialise, then the category's Workflow
        try:
            await controller.reconcile(ObjectKey(NS, "cert"))
        except ApiError:
            raised = True
            break
    assert raised, "the transient error reached the controller's backoff"
    assert (true_condition(client.stored(resources.Certification, "cert", NS)) or ("",))[0] != "Failed"


async def test_certification_fails_on_a_refused_workflow_with_the_servers_message() -> None:
    client = FakeClient()
    controller = await _certification_until_workflow_create(client)
    client.fail("create", "Workflow", api_error(422, REFUSAL))
    for _ in range(5):
        await controller.reconcile(ObjectKey(NS, "cert"))
    found = true_condition(client.stored(resources.Certification, "cert", NS))
    assert found is not None and found[0] == "Failed" and REFUSAL in found[2]


def workflow_state(client: FakeClient) -> WorkflowState:
    workflow = client.put(
        {
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": "wf", "namespace": NS},
            "spec": {},
        }
    )
    ctx = context(client)
    caches = Caches(
        jobs=ctx.manager.informer(resources.Job),
        nodes=ctx.manager.informer(Node),
        pods=None,
        records=ctx.manager.informer(resources.NodeRecord),
    )  # type: ignore[arg-type]
    return WorkflowState.of(ctx, caches, workflow)


CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}


@pytest.mark.parametrize("code", TRANSIENT)
async def test_a_transient_dependency_create_is_retried_not_a_dependency_error(code: int) -> None:
    client = FakeClient()
    client.fail("create", "ConfigMap", api_error(code, "please retry"))
    with pytest.raises(ApiError):
        await create_dependency(workflow_state(client), CONFIG_MAP, owner=None)


async def test_a_refused_dependency_is_a_dependency_error_with_the_servers_message() -> None:
    client = FakeClient()
    client.fail("create", "ConfigMap", api_error(422, 'ConfigMap "cfg" is invalid: data: Too long'))
    with pytest.raises(DependencyError, match='ConfigMap "cfg" is invalid: data: Too long'):
        await create_dependency(workflow_state(client), CONFIG_MAP, owner=None)
