"""``nvcre.fleet.overview``: a node's history with its trend, and the fleet's states by domain and
GPU type (docs/fleet-memory.md, "Commands"), on hand-worked numbers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from nvcre.fleet import overview

NOW = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
AWS_BLOCK = "topology.k8s.aws/network-node-layer-1"
H100 = "NVIDIA-H100-80GB-HBM3"
B200 = "NVIDIA-B200"


def result(time: str, verdict: str = "Passed", *, size: int = 2, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "time": time,
        "workflow": {"namespace": "nvcre", "name": "wf", "uid": "u-" + time},
        "groupSize": size,
        "verdict": verdict,
    }
    out.update(fields)
    return out


def bw(time: str, value: float, verdict: str = "Passed", **fields: Any) -> dict[str, Any]:
    return result(time, verdict, values={"busBandwidthGBps": value, "algBandwidthGBps": value / 2}, **fields)


def record(node: str, categories: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if categories is not None:
        status["categories"] = [{"name": name, "results": results} for name, results in categories.items()]
    return {"metadata": {"name": node}, "spec": {"nodeName": node}, "status": status}


def gpu_node(name: str, product: str = H100, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, **labels},
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
    }


# --- history -----------------------------------------------------------------------------------------

NCCL = "communication/nccl-all-reduce"
CERT = {"kind": "Certification", "namespace": "nvcre", "name": "fleet-nccl", "uid": "c1"}


def nccl_history() -> list[dict[str, Any]]:
    """Shape (2 nodes, 1 domain) but the fifth: (4 nodes, 1 domain)."""
    rack = {"run": CERT, "domains": ["rack-a"]}
    return [
        bw("2026-11-01T00:00:00Z", 480.0, group="group-0", partners=["n2"], **rack),
        bw("2026-11-02T00:00:00Z", 490.0, **rack),
        bw("2026-11-03T00:00:00Z", 470.0, **rack),
        bw(
            "2026-11-04T00:00:00Z",
            400.0,
            "Failed",
            reason="ThresholdViolation",
            cause="Regression",
            message="busbw 400 GB/s, 17 % below this node's baseline 480 GB/s (3 runs)",
            **rack,
        ),
        bw("2026-11-05T00:00:00Z", 450.0, size=4, **rack),  # another shape: no baseline
        bw("2026-11-06T00:00:00Z", 500.0, **rack),
    ]


def test_each_result_is_compared_with_the_median_of_the_passing_results_of_its_shape_before_it() -> None:
    rows = overview.history(record("n1", {NCCL: nccl_history()}))
    trends = [row["vsBaseline"].get("busBandwidthGBps") for row in rows]
    # 490/480-1 = +2.08 %; median(480, 490) = 485: 470/485-1 = -3.09 %; median(480, 490, 470) =
    # 480: 400/480-1 = -16.67 %; the 4-node result has nothing before it of its shape; the failed
    # 400 does not count: median(480, 490, 470) = 480 again, 500/480-1 = +4.17 %.
    assert trends == [None, 2.1, -3.1, -16.7, None, 4.2]
    assert rows[3]["baseline"] == {"busBandwidthGBps": {"value": 480.0, "results": 3}}
    assert rows[0]["baseline"] == {} and rows[0]["vsBaseline"] == {}


def test_the_baseline_is_of_the_latest_five_passing_results() -> None:
    values = [400.0, 410.0, 420.0, 430.0, 440.0, 450.0]  # the first falls out of the last one's five
    results = [bw(f"2026-11-0{i + 1}T00:00:00Z", v) for i, v in enumerate(values)]
    results.append(bw("2026-11-09T00:00:00Z", 462.0))
    last = overview.history(record("n1", {NCCL: results}))[-1]
    # median(410, 420, 430, 440, 450) = 430: 462/430-1 = +7.44 %
    assert last["baseline"] == {"busBandwidthGBps": {"value": 430.0, "results": 5}}
    assert last["vsBaseline"] == {"busBandwidthGBps": 7.4}


def test_step_time_trends_up_when_slower_and_rows_are_oldest_first_across_categories() -> None:
    train = [
        result("2026-11-01T12:00:00Z", values={"avgStepTimeSec": 2.0, "goodputRatio": 0.95}),
        result("2026-11-03T12:00:00Z", values={"avgStepTimeSec": 2.2, "goodputRatio": 0.9}),
    ]
    rows = overview.history(record("n1", {NCCL: nccl_history()[:3], "workloadrun/train": train}))
    assert [(r["time"][:13], r["category"]) for r in rows] == [
        ("2026-11-01T00", NCCL),
        ("2026-11-01T12", "workloadrun/train"),
        ("2026-11-02T00", NCCL),
        ("2026-11-03T00", NCCL),
        ("2026-11-03T12", "workloadrun/train"),
    ]
    assert rows[-1]["vsBaseline"] == {"avgStepTimeSec": 10.0}  # 2.2 / 2.0 - 1


def test_a_row_has_every_key_and_the_results_references_without_uids() -> None:
    first = overview.history(record("n1", {NCCL: nccl_history()}))[0]
    assert first == {
        "time": "2026-11-01T00:00:00Z",
        "category": NCCL,
        "run": {"kind": "Certification", "namespace": "nvcre", "name": "fleet-nccl"},
        "workflow": {"namespace": "nvcre", "name": "wf"},
        "job": None,
        "group": "group-0",
        "groupSize": 2,
        "domains": ["rack-a"],
        "partners": ["n2"],
        "values": {"algBandwidthGBps": 240.0, "busBandwidthGBps": 480.0},
        "vsBaseline": {},
        "baseline": {},
        "verdict": "Passed",
        "reason": None,
        "cause": None,
        "message": None,
    }


def test_a_record_without_status_has_no_rows() -> None:
    assert overview.history({"metadata": {"name": "n1"}}) == []


# --- states ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("results", "state"),
    [
        ([bw("2026-12-01T00:00:00Z", 480.0)], "certified"),
        ([bw("2026-11-04T12:00:00Z", 480.0)], "certified"),  # exactly 30 days: still recent
        ([bw("2026-11-04T11:59:59Z", 480.0)], "stale"),  # a second more
        (
            [
                bw("2026-10-01T00:00:00Z", 480.0),
                bw("2026-12-01T00:00:00Z", 300.0, "Failed", cause="ThresholdViolated"),
            ],
            "failing",
        ),
        ([bw("2026-12-01T00:00:00Z", 380.0, "Failed", cause="Regression")], "regressed"),
        (
            [bw("2026-09-01T00:00:00Z", 380.0, "Failed", cause="Regression")],
            "regressed",
        ),  # old failures stay failures
        (
            [
                bw("2026-12-01T00:00:00Z", 300.0, "Failed", cause="Regression"),
                bw("2026-12-02T00:00:00Z", 480.0),
            ],
            "certified",
        ),
        (
            [
                bw("2026-12-01T00:00:00Z", 490.0),
                bw("2026-12-01T00:00:00Z", 400.0, "Failed", cause="Regression"),
            ],
            "regressed",
        ),  # two runs ended in one second (times are whole seconds): the later written is newest
        ([result("not a time")], "stale"),
        ([], "never"),
    ],
)
def test_a_node_is_filed_by_its_newest_result(results: list[dict[str, Any]], state: str) -> None:
    assert overview.state_of(record("n1", {NCCL: results}), NOW, 30) == state


def test_the_newest_result_is_the_newest_of_every_category() -> None:
    rec = record(
        "n1",
        {
            NCCL: [bw("2026-12-01T00:00:00Z", 480.0)],
            "workloadrun/train": [result("2026-12-02T00:00:00Z", "Failed", cause="WorkloadFailed")],
        },
    )
    assert overview.state_of(rec, NOW, 30) == "failing"
    assert overview.newest(rec) == ("workloadrun/train", rec["status"]["categories"][1]["results"][0])
    assert overview.state_of(None, NOW, 30) == "never"
    assert overview.state_of(record("n1"), NOW, 30) == "never"


# --- domains and GPU types ------------------------------------------------------------------------


def test_the_domain_is_the_results_single_domain_else_the_nodes_block_then_clique_label() -> None:
    node = gpu_node("n1", **{AWS_BLOCK: "nn-b", "nvidia.com/gpu.clique": "cl.1"})
    assert overview.node_domain({"domains": ["nn-a"]}, node) == "nn-a"
    assert overview.node_domain({"domains": ["nn-a", "nn-b"]}, node) == "nn-b"  # spanned two
    assert overview.node_domain(None, node) == "nn-b"
    onprem = {"metadata": {"name": "n2", "labels": {AWS_BLOCK: "ignored", "nvidia.com/gpu.clique": "cl.1"}}}
    assert overview.node_domain(None, onprem) == "cl.1"  # on-prem has no block label
    assert overview.node_domain(None, {"metadata": {"name": "n3"}}) == "unknown"
    assert overview.node_domain({"domains": ["nn-a", "nn-b"]}, None) == "unknown"


def test_the_gpu_type_is_the_product_label() -> None:
    assert overview.gpu_type(gpu_node("n1")) == H100
    assert overview.gpu_type({"metadata": {"name": "n1"}}) == "unknown"
    assert overview.gpu_type(None) == "unknown"


# --- the fleet ---------------------------------------------------------------------------------------


def fleet_inputs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    records = [
        record("a", {NCCL: [bw("2026-12-01T00:00:00Z", 480.0, domains=["rack-1"])]}),
        record(
            "b",
            {
                NCCL: [
                    bw("2026-12-02T00:00:00Z", 200.0, "Failed", cause="BandwidthOutlier", domains=["rack-1"])
                ]
            },
        ),
        record(
            "c",
            {
                NCCL: [
                    bw("2026-11-20T00:00:00Z", 480.0),
                    bw("2026-12-03T00:00:00Z", 400.0, "Failed", cause="Regression"),
                ]
            },
        ),
        record("d", {NCCL: [bw("2026-10-01T00:00:00Z", 480.0)]}),
        record("f", {}),  # a record without results
        record("gone", {NCCL: [bw("2026-12-01T00:00:00Z", 480.0, domains=["rack-1"])]}),
    ]
    nodes = [
        gpu_node("a"),
        gpu_node("b"),
        gpu_node("c", **{AWS_BLOCK: "rack-2"}),
        gpu_node("d", B200, **{AWS_BLOCK: "rack-2"}),
        gpu_node("e", B200),  # no record
        gpu_node("f"),
    ]
    return records, nodes


def test_the_fleet_counts_each_node_once_overall_by_domain_and_by_gpu_type() -> None:
    records, nodes = fleet_inputs()
    doc = overview.fleet(records, nodes, NOW, 30)
    states = {n["name"]: n["state"] for n in doc["nodes"]}
    assert states == {
        "a": "certified",
        "b": "failing",
        "c": "regressed",
        "d": "stale",
        "e": "never",
        "f": "never",
        "gone": "certified",
    }
    assert doc["staleAfterDays"] == 30
    assert doc["total"] == {"nodes": 7, "certified": 2, "failing": 1, "regressed": 1, "stale": 1, "never": 2}
    zero = dict.fromkeys(overview.STATES, 0)
    assert doc["byDomain"] == [
        {"domain": "rack-1", "nodes": 3, **zero, "certified": 2, "failing": 1},
        {"domain": "rack-2", "nodes": 2, **zero, "regressed": 1, "stale": 1},
        {"domain": "unknown", "nodes": 2, **zero, "never": 2},
    ]
    assert doc["byGpuType"] == [
        {"gpuType": B200, "nodes": 2, **zero, "stale": 1, "never": 1},
        {"gpuType": H100, "nodes": 4, **zero, "certified": 1, "failing": 1, "regressed": 1, "never": 1},
        {"gpuType": "unknown", "nodes": 1, **zero, "certified": 1},
    ]


def test_each_fleet_node_says_why() -> None:
    records, nodes = fleet_inputs()
    by_name = {n["name"]: n for n in overview.fleet(records, nodes, NOW)["nodes"]}
    assert by_name["c"] == {
        "name": "c",
        "state": "regressed",
        "domain": "rack-2",
        "gpuType": H100,
        "nodeFound": True,
        "lastCategory": NCCL,
        "lastResultTime": "2026-12-03T00:00:00Z",
        "lastPassTime": "2026-11-20T00:00:00Z",
        "cause": "Regression",
    }
    assert by_name["e"] == {
        "name": "e",
        "state": "never",
        "domain": "unknown",
        "gpuType": B200,
        "nodeFound": True,
        "lastCategory": None,
        "lastResultTime": None,
        "lastPassTime": None,
        "cause": None,
    }
    assert (by_name["gone"]["nodeFound"], by_name["gone"]["gpuType"]) == (False, "unknown")
    assert by_name["a"]["cause"] is None


def test_an_empty_fleet() -> None:
    assert overview.fleet([], [], NOW) == {
        "staleAfterDays": 30,
        "total": {"nodes": 0, **dict.fromkeys(overview.STATES, 0)},
        "byDomain": [],
        "byGpuType": [],
        "nodes": [],
    }


def test_the_newest_rows_trend_is_the_records_vs_baseline() -> None:
    """The history's last row and the record's summary (``kubectl get nvnr`` VS-BASELINE) agree."""
    from nvcre.fleet.records import summary

    rec = record("n1", {NCCL: nccl_history()[:4]})
    written = summary(rec["status"]["categories"], NOW)
    assert written["busBandwidthVsBaseline"] == overview.history(rec)[-1]["vsBaseline"]["busBandwidthGBps"]
    assert written["busBandwidthVsBaseline"] == -16.7
