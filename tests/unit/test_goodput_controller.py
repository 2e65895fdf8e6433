"""The GoodputMeasurement controller's terminal write on a fake client that conflicts and stops
(the real API server runs in tests/integration/test_goodput_controller.py)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from nvcre import resources
from nvcre.controllers.measurement.goodput import Goodput
from nvcre.controllers.measurement.shell import MeasurementController
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import GoodputParser
from nvcre.measure.goodput.transitions import running
from nvcre.measure.profile import compile_profile
from nvcre.objects import ObjectKey
from nvcre.testing.fakeclient import FakeClient, Stopped, api_error, context

LOG = [
    "2026-02-05T16:01:40.326255Z [before the start of training step] datetime: 2026-02-05 16:01:40.326255",
    *(
        f"2026-02-05T16:0{2 + n}:00Z [2026-02-05 16:0{2 + n}:00.000000] iteration {n:8d}/ 100 | consumed "
        f"samples: 1 | elapsed time per iteration (ms): 5000.0 | throughput per GPU (TFLOP/s/GPU): 100.0 |"
        for n in (1, 2, 3)
    ),
]
KEY = ObjectKey("ns", "j-goodput")
pytestmark = pytest.mark.asyncio


def world() -> FakeClient:
    """A Job that succeeded at 17:00:00 and its measurement as the last running sample left it."""
    client = FakeClient()
    profile = next(p for p in builtin_profiles() if p["metadata"]["name"] == "megatron-training")
    client.put(copy.deepcopy(profile))
    window = GoodputParser(compile_profile(profile)).feed_all(LOG)
    sampled = running({}, window, now=datetime(2026, 2, 5, 16, 10, tzinfo=UTC), log_interval=1, generation=1)
    client.put(
        {
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "GoodputMeasurement",
            "metadata": {"name": "j-goodput", "namespace": "ns", "generation": 1},
            "spec": {"jobRef": {"name": "j"}, "logProfileRef": "megatron-training"},
            "status": sampled,
        }
    )
    succeeded = {"type": "Succeeded", "status": "True", "reason": "WorkloadCompleted", "message": "",
                 "lastTransitionTime": "2026-02-05T17:00:00Z"}  # fmt: skip
    client.put(
        {
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {},
            "status": {"conditions": [succeeded]},
        }
    )
    return client


def terminal(client: FakeClient) -> dict[str, Any]:
    gm = client.stored(resources.GoodputMeasurement, "j-goodput", "ns")
    assert gm is not None
    return dict(gm["status"])


async def finished() -> dict[str, Any]:
    client = world()
    await MeasurementController(context(client, follow=True), Goodput()).reconcile(KEY)
    return terminal(client)


async def test_the_terminal_write_completes_with_the_figures_once() -> None:
    status = await finished()
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Measuring", "False", "JobSucceeded"),
        ("Complete", "True", "JobSucceeded"),
    ]
    assert status["completionTime"] == "2026-02-05T17:00:00Z"
    assert status["trainingTimeSec"] == "3420.000000"  # 17:00:00 - iteration 1 at 16:03:00
    assert status["resumeTimeSec"] == "79.673745"  # 16:01:40.326255 -> 16:03:00


async def test_a_conflict_on_the_terminal_write_changes_nothing_but_the_retry() -> None:
    clean = await finished()
    client = world()
    conflicts = client.fail("replace", "GoodputMeasurement", api_error(409), subresource="status")
    await MeasurementController(context(client, follow=True), Goodput()).reconcile(KEY)
    assert conflicts, "the write conflicted once"
    assert json.dumps(terminal(client), sort_keys=True) == json.dumps(clean, sort_keys=True)


async def test_a_kill_before_the_write_then_a_restart_gives_the_same_bytes_and_then_nothing() -> None:
    clean = await finished()
    client = world()
    client.stop_at = client.writes + 1
    try:
        await MeasurementController(context(client, follow=True), Goodput()).reconcile(KEY)
        raise AssertionError("the terminal pass wrote nothing")
    except Stopped:
        pass
    client.stop_at = None
    restarted = MeasurementController(context(client, follow=True), Goodput())
    await restarted.reconcile(KEY)
    assert json.dumps(terminal(client), sort_keys=True) == json.dumps(clean, sort_keys=True)
    writes = client.writes
    await restarted.reconcile(KEY)  # frozen: a replay writes nothing
    assert client.writes == writes
