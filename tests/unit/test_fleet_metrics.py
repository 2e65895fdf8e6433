"""The per-node gauges of the NodeRecords (nvcre.fleet.metrics) and the manager's families of them
(nvcre.controllers.fleet_metrics): records built with the record's own fold, read back as
Prometheus would, through the text /metrics serves. Numbers are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from nvcre.controllers.fleet_metrics import NodeRecordMetrics
from nvcre.fleet.metrics import FAMILIES, node_series, record_samples
from nvcre.fleet.records import fold
from nvcre.objects import Obj
from nvcre.runtime.informer import EventHandler

NOW = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
ALL_REDUCE = "communication/nccl-all-reduce"
TRAINING = "workloadrun/llama"


def stamp(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def result(uid: str, days_ago: float, verdict: str = "Passed", **values: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "time": stamp(days_ago),
        "workflow": {"namespace": "nvcre", "name": "wf", "uid": uid},
        "job": {"namespace": "nvcre", "name": "job", "uid": f"job-{uid}"},
        "groupSize": 2,
        "verdict": verdict,
    }
    if values:
        out["values"] = values
    if verdict == "Failed":
        out.update(reason="ThresholdViolation", cause="ThresholdViolated", message="slow")
    return out


def record(node: str, *folds: tuple[str, dict[str, Any], float]) -> dict[str, Any]:
    """A NodeRecord whose status is each (category, result) folded in as of its days-ago."""
    status: dict[str, Any] | None = None
    for category, res, days_ago in folds:
        status = fold(status, category, [res], NOW - timedelta(days=days_ago))
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "NodeRecord",
        "metadata": {"name": node, "resourceVersion": "1"},
        "spec": {"nodeName": node},
        "status": status or {},
    }


def history() -> dict[str, Any]:
    """gpu-node-007's all-reduce runs 40 to 5 days ago (passed at 480 GB/s, failed at 200, passed
    at 490 and 500, failed at 400), then a WorkloadRun's training runs: passed a day ago, failed
    without values half a day ago."""
    return record(
        "gpu-node-007",
        (ALL_REDUCE, result("a", 40, busBandwidthGBps=480.0, algBandwidthGBps=250.0), 40),
        (ALL_REDUCE, result("b", 35, "Failed", busBandwidthGBps=200.0), 35),
        (ALL_REDUCE, result("c", 20, busBandwidthGBps=490.0), 20),
        (ALL_REDUCE, result("d", 10, busBandwidthGBps=500.0), 10),
        (ALL_REDUCE, result("e", 5, "Failed", busBandwidthGBps=400.0), 5),
        (TRAINING, result("f", 1, goodputRatio=0.93, avgStepTimeSec=1.25), 1),
        (TRAINING, result("g", 0.5, "Failed"), 0.5),
    )


def as_dict(samples: list[Any]) -> dict[tuple[str, tuple[str, ...]], float]:
    return {(family.name, labels): value for family, labels, value in samples}


def test_a_records_gauges() -> None:
    """The newest values and verdicts per category, and the summary's figures as the record says
    them (its baselines, regression against them, consecutive failures: the fold's rules)."""
    rec = history()
    summary = rec["status"]["summary"]
    baselines = {(b["category"], b["key"]): b["value"] for b in summary["baselines"]}
    assert set(baselines) == {(ALL_REDUCE, "busBandwidthGBps"), (TRAINING, "avgStepTimeSec")}
    got = as_dict(record_samples([rec], NOW))
    node = "gpu-node-007"
    assert got == {
        # the newest result that measured each key, per category
        ("nvcre_node_last_value", (node, ALL_REDUCE, "algBandwidthGBps")): 250.0,
        ("nvcre_node_last_value", (node, ALL_REDUCE, "busBandwidthGBps")): 400.0,
        ("nvcre_node_last_value", (node, TRAINING, "avgStepTimeSec")): 1.25,
        ("nvcre_node_last_value", (node, TRAINING, "goodputRatio")): 0.93,
        ("nvcre_node_last_verdict", (node, ALL_REDUCE)): 0.0,
        ("nvcre_node_last_verdict", (node, TRAINING)): 0.0,
        ("nvcre_node_last_result_timestamp_seconds", (node, ALL_REDUCE)): (
            NOW - timedelta(days=5)
        ).timestamp(),
        ("nvcre_node_last_result_timestamp_seconds", (node, TRAINING)): (
            NOW - timedelta(days=0.5)
        ).timestamp(),
        ("nvcre_node_baseline_value", (node, ALL_REDUCE, "busBandwidthGBps")): baselines[
            (ALL_REDUCE, "busBandwidthGBps")
        ],
        ("nvcre_node_baseline_value", (node, TRAINING, "avgStepTimeSec")): baselines[
            (TRAINING, "avgStepTimeSec")
        ],
        # a day ago: the training run, the newest pass of any category
        ("nvcre_node_last_certified_timestamp_seconds", (node,)): (NOW - timedelta(days=1)).timestamp(),
        ("nvcre_node_consecutive_failures", (node,)): summary["consecutiveFailures"],
        ("nvcre_node_bus_bandwidth_vs_baseline_percent", (node,)): summary["busBandwidthVsBaseline"],
        # failed results within 30 days of the scrape: 5 and 0.5 days ago (not 35)
        ("nvcre_node_failures_last_30_days", (node,)): 2.0,
    }
    assert summary["failuresLast30Days"] == 2


def test_failures_of_the_last_30_days_age_out_at_the_scrape() -> None:
    """The record's summary counts as of its last write; the gauge as of the scrape."""
    rec = history()
    series = node_series(rec)
    later = as_dict(record_samples([rec], NOW + timedelta(days=26)))
    assert later[("nvcre_node_failures_last_30_days", ("gpu-node-007",))] == 1.0  # 0.5 days ago only
    much_later = as_dict(record_samples([rec], NOW + timedelta(days=40)))
    assert much_later[("nvcre_node_failures_last_30_days", ("gpu-node-007",))] == 0.0
    assert rec["status"]["summary"]["failuresLast30Days"] == 2
    assert len(series.failures) == 3


def test_a_record_without_results_exports_nothing_and_every_family_is_known() -> None:
    empty = {"metadata": {"name": "n"}, "spec": {"nodeName": "n"}}
    assert record_samples([empty], NOW) == []
    names = [f.name for f in FAMILIES]
    assert len(set(names)) == len(names)
    assert all(n.startswith("nvcre_node_") for n in names)
    for family in FAMILIES:
        assert family.labels[0] == "node"


def test_a_passing_node_without_a_baseline() -> None:
    rec = record("gpu-node-001", (ALL_REDUCE, result("a", 2, busBandwidthGBps=487.7), 2))
    got = as_dict(record_samples([rec], NOW))
    assert got[("nvcre_node_last_verdict", ("gpu-node-001", ALL_REDUCE))] == 1.0
    assert (
        got[("nvcre_node_last_certified_timestamp_seconds", ("gpu-node-001",))]
        == (NOW - timedelta(days=2)).timestamp()
    )
    assert got[("nvcre_node_failures_last_30_days", ("gpu-node-001",))] == 0.0
    assert got[("nvcre_node_consecutive_failures", ("gpu-node-001",))] == 0.0
    assert ("nvcre_node_bus_bandwidth_vs_baseline_percent", ("gpu-node-001",)) not in got, "nothing before"


class FakeInformer:
    """The informer's surface the collector reads: its cache and its event handlers."""

    def __init__(self, *records: Obj) -> None:
        self.cache = {r["metadata"]["name"]: r for r in records}
        self.handlers: list[EventHandler] = []

    def items(self, namespace: str | None = None) -> list[Obj]:
        return list(self.cache.values())

    def add_handler(self, handler: EventHandler) -> None:
        self.handlers.append(handler)

    def apply(self, event: str, obj: Obj) -> None:
        old = self.cache.get(obj["metadata"]["name"])
        if event == "DELETED":
            self.cache.pop(obj["metadata"]["name"], None)
        else:
            self.cache[obj["metadata"]["name"]] = obj
        for handler in self.handlers:
            handler(event, old, obj)


class Clock:
    def now(self) -> datetime:
        return NOW

    def monotonic(self) -> float:
        return 0.0


def scraped(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of Prometheus text, parsed by prometheus_client's own parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def expected(records: list[dict[str, Any]]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (family.name, tuple(sorted(zip(family.labels, labels, strict=True)))): value
        for family, labels, value in record_samples(records, NOW)
    }


def test_the_collector_follows_the_informer_and_serves_what_the_rules_say() -> None:
    first = history()
    second = record("gpu-node-001", (ALL_REDUCE, result("a", 2, busBandwidthGBps=487.7), 2))
    informer = FakeInformer(first)  # cached before the collector watches: the list at start
    metrics = NodeRecordMetrics()
    metrics.watch(informer, Clock())
    informer.apply("ADDED", second)
    assert scraped(metrics.render()) == expected([first, second])
    text = metrics.render().decode()
    for family in FAMILIES:
        assert f"# TYPE {family.name} gauge\n" in text
        assert f"# HELP {family.name} " in text

    # a new version of a record replaces its series (a category's verdict flips to 1)
    newer = result("h", 0.1, busBandwidthGBps=495.0)
    again = {**first, "status": fold(first["status"], ALL_REDUCE, [newer], NOW)}
    informer.apply("MODIFIED", again)
    got = scraped(metrics.render())
    assert got == expected([again, second])
    assert got[("nvcre_node_last_verdict", (("category", ALL_REDUCE), ("node", "gpu-node-007")))] == 1.0
    assert (
        got[
            (
                "nvcre_node_last_value",
                (("category", ALL_REDUCE), ("key", "busBandwidthGBps"), ("node", "gpu-node-007")),
            )
        ]
        == 495.0
    )

    # a deleted record's series go; another source replaces this one
    informer.apply("DELETED", again)
    assert scraped(metrics.render()) == expected([second])
    metrics.watch(FakeInformer(), Clock())
    informer.apply("ADDED", first)  # the old source is no longer read
    assert scraped(metrics.render()) == {}


def test_label_values_are_escaped() -> None:
    odd = record('we"ird\\node', ("workflow/a\nb", result("a", 1, busBandwidthGBps=1.5), 1))
    metrics = NodeRecordMetrics(Clock())
    metrics.observe("ADDED", odd)
    got = scraped(metrics.render())
    assert (
        got[
            (
                "nvcre_node_last_value",
                (("category", "workflow/a\nb"), ("key", "busBandwidthGBps"), ("node", 'we"ird\\node')),
            )
        ]
        == 1.5
    )
