"""A node's baseline and the regression rule (nvcre.fleet.baselines), on records folded by
nvcre.fleet.records. Numbers are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nvcre.fleet import baselines
from nvcre.fleet.baselines import Settings, regression_message, regressions, settings_of
from nvcre.fleet.records import fold

NOW = datetime(2026, 3, 31, 12, 0, 0, tzinfo=UTC)
PAIR = (2, 1)  # two nodes in one topology domain


def result(day: int, verdict: str, bus: float, size: int = 2, domains: int = 1) -> dict[str, Any]:
    return {
        "time": f"2026-03-{day:02d}T00:00:00Z",
        "workflow": {"name": f"wf-{day}", "uid": f"wf-{day}"},
        "job": {"name": f"j-{day}", "uid": f"j-{day}"},
        "groupSize": size,
        "domains": [f"block-{i}" for i in range(domains)],
        "values": {"busBandwidthGBps": bus},
        "verdict": verdict,
    }


def record(*results: dict[str, Any], category: str = "comm/nccl") -> dict[str, Any]:
    return fold(None, category, results, NOW)


def test_the_baseline_is_the_median_of_the_latest_passing_results_of_the_category_and_shape() -> None:
    status = record(
        result(1, "Passed", 400.0),  # older than the latest 3 passing ones
        result(2, "Passed", 470.0),
        result(3, "Failed", 100.0),  # failed: never part of a baseline
        result(4, "Passed", 467.0),
        result(5, "Passed", 300.0, size=4),  # another shape
        result(6, "Passed", 200.0, domains=2),  # a pair across two domains: another shape
        result(7, "Passed", 460.0),
    )
    found = baselines.baseline(status, "comm/nccl", PAIR, "busBandwidthGBps", 3)
    assert found == baselines.Baseline("busBandwidthGBps", 467.0, 3)
    assert baselines.baseline(status, "comm/nccl", PAIR, "busBandwidthGBps", 5) is None  # only 4
    assert baselines.baseline(status, "other/x", PAIR, "busBandwidthGBps", 1) is None


def test_a_node_more_than_the_fraction_below_its_baseline_regressed_and_the_message_says_by_how_much() -> (
    None
):
    history = record(*(result(d, "Passed", v) for d, v in ((1, 470.0), (2, 467.0), (3, 460.0))))
    fresh = record(result(1, "Passed", 470.0))  # one result: too few to judge
    found, judged = regressions(
        {"busBandwidthGBps": 401.0},
        {"gpu-node-003": history, "gpu-node-004": fresh, "gpu-node-005": None},
        "comm/nccl",
        PAIR,
        Settings(fraction=0.1, count=3),
    )
    assert judged
    assert [(r.node, r.key, r.message) for r in found] == [
        (
            "gpu-node-003",
            "busBandwidthGBps",
            "busbw 401 GB/s, 14 % below this node's baseline 467 GB/s (3 runs)",
        )
    ]


def test_within_the_fraction_is_no_regression_and_zero_turns_the_rule_off() -> None:
    history = record(*(result(d, "Passed", 467.0) for d in (1, 2)))
    assert regressions({"busBandwidthGBps": 421.0}, {"n": history}, "comm/nccl", PAIR, Settings(0.1, 2)) == (
        [],
        True,
    )  # 421 is 9.9 % below 467
    assert regressions({"busBandwidthGBps": 100.0}, {"n": history}, "comm/nccl", PAIR, Settings(0.0, 2)) == (
        [],
        False,
    )


def test_a_slower_step_time_is_the_regression_of_a_training_category() -> None:
    steps = [dict(result(d, "Passed", 0.0), values={"avgStepTimeSec": 1.0}) for d in (1, 2)]
    history = record(*steps, category="train/gpt")
    found, _ = regressions({"avgStepTimeSec": 1.2}, {"n": history}, "train/gpt", PAIR, Settings(0.1, 2))
    assert [r.message for r in found] == ["step time 1.2 s, 20 % above this node's baseline 1 s (2 runs)"]


def test_settings_come_from_the_workflows_performance_validation() -> None:
    assert settings_of(None) == Settings(0.1, 5)
    assert settings_of({"regressionFraction": 0.2, "baselineResults": 2}) == Settings(0.2, 2)
    assert settings_of({"regressionFraction": 0}) == Settings(0.0, 5)


def test_one_run_reads_run_not_runs() -> None:
    message = regression_message("busBandwidthGBps", 380.0, baselines.Baseline("busBandwidthGBps", 480.0, 1))
    assert message == "busbw 380 GB/s, 21 % below this node's baseline 480 GB/s (1 run)"
