"""An ended ReportExport's retention in the manager (controllers/reportexport.py) on the fake
client and a stepped clock: it is deleted a retention after its completion, and its policy does
not make it again; a Certification that ended within the window is still exported."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nvcre import resources
from nvcre.controllers import reportexport as controller
from nvcre.controllers.reportexport import ReportExportControllers
from nvcre.decide import reportexport as rx
from nvcre.objects import ObjectKey
from nvcre.runtime.clock import MAX_WALL_WAIT_SECONDS
from nvcre.testing.builders import Certification
from nvcre.testing.clock import FakeClock
from nvcre.testing.fakeclient import FakeClient, context

ENDED = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
POLICY_KEY = ObjectKey("nvcre", "db")


def _policy() -> dict[str, Any]:
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "ReportExportPolicy",
        "metadata": {"name": "db", "namespace": "nvcre"},
        "spec": {
            "source": {"namespaces": ["team-a"]},
            "webhook": {"url": "https://reports.example.com/in"},
            "retention": {"succeeded": "2h", "failed": "48h"},
        },
    }


def _ended_certification(client: FakeClient, name: str, at: datetime) -> dict[str, Any]:
    cert = Certification(name).namespace("team-a").obj()
    cert["status"] = {
        "conditions": [
            {
                "type": "Succeeded",
                "status": "True",
                "reason": "AllWorkflowsSucceeded",
                "message": "",
                "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ]
    }
    return client.put(cert)


def _delivered(
    client: FakeClient, policy: dict[str, Any], cert: dict[str, Any], at: datetime
) -> dict[str, Any]:
    """The export the policy makes for ``cert``, delivered at ``at`` (its status as the manager's
    rules write it)."""
    export = rx.export_body(policy, cert)
    status: dict[str, Any] = {"snapshotRef": {"name": "snap"}}
    rx.apply(status, rx.after_attempt(export["spec"], status, rx.Attempt(at, 200, "")))
    export["status"] = status
    return client.put(export)


def _exports(client: FakeClient) -> list[str]:
    return [e["spec"]["sourceRef"]["name"] for e in client.all(resources.ReportExport)]


@pytest.mark.asyncio
async def test_a_delivered_export_is_deleted_after_its_retention_and_not_made_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, clock = FakeClient(), FakeClock(ENDED + timedelta(minutes=5))
    policy = client.put(_policy())
    cert = _ended_certification(client, "nightly", ENDED)
    export = _delivered(client, policy, cert, ENDED + timedelta(minutes=5))
    assert export["status"]["phase"] == "Delivered"
    controllers = ReportExportControllers(context(client, follow=True, clock=clock), workers=1)
    key = ObjectKey("nvcre", export["metadata"]["name"])

    waited = await controllers.reconcile_export(key)  # expires at 14:05: two hours ahead
    assert waited is not None and waited.requeue_after == MAX_WALL_WAIT_SECONDS
    clock.step(3600)
    waited = await controllers.reconcile_export(key)
    assert waited is not None and waited.requeue_after == 3600.0
    assert _exports(client) == ["nightly"]

    clock.step(3600)
    with caplog.at_level(logging.INFO, logger=controller.__name__):
        assert await controllers.reconcile_export(key) is None
    assert _exports(client) == []
    assert caplog.messages == [
        f"report export nvcre/{export['metadata']['name']} deleted: Delivered at 2026-12-01T12:05:00Z, "
        "its retention ended at 2026-12-01T14:05:00Z"
    ]

    # The deletion wakes the policy: the Certification ended before its window, so no new export
    # (no second POST of the same report); one that ended within it is exported.
    _ended_certification(client, "weekly", ENDED + timedelta(hours=1))
    await controllers.reconcile_policy(POLICY_KEY)
    assert _exports(client) == ["weekly"]
    assert client.count("create", "ReportExport") == 1


@pytest.mark.asyncio
async def test_a_failed_export_is_kept_for_the_failed_retention() -> None:
    client, clock = FakeClient(), FakeClock(ENDED)
    policy = client.put(_policy())
    cert = _ended_certification(client, "nightly", ENDED)
    export = rx.export_body(policy, cert)
    export["status"] = {"phase": "Failed", "reason": "HTTPError", "completionTime": "2026-12-01T12:00:00Z"}
    export = client.put(export)
    controllers = ReportExportControllers(context(client, follow=True, clock=clock), workers=1)
    key = ObjectKey("nvcre", export["metadata"]["name"])

    clock.step(47 * 3600)
    waited = await controllers.reconcile_export(key)
    assert waited is not None and waited.requeue_after == 3600.0
    clock.step(3600)
    assert await controllers.reconcile_export(key) is None
    assert _exports(client) == []
