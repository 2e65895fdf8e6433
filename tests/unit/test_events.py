"""Event writes survive a throttled or restarting API server and give up on a refusal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nvcre.controllers import events
from nvcre.controllers.events import Recorder
from nvcre.testing.fakeclient import FakeClient, api_error

WORKFLOW: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "wf", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"},
}


def _notes(client: FakeClient) -> list[tuple[str, str, str]]:
    return [(obj["type"], obj["reason"], obj["note"]) for obj in client.events]


@pytest.fixture(autouse=True)
def _no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    async def instant(_: float) -> None:
        return None

    monkeypatch.setattr(events.asyncio, "sleep", instant)


@pytest.mark.parametrize("code", [429, 500, 503])
def test_an_event_is_written_through_transient_errors(code: int) -> None:
    client = FakeClient()
    client.fail("create", "Event", *[api_error(code, "try later")] * (events.ATTEMPTS - 1))
    asyncio.run(Recorder(client, "m").warning(WORKFLOW, "JobTimedOut", "Job exceeded timeoutPerJob"))  # type: ignore[arg-type]
    assert _notes(client) == [("Warning", "JobTimedOut", "Job exceeded timeoutPerJob")]


def test_an_event_the_server_refuses_is_not_tried_again() -> None:
    client = FakeClient()
    answered = client.fail("create", "Event", api_error(422, "bad event"), api_error(429, "never reached"))
    asyncio.run(Recorder(client, "m").normal(WORKFLOW, "JobCompleted", "done"))  # type: ignore[arg-type]
    assert _notes(client) == []
    assert len(answered) == 1, "a refusal is final"


def test_an_event_that_keeps_failing_is_given_up_without_failing_the_reconcile() -> None:
    client = FakeClient()
    client.fail("create", "Event", *[api_error(503, "down")] * events.ATTEMPTS)
    asyncio.run(Recorder(client, "m").normal(WORKFLOW, "JobCompleted", "done"))  # type: ignore[arg-type]
    assert _notes(client) == []
