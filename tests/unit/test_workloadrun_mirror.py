"""A WorkloadRun follows its Workflow: a failed validation becomes the run's own
``ValidationFailed`` (``ThresholdViolation``, the Workflow's message) beside its ``Failed``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nvcre import resources
from nvcre.controllers.workloadrun import WorkloadRunController
from nvcre.objects import ObjectKey
from nvcre.testing.fakeclient import FakeClient, context
from nvcre.testing.rejections import RUN, WORKFLOW

pytestmark = pytest.mark.asyncio

NS = "team"
VIOLATION = "Job group-0: busBandwidthGBps 180.0 violates value >= 400"


def condition(type_: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


async def test_a_failed_validation_is_mirrored_with_the_workflows_message() -> None:
    client = FakeClient()
    workflow = copy.deepcopy(WORKFLOW)
    workflow["metadata"].update(name="run", namespace=NS)
    workflow["status"] = {
        "conditions": [
            condition(
                "Failed", "JobValidationFailed", "One or more Jobs failed performance threshold validation"
            ),
            condition("ValidationFailed", "ThresholdViolation", VIOLATION),
        ]
    }
    client.put(workflow)
    run = copy.deepcopy(RUN)
    run["metadata"].update(name="run", namespace=NS)
    run["status"] = {"workflowRef": {"name": "run"}}
    client.put(run)

    await WorkloadRunController(context(client, follow=True)).reconcile(ObjectKey(NS, "run"))

    stored = client.stored(resources.WorkloadRun, "run", NS)
    assert stored is not None
    true = {
        c["type"]: (c["reason"], c["message"])
        for c in stored["status"]["conditions"]
        if c["status"] == "True"
    }
    assert true["ValidationFailed"] == ("ThresholdViolation", VIOLATION)
    assert true["Failed"][0] == "WorkflowValidationFailed"
