"""The retention of NodeRecords of deleted Nodes: the rule (nvcre.fleet.retention), with dates
worked out by hand, and the manager's pass (controllers/noderecord_retention.py) on the fake
client and a stepped clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nvcre import resources
from nvcre.controllers import noderecord_retention
from nvcre.controllers.noderecord_retention import MAX_WAIT_SECONDS, NodeRecordRetention
from nvcre.fleet.retention import (
    DEFAULT_RETENTION,
    Expired,
    format_retention,
    newest_result,
    parse_retention,
    sweep,
)
from nvcre.manager.main import parse_args
from nvcre.runtime.writes import Conflict
from nvcre.testing.clock import FakeClock
from nvcre.testing.fakeclient import FakeClient, api_error, context

NOW = datetime(2026, 6, 30, 12, 0, 0, tzinfo=UTC)
DAYS_90 = timedelta(days=90)


def record(
    node: str, *times: str, created: str = "2026-01-01T00:00:00Z", uid: str = "", version: str = "7"
) -> dict[str, Any]:
    """A record of ``node`` whose results (one category per time, each its newest) are ``times``."""
    categories = [
        {"name": f"workflow/w{i}", "results": [{"time": "2025-12-01T00:00:00Z"}, {"time": t}]}
        for i, t in enumerate(times)
    ]
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "NodeRecord",
        "metadata": {
            "name": node,
            "uid": uid or f"uid-{node}",
            "resourceVersion": version,
            "creationTimestamp": created,
        },
        "spec": {"nodeName": node},
        "status": {"categories": categories} if categories else {},
    }


# --- the rule --------------------------------------------------------------------------------------


def test_a_record_whose_node_exists_is_kept_however_old() -> None:
    old = record("n1", "2020-01-01T00:00:00Z")
    decided = sweep([old], {"n1"}, NOW, DAYS_90)
    assert decided.expired == ()
    assert decided.next_expiry is None  # nothing to wake for: a Node deletion will wake it


def test_a_gone_nodes_record_expires_90_days_after_its_newest_result_of_any_category() -> None:
    # Newest result 2026-04-01T12:00:00Z (the other category's is 2026-03-01): + 90 days is
    # 2026-06-30T12:00:00Z (April 29 + May 31 + June 30 = 90), exactly NOW: expired.
    rec = record("n1", "2026-03-01T00:00:00Z", "2026-04-01T12:00:00Z")
    assert newest_result(rec) == datetime(2026, 4, 1, 12, tzinfo=UTC)
    [expired] = sweep([rec], set(), NOW, DAYS_90).expired
    assert expired == Expired(
        name="n1",
        node="n1",
        uid="uid-n1",
        resource_version="7",
        since=datetime(2026, 4, 1, 12, tzinfo=UTC),
        expired_at=NOW,
        reason="Node n1 is gone and its newest result was 2026-04-01T12:00:00Z, at least the "
        "retention (90d) ago: expired 2026-06-30T12:00:00Z",
    )
    # One second earlier it is kept, and the pass is told when to look again.
    decided = sweep([rec], set(), NOW - timedelta(seconds=1), DAYS_90)
    assert decided.expired == ()
    assert decided.next_expiry == NOW


def test_a_record_without_a_result_counts_from_its_creation() -> None:
    # Created 2026-03-01T00:00:00Z; + 90 days = 2026-05-30T00:00:00Z (March 31 + April 30 + 29).
    bare = record("n2", created="2026-03-01T00:00:00Z")
    assert newest_result(bare) is None
    at = datetime(2026, 5, 30, tzinfo=UTC)
    assert sweep([bare], set(), at - timedelta(microseconds=1), DAYS_90).next_expiry == at
    [expired] = sweep([bare], set(), at, DAYS_90).expired
    assert expired.since == datetime(2026, 3, 1, tzinfo=UTC)
    assert expired.reason == (
        "Node n2 is gone and the record, without a result, was created 2026-03-01T00:00:00Z, at "
        "least the retention (90d) ago: expired 2026-05-30T00:00:00Z"
    )


def test_a_pass_deletes_the_expired_keeps_the_rest_and_wakes_at_the_earliest_expiry() -> None:
    records = [
        record("live", "2025-01-01T00:00:00Z"),  # its Node exists: kept, never scheduled
        record("gone-old", "2026-01-15T00:00:00Z"),  # expired 2026-04-15
        record("gone-b", "2026-05-01T00:00:00Z"),  # expires 2026-07-30T00:00:00Z
        record("gone-a", "2026-04-20T06:00:00Z"),  # expires 2026-07-19T06:00:00Z: the earliest
        record("gone-older", "2025-12-31T23:59:59Z"),  # expired 2026-03-31T23:59:59Z
    ]
    decided = sweep(records, {"live", "unrelated"}, NOW, DAYS_90)
    assert [e.name for e in decided.expired] == ["gone-old", "gone-older"]
    assert [e.expired_at for e in decided.expired] == [
        datetime(2026, 4, 15, tzinfo=UTC),
        datetime(2026, 3, 31, 23, 59, 59, tzinfo=UTC),
    ]
    assert decided.next_expiry == datetime(2026, 7, 19, 6, tzinfo=UTC)


def test_a_retention_of_zero_keeps_everything_forever() -> None:
    decided = sweep([record("gone", "2000-01-01T00:00:00Z")], set(), NOW, timedelta(0))
    assert (decided.expired, decided.next_expiry) == ((), None)


def test_a_record_that_cannot_be_dated_is_kept() -> None:
    undated = record("gone")
    undated["status"] = {"categories": [{"name": "workflow/w", "results": [{"time": "yesterday"}]}]}
    assert (
        sweep([undated], set(), NOW, DAYS_90)
        .expired[0]
        .reason.startswith(
            "Node gone is gone and the record, without a result, was created 2026-01-01T00:00:00Z"
        )
    )  # an unreadable result time: its creation counts
    undated["metadata"].pop("creationTimestamp")
    assert sweep([undated], set(), NOW, DAYS_90) == sweep([], set(), NOW, DAYS_90)


def test_the_node_is_the_records_spec_node_name() -> None:
    rec = record("rec-name", "2026-01-01T00:00:00Z")
    rec["spec"]["nodeName"] = "node-a"
    assert sweep([rec], {"rec-name"}, NOW, DAYS_90).expired[0].node == "node-a"
    assert sweep([rec], {"node-a"}, NOW, DAYS_90).expired == ()


@pytest.mark.parametrize(
    ("text", "retention", "shown"),
    [
        ("90d", timedelta(days=90), "90d"),
        ("2160h", timedelta(days=90), "90d"),
        ("36h", timedelta(hours=36), "36h0m0s"),
        ("1h30m", timedelta(minutes=90), "1h30m0s"),
        ("1s", timedelta(seconds=1), "1s"),
        ("0", timedelta(0), "0"),
        ("0d", timedelta(0), "0"),
    ],
)
def test_parse_and_format_retention(text: str, retention: timedelta, shown: str) -> None:
    assert parse_retention(text) == retention
    assert format_retention(retention) == shown


@pytest.mark.parametrize("text", ["", "90", "-1s", "1w", "d", "90 d", "1.5d"])
def test_a_malformed_retention_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="retention"):
        parse_retention(text)


def test_the_manager_flag_defaults_to_90_days_and_refuses_a_bad_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse_args([]).node_record_retention == DEFAULT_RETENTION == timedelta(days=90)
    assert parse_args(["--node-record-retention=0"]).node_record_retention == timedelta(0)
    assert parse_args(["--node-record-retention=12h"]).node_record_retention == timedelta(hours=12)
    with pytest.raises(SystemExit) as exited:
        parse_args(["--node-record-retention=-1h"])
    assert exited.value.code == 2
    assert "argument --node-record-retention: invalid retention '-1h': must not be negative" in (
        capsys.readouterr().err
    )


# --- the manager's pass ----------------------------------------------------------------------------


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


@pytest.fixture
def deletes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """The pass's deletes on the fake client, preconditions checked as the API server does."""
    made: list[tuple[str, str, str]] = []

    async def delete_record(client: FakeClient, expired: Expired) -> None:
        made.append((expired.name, expired.uid, expired.resource_version))
        live = client.stored(resources.NodeRecord, expired.name)
        if live is not None and (
            live["metadata"]["uid"] != expired.uid
            or live["metadata"]["resourceVersion"] != expired.resource_version
        ):
            raise api_error(409, "Precondition failed")
        await client.delete(resources.NodeRecord, expired.name)

    monkeypatch.setattr(noderecord_retention, "delete_record", delete_record)
    return made


