"""The per-node gauges on the real manager's /metrics: after a Workflow ends and the manager writes
its nodes' NodeRecords, each node's last values, verdict, last certified time and failures are
served, from the records; a restarted manager serves the same values as soon as it is ready.

As in test_node_records, the test plays Kubeflow Trainer and the measurement controller; the
Workflow, Job and NodeRecord writers and the gauges are the manager's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lightkube import Client
from prometheus_client.parser import text_string_to_metric_families

from nvcre import resources
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.fleet.metrics import record_samples
from nvcre.testing.builders import new_pool
from nvcre.testing.inspect import jobs_of, wait_true
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.measured import BANDWIDTH, complete_bandwidth, finish
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import workflow

Gauges = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Samples by (metric, labels but node)."""
BASELINE = ("nvcre_node_baseline_value", (("category", "workflow/gauges"), ("key", "busBandwidthGBps")))
VS_BASELINE = ("nvcre_node_bus_bandwidth_vs_baseline_percent", ())


def run_pairs(kube: Client, namespace: str, pool: str, name: str) -> dict[str, Any]:
    """A Workflow of two 2-node groups with a bus bandwidth threshold (> 400): group-0's Job ends
    at 487.70 GB/s, group-1's at 198.30; the ended (Failed) Workflow."""
    job_spec = {**BANDWIDTH, "thresholds": {"busBandwidthGBps": "value > 400"}}
    body = workflow(name, namespace, pool, 2, job_spec=job_spec, orchestration={"isolation": "Off"})
    kube.create(resources.Workflow.from_dict(body))
    jobs = [f"{name}-group-0-iter-1", f"{name}-group-1-iter-1"]
    wait_for(lambda: sorted(jobs_of(kube, namespace, name)) == jobs, 60, what=f"the Jobs of {name}")
    for job, bus in zip(jobs, (["20.61", "487.70"], ["198.30"]), strict=True):
        finish(kube, namespace, job)
        complete_bandwidth(kube, namespace, job, bus)
    return wait_true(kube, resources.Workflow, name, namespace, "Failed")


def records(kube: Client, nodes: list[str]) -> list[dict[str, Any]]:
    """The nodes' NodeRecords once each holds a result."""

    def read() -> list[dict[str, Any]] | None:
        found = {r.metadata.name: r.to_dict() for r in kube.list(resources.NodeRecord)}
        held = [found.get(n) or {} for n in nodes]
        return held if all((r.get("status") or {}).get("categories") for r in held) else None

    return wait_for(read, 60, what=f"the records of {nodes}")


def expected(passed: bool, category: str, end: str) -> Gauges:
    """A node's gauges after one run of group-0 (passed at 487.70 GB/s) and group-1 (failed at
    198.30 GB/s); the baseline's are the record's rules' (``from_records``)."""
    when = parse_time(end).timestamp()
    out: Gauges = {
        ("nvcre_node_last_value", (("category", category), ("key", "busBandwidthGBps"))): 487.7
        if passed
        else 198.3,
        ("nvcre_node_last_value", (("category", category), ("key", "algBandwidthGBps"))): 260.11
        if passed
        else 105.76,
        ("nvcre_node_last_verdict", (("category", category),)): 1.0 if passed else 0.0,
        ("nvcre_node_last_result_timestamp_seconds", (("category", category),)): when,
        ("nvcre_node_failures_last_30_days", ()): 0.0 if passed else 1.0,
        ("nvcre_node_consecutive_failures", ()): 0.0 if passed else 1.0,
    }
    if passed:
        out[("nvcre_node_last_certified_timestamp_seconds", ())] = when
    return out


def from_records(kube: Client, nodes: list[str]) -> dict[str, Gauges]:
    """What nvcre.fleet.metrics makes of the nodes' records (once each holds a result)."""
    out: dict[str, Gauges] = {n: {} for n in nodes}
    for family, labels, value in record_samples(records(kube, nodes), datetime.now(UTC)):
        named = dict(zip(family.labels, labels, strict=True))
        node = named.pop("node")
        out[node][(family.name, tuple(sorted(named.items())))] = value
    return out


def by_node(manager: ManagerProcess, nodes: list[str]) -> dict[str, Gauges]:
    """Each node's nvcre_node_* samples on /metrics (labels but ``node``)."""
    out: dict[str, Gauges] = {n: {} for n in nodes}
    for family in text_string_to_metric_families(manager.metrics()):
        for s in family.samples:
            node = s.labels.get("node")
            if s.name.startswith("nvcre_node_") and node in out:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "node"))
                out[node][(s.name, labels)] = s.value
    return out


def test_the_manager_serves_each_nodes_gauges_from_its_record_and_again_after_a_restart(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess
) -> None:
    pool, nodes = new_pool(gpu_nodes, 4)
    wf = run_pairs(kube, namespace, pool, "gauges")
    passed = next(g["nodes"] for g in wf["status"]["orchestration"]["groups"] if g["name"] == "group-0")
    end = next(c for c in wf["status"]["conditions"] if c["type"] == "Failed")["lastTransitionTime"]
    want = from_records(kube, nodes)
    for node in nodes:
        mine = expected(node in passed, "workflow/gauges", end)
        assert {k: v for k, v in want[node].items() if k in mine} == mine, node
        assert set(want[node]) - set(mine) <= {BASELINE, VS_BASELINE}, node

    wait_for(lambda: by_node(manager, nodes) == want, 30, what="the nodes' gauges on /metrics")

    # A restarted manager serves them as soon as it is ready: they come from the records.
    manager.kill()
    manager.start()
    assert by_node(manager, nodes) == want
