"""The report's node history: repeat failures and nodes not certified recently, from records.

The numbers are worked by hand: NOW is 2026-03-31 12:00; 30 days before it is 2026-03-01 12:00.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nvcre.fleet import history as fh
from nvcre.report.history import (
    NodeHistory,
    RepeatFailure,
    UncertifiedNode,
    node_history,
    run_uids,
    target_nodes,
)
from nvcre.report.model import Report
from nvcre.report.text import HISTORY_LINES, history_lines, render_text

NOW = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)
THIS = {"cert-uid", "wf-uid"}


def result(time: str, verdict: str, run: str = "old-cert", workflow: str = "old-wf") -> dict[str, Any]:
    return {
        "time": time,
        "verdict": verdict,
        "run": {"kind": "Certification", "name": "c", "uid": run},
        "workflow": {"name": "w", "uid": workflow},
    }


def record(node: str, *categories: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "metadata": {"name": node},
        "spec": {"nodeName": node},
        "status": {"categories": [{"name": name, "results": results} for name, results in categories]},
    }


@pytest.mark.parametrize(
    ("n", "text"),
    [
        *[(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th")],
        *[(21, "21st"), (22, "22nd"), (101, "101st"), (111, "111th"), (112, "112th"), (123, "123rd")],
    ],
)
def test_ordinal(n: int, text: str) -> None:
    assert fh.ordinal(n) == text


def test_earlier_failures_count_other_runs_within_the_window_up_to_this_runs_result() -> None:
    rec = record(
        "n",
        (
            "communication/nccl-all-reduce",
            [
                result("2026-02-28T12:00:00Z", "Failed"),  # 31 days before: outside
                result("2026-03-01T12:00:00Z", "Failed", "r1", "w1"),  # exactly 30 days: inside
                result("2026-03-10T00:00:00Z", "Passed", "r2", "w2"),  # a pass: not a failure
                result("2026-03-20T00:00:00Z", "Failed", "r3", "w3"),  # inside
                result("2026-03-31T12:00:00Z", "Failed", "cert-uid", "wf-uid"),  # this run
            ],
        ),
        ("workloadrun/train", [result("2026-03-25T00:00:00Z", "Failed", "r4", "w4")]),  # every category
    )
    until = fh.run_time(rec, THIS)
    assert until == NOW
    assert fh.earlier_failures(rec, until, THIS) == 3  # 03-01, 03-20, 03-25
    assert fh.earlier_failures(rec, until, THIS, days=10) == 1  # 03-25 (03-20: 11.5 days before)
    assert fh.earlier_failures(rec, until, THIS, days=12) == 2  # 03-25 and 03-20...
    assert fh.earlier_failures(rec, until, set()) == 4  # ...this run counts when not excluded
    # Up to 03-21: 02-28, 03-01 and 03-20 (from 02-19); a later run's failure (03-25) is not earlier.
    assert fh.earlier_failures(rec, datetime(2026, 3, 21, tzinfo=UTC), THIS) == 3


def test_a_run_is_recognised_by_its_workflows_uid_alone() -> None:
    lone = result("2026-03-31T12:00:00Z", "Failed", run="", workflow="wf-uid")
    del lone["run"]
    assert fh.of_run(lone, THIS)
    assert not fh.of_run(result("2026-03-31T12:00:00Z", "Failed"), THIS)


def test_last_pass_is_the_newest_pass_of_any_category_and_an_unreadable_time_is_skipped() -> None:
    rec = record(
        "n",
        ("a/b", [result("2026-01-01T00:00:00Z", "Passed"), result("2026-03-30T00:00:00Z", "Failed")]),
        ("c/d", [result("2026-02-01T00:00:00Z", "Passed"), result("yesterday", "Passed")]),
    )
    assert fh.last_pass(rec) == datetime(2026, 2, 1, tzinfo=UTC)
    assert fh.last_pass(None) is None
    assert fh.whole_days(datetime(2026, 2, 1, tzinfo=UTC), NOW) == 58  # 58 days 12 hours
    assert fh.stale(datetime(2026, 3, 1, 12, tzinfo=UTC), NOW, 30) is False  # exactly 30 days
    assert fh.stale(datetime(2026, 3, 1, 11, 59, tzinfo=UTC), NOW, 30) is True
    assert fh.stale(None, NOW, 30) is True


def test_the_history_names_repeat_failures_and_nodes_not_certified_recently() -> None:
    records = [
        # failed twice in other runs within 30 days, then in this run: 3rd
        record(
            "gpu-3",
            (
                "c/v",
                [
                    result("2026-01-15T00:00:00Z", "Passed"),
                    result("2026-03-05T00:00:00Z", "Failed", "r1", "w1"),
                    result("2026-03-20T00:00:00Z", "Failed", "r2", "w2"),
                    result("2026-03-31T10:00:00Z", "Failed", "cert-uid", "wf-uid"),
                ],
            ),
        ),
        # failed once before; its record does not hold this run yet: judged up to NOW
        record("gpu-2", ("c/v", [result("2026-03-30T00:00:00Z", "Failed", "r1", "w1")])),
        # failed in this run only: no earlier failure, not listed as a repeat
        record("gpu-1", ("c/v", [result("2026-03-31T10:00:00Z", "Failed", "cert-uid", "wf-uid")])),
        # passed 31 days before (stale), but passed in this run: certified
        record("gpu-0", ("c/v", [result("2026-02-28T00:00:00Z", "Passed")])),
        # passed 20 days before: certified
        record("gpu-5", ("c/v", [result("2026-03-11T12:00:00Z", "Passed")])),
        # a node not of the target: ignored
        record("other", ("c/v", [result("2026-03-30T00:00:00Z", "Failed")])),
    ]
    found = node_history(
        records,
        uids=THIS,
        failed=["gpu-1", "gpu-2", "gpu-3"],
        target=["gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"],
        passed={"gpu-0"},
        now=NOW,
    )
    assert found == NodeHistory(
        repeat_failures=(RepeatFailure("gpu-3", 3), RepeatFailure("gpu-2", 2)),
        not_certified=(
            UncertifiedNode("gpu-1"),  # failed, never passed
            UncertifiedNode("gpu-2"),
            UncertifiedNode("gpu-4"),  # no record
            UncertifiedNode("gpu-3", "2026-01-15T00:00:00Z", 75),  # 75 days 12 hours
        ),
    )
    assert [r.text for r in found.repeat_failures] == ["3rd failure in 30 days", "2nd failure in 30 days"]
    assert found.not_certified[0].text == "never certified"
    assert found.not_certified[-1].text == "last passed 75 days ago (2026-01-15)"


def test_nothing_is_said_without_records_time_or_anything_to_say() -> None:
    passing = [record("gpu-0", ("c/v", [result("2026-03-30T00:00:00Z", "Passed")]))]
    common: dict[str, Any] = {"uids": THIS, "failed": [], "target": ["gpu-0", "gpu-1"], "passed": set()}
    assert node_history(None, now=NOW, **common) is None  # not read
    assert node_history([], now=NOW, **common) is None  # no node of the run has a record
    assert node_history([record("other")], now=NOW, **common) is None
    assert node_history(passing, now=None, **common) is None  # no time to judge at
    assert node_history(passing, now=NOW, **{**common, "target": ["gpu-0"]}) is None  # all certified
    # with a record of one node, a node without one is never certified
    assert node_history(passing, now=NOW, **common) == NodeHistory(not_certified=(UncertifiedNode("gpu-1"),))


def test_the_target_is_every_node_placed_in_a_group_or_excluded() -> None:
    workflow = {
        "metadata": {"uid": "wf-uid"},
        "status": {
            "orchestration": {
                "groups": [{"name": "group-0", "nodes": ["b", "a"]}],
                "iterationHistory": [{"iteration": 1, "groups": [{"name": "group-0", "nodes": ["c"]}]}],
                "excludedNodes": ["d"],
                "diagnose": {"healthyNodes": ["e"], "screeningResults": {"block-1": {"nodes": ["f"]}}},
            }
        },
    }
    assert target_nodes([workflow, {"metadata": {}}]) == ["a", "b", "c", "d", "e", "f"]
    assert run_uids({"metadata": {"uid": "cert-uid"}}, [workflow, {}]) == THIS


def test_the_card_lists_the_first_nodes_of_a_long_list_and_says_how_many_more() -> None:
    many = tuple(UncertifiedNode(f"gpu-{i:05d}") for i in range(HISTORY_LINES + 5))
    lines = history_lines(NodeHistory(not_certified=many))
    assert lines[0] == "  Not certified in 30 days:"
    assert lines[1] == "    gpu-00000  never certified"
    assert len(lines) == 1 + HISTORY_LINES + 1 and lines[-1] == "    ... and 5 more"
    history = NodeHistory(repeat_failures=(RepeatFailure("gpu-00003", 2),))
    text = render_text(
        Report(kind="Certification", name="c", namespace="ns", result="FAILED", history=history)
    )
    assert "│  Node History " in text
    assert "│    gpu-00003  2nd failure in 30 days " in text
    long = "ip-10-0-12-34.us-west-2.compute.internal-gpu"
    history = NodeHistory(
        not_certified=(UncertifiedNode(long, "2026-01-15T00:00:00Z", 75), UncertifiedNode("a"))
    )
    assert history_lines(history) == [
        "  Not certified in 30 days:",
        f"    {long}",
        "      last passed 75 days ago (2026-01-15)",
        "    a",
        "      never certified",
    ]
    assert "Node History" not in render_text(
        Report(kind="Certification", name="c", namespace="ns", result="PASSED")
    )