def retention_pass(
    client: FakeClient, clock: FakeClock, retention: timedelta = DAYS_90
) -> NodeRecordRetention:
    return NodeRecordRetention(context(client, follow=True, clock=clock), retention)


def stored(client: FakeClient) -> list[str]:
    return sorted(r["metadata"]["name"] for r in client.all(resources.NodeRecord))


@pytest.mark.asyncio
async def test_a_pass_deletes_expired_records_logs_why_and_wakes_at_the_next_expiry(
    deletes: list[tuple[str, str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient()
    clock = FakeClock(NOW)
    for body in (
        record("live", "2025-01-01T00:00:00Z"),
        record("gone-old", "2026-01-15T00:00:00Z"),
        record("gone-soon", "2026-04-01T13:00:00Z"),  # expires 2026-06-30T13:00:00Z: in an hour
        record("gone-later", "2026-04-03T12:00:00Z"),  # expires 2026-07-02T12:00:00Z
    ):
        client.put(body)
    client.put(node("live"))
    passer = retention_pass(client, clock)
    assert passer.controller in passer.ctx.manager.controllers  # type: ignore[attr-defined]

    with caplog.at_level(logging.INFO, logger=noderecord_retention.__name__):
        result = await passer.reconcile(noderecord_retention.SWEEP)
    assert stored(client) == ["gone-later", "gone-soon", "live"]
    assert [d[0] for d in deletes] == ["gone-old"]
    assert caplog.messages == [
        "Deleted the NodeRecord of node gone-old: Node gone-old is gone and its newest result was "
        "2026-01-15T00:00:00Z, at least the retention (90d) ago: expired 2026-04-15T00:00:00Z"
    ]
    assert result is not None and result.requeue_after == 3600.0

    clock.step(3600)
    result = await passer.reconcile(noderecord_retention.SWEEP)
    assert stored(client) == ["gone-later", "live"]
    assert result is not None and result.requeue_after == MAX_WAIT_SECONDS  # 2 days ahead: capped

    clock.step(2 * 86400)
    assert await passer.reconcile(noderecord_retention.SWEEP) is None
    assert stored(client) == ["live"]
    assert client.count("delete", "Node") == 0 and client.count("update", "Node") == 0


@pytest.mark.asyncio
async def test_a_record_written_since_the_pass_read_it_is_kept_and_decided_again(
    deletes: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = FakeClient()
    client.put(record("gone", "2026-01-01T00:00:00Z"))
    passer = retention_pass(client, FakeClock(NOW))
    seen = client.all(resources.NodeRecord)
    client.put(seen[0])  # written again (a new resourceVersion) after the cache's view
    monkeypatch.setattr(passer.records, "items", lambda namespace=None: seen)
    with pytest.raises(Conflict):  # the controller runs the pass again, on the fresh view
        await passer.reconcile(noderecord_retention.SWEEP)
    assert stored(client) == ["gone"]
    assert deletes == [("gone", "uid-gone", seen[0]["metadata"]["resourceVersion"])]


@pytest.mark.asyncio
async def test_a_record_already_gone_and_a_retention_of_zero(deletes: list[tuple[str, str, str]]) -> None:
    client = FakeClient()
    client.put(record("gone", "2026-01-01T00:00:00Z"))
    client.fail("delete", "NodeRecord", api_error(404, "not found"))
    passer = retention_pass(client, FakeClock(NOW))
    assert await passer.reconcile(noderecord_retention.SWEEP) is None  # gone already: fine
    keeper = retention_pass(client, FakeClock(NOW), timedelta(0))
    assert keeper.controller not in keeper.ctx.manager.controllers  # type: ignore[attr-defined]
