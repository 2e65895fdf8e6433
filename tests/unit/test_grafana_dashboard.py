"""The chart's Grafana dashboard (charts/nvcre/files/dashboards/nvcre-fleet.json) queries only
metrics the manager exports: every metric name in every panel's PromQL and every template
variable's query is a family of the body the manager serves on /metrics
(``nvcre.runtime.probes.metrics_text``), with the NodeRecord collector reading records made by
the record's own fold; the nvcre_node_* ones must have samples there, not just a HELP line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nvcre.controllers.fleet_metrics import NODE_RECORDS
from nvcre.fleet.records import fold
from nvcre.objects import Obj
from nvcre.runtime import probes
from nvcre.runtime.informer import EventHandler

DASHBOARD = (
    Path(__file__).resolve().parents[2] / "charts" / "nvcre" / "files" / "dashboards" / "nvcre-fleet.json"
)

FUNCTIONS = {
    # aggregations and keywords
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
    "topk", "quantile", "limitk", "limit_ratio", "by", "without", "on", "ignoring", "group_left",
    "group_right", "bool", "and", "or", "unless", "offset", "atan2",
    # functions
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor",
    "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate", "label_join",
    "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear", "rate", "resets",
    "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp", "vector", "year",
    "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
    "quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
    "present_over_time", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's $variables taken out)."""
    text = re.sub(r"\$\{[^}]*\}|\$\w+", "", expr)
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', text)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?[smhdwy]?\b", " ", text)  # numbers, durations
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        name = match.group()
        follows = text[match.end() :].lstrip()[:1]
        if name.lower() in FUNCTIONS or follows == "(":
            continue
        names.add(name)
    return names


def variable_query(query: str) -> str:
    """A template variable's PromQL: label_values(METRIC{...}, label) selects METRIC;
    query_result(EXPR) runs EXPR; label_values(label) selects none."""
    if m := re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.S):
        return m.group(1)
    if re.fullmatch(r"\s*label_values\(\s*\w+\s*\)\s*", query):
        return ""
    if m := re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S):
        return m.group(1)
    return query


def panels(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in node.get("panels") or ():
        yield panel
        yield from panels(panel)  # a row's panels


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    out = []
    for panel in panels(dashboard):
        for target in panel.get("targets") or ():
            out.append((f"panel {panel.get('title')!r} {target.get('refId')}", str(target.get("expr") or "")))
    for variable in dashboard.get("templating", {}).get("list") or ():
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        for q in {str(text or ""), str(variable.get("definition") or "")} - {""}:
            out.append((f"variable {variable['name']!r}", variable_query(q)))
    return out


def results(category: str, *runs: tuple[float, str, dict[str, float]]) -> list[tuple[str, dict[str, Any]]]:
    """(category, result) of runs that ended ``days`` ago with a verdict and values."""
    now = datetime.now(UTC)
    out = []
    for i, (days, verdict, values) in enumerate(runs):
        result: dict[str, Any] = {
            "time": (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "workflow": {"namespace": "nvcre", "name": "wf", "uid": f"{category}-{i}"},
            "groupSize": 2,
            "verdict": verdict,
            "values": values,
        }
        if verdict == "Failed":
            result.update(reason="ThresholdViolation", cause="ThresholdViolated", message="slow")
        out.append((category, result))
    return out


def record(node: str, *runs: tuple[str, dict[str, Any]]) -> Obj:
    """A NodeRecord with ``runs`` folded in, oldest first, by the record's own fold."""
    status: dict[str, Any] | None = None
    for category, result in runs:
        status = fold(status, category, [result], datetime.now(UTC))
    return {"metadata": {"name": node, "resourceVersion": "1"}, "spec": {"nodeName": node}, "status": status}


class Records:
    """The NodeRecord informer's surface the manager's collector reads."""

    def __init__(self, *records: Obj) -> None:
        self.records = list(records)

    def items(self, namespace: str | None = None) -> list[Obj]:
        return self.records

    def add_handler(self, handler: EventHandler) -> None:
        pass


@pytest.fixture
def exported() -> Iterator[dict[str, int]]:
    """The families of the manager's /metrics body, by name, with their number of samples, while
    the manager's NodeRecord collector watches the records of three nodes: one that passed, then
    failed below its baseline; one that passed twice; one with a training run."""
    all_reduce = "communication/nccl-all-reduce"
    slow = record(
        "gpu-node-007",
        *results(
            all_reduce,
            (20, "Passed", {"busBandwidthGBps": 480.0}),
            (10, "Passed", {"busBandwidthGBps": 490.0}),
            (5, "Failed", {"busBandwidthGBps": 400.0}),
        ),
    )
    fine = record(
        "gpu-node-001",
        *results(
            all_reduce, (2, "Passed", {"busBandwidthGBps": 487.7}), (1, "Passed", {"busBandwidthGBps": 489.1})
        ),
    )
    training = record(
        "gpu-node-002",
        *results("workloadrun/llama", (1, "Passed", {"goodputRatio": 0.91, "avgStepTimeSec": 1.2})),
    )
    NODE_RECORDS.watch(Records(slow, fine, training))
    try:
        body = probes.metrics_text().decode()
    finally:
        NODE_RECORDS.watch(Records())
    yield {family.name: len(family.samples) for family in text_string_to_metric_families(body)}


def test_the_dashboard_is_valid_json_with_queries() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "nvcre-fleet"
    assert len(list(panels(dashboard))) >= 5
    for where, expr in queries(dashboard):
        assert metric_names(expr), f"{where}: no metric in {expr!r}"


def test_every_metric_the_dashboard_queries_is_exported(exported: dict[str, int]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    unknown = {
        where: sorted(metric_names(expr) - set(exported))
        for where, expr in queries(dashboard)
        if metric_names(expr) - set(exported)
    }
    assert unknown == {}, f"queried but not on /metrics: {unknown}"
    used = {name for _, expr in queries(dashboard) for name in metric_names(expr)}
    assert all(exported[name] > 0 for name in used if name.startswith("nvcre_node_")), {
        name: exported[name] for name in used
    }
    # the panels the dashboard promises
    assert {
        "nvcre_node_last_value",
        "nvcre_node_bus_bandwidth_vs_baseline_percent",
        "nvcre_node_failures_last_30_days",
        "nvcre_node_last_certified_timestamp_seconds",
        "nvcre_node_last_verdict",
    } <= used


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('max by (node, category) (nvcre_node_last_value{key="busBandwidthGBps", node=~"$node"})', {"nvcre_node_last_value"}),
        ("count(time() - max by (node) (a_b) > 30 * 86400) or vector(0)", {"a_b"}),
        ("sum(rate(x_total[5m])) by (le) / ignoring(le) y offset 1h", {"x_total", "y"}),
        ('label_replace(up{job="a"}, "dst", "$1", "src", "(.*)")', {"up"}),
        ("topk(30, time() - max without (pod) (z))", {"z"}),
    ],
)  # fmt: skip
def test_metric_names_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_an_unexported_metric_is_caught(exported: dict[str, int]) -> None:
    assert metric_names("max by (node) (nvcre_node_bandwidth_gbps)") - set(exported) == {
        "nvcre_node_bandwidth_gbps"
    }
