"""The per-node record's rules (nvcre.fleet.records): a Workflow's result per node, folding
results into a record, the bound and the summary. Numbers are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nvcre.api.v1alpha1.noderecord import MAX_RESULTS, NodeRecord
from nvcre.fleet.records import category_of, fold, node_results, recorded

NOW = datetime(2026, 3, 31, 12, 0, 0, tzinfo=UTC)


def ended(kind: str, when: str, reason: str = "x") -> dict[str, Any]:
    return {
        "conditions": [
            {"type": kind, "status": "True", "reason": reason, "message": "", "lastTransitionTime": when}
        ]
    }


def workflow(**labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "cert-comm",
            "namespace": "nvcre",
            "uid": "wf-uid",
            "labels": labels,
            "ownerReferences": [
                {
                    "kind": "Certification",
                    "name": "cert",
                    "uid": "cert-uid",
                    "controller": True,
                    "apiVersion": "x",
                }
            ],
        },
        "status": ended("Failed", "2026-03-31T10:00:00Z"),
    }


def job(name: str, group: str, nodes: list[str], when: str, uid: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "nvcre",
            "uid": uid,
            "labels": {"nvcre.nvidia.com/group": group},
            "annotations": {"nvcre.nvidia.com/group-nodes": ",".join(nodes)},
        },
        "spec": spec,
        "status": ended("Succeeded", when),
    }


def bandwidth(job_uid: str, bus: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"nvcre.nvidia.com/job-uid": job_uid}},
        "status": {
            "results": [{"busBW": b, "algBW": str(float(b) / 2)} for b in bus],
            **ended("Complete", "2026-03-31T09:00:00Z", "JobSucceeded"),  # a final read
        },
    }


def test_category_of_a_catalog_workflow_a_workloadrun_and_a_lone_workflow() -> None:
    labels = {
        "nvcre.nvidia.com/category-domain": "communication",
        "nvcre.nvidia.com/category-variant": "nccl",
    }
    assert category_of(workflow(**labels)) == "communication/nccl"
    run = workflow()
    run["metadata"]["ownerReferences"][0].update(kind="WorkloadRun", name="my-run")
    assert category_of(run) == "workloadrun/my-run"
    alone = workflow()
    alone["metadata"]["ownerReferences"] = []
    assert category_of(alone) == "workflow/cert-comm"


def test_a_node_no_job_of_which_passed_is_never_recorded_as_passed() -> None:
    """The failed-nodes record could not be read (deleted, corrupt: no entries): the nodes of the
    failed Job are recorded with their group's failure, not as passes; the other pair passes."""
    failed_job = job("g1", "group-1", ["n2", "n3"], "2026-03-31T09:00:00Z", "u1")
    failed_job["status"] = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "WorkloadFailed",
                "message": "rank 0 exited",
                "lastTransitionTime": "2026-03-31T09:00:00Z",
            }
        ]
    }
    passed_job = job("g0", "group-0", ["n0", "n1"], "2026-03-31T09:00:00Z", "u0")
    results = node_results(workflow(), [passed_job, failed_job], [], [], [])
    assert {n: (r["verdict"], r.get("cause"), r.get("message")) for n, r in results.items()} == {
        "n0": ("Passed", None, None),
        "n1": ("Passed", None, None),
        "n2": ("Failed", "WorkloadFailed", 'Job "g1" failed: rank 0 exited'),
        "n3": ("Failed", "WorkloadFailed", 'Job "g1" failed: rank 0 exited'),
    }
    assert results["n2"]["reason"] == "WorkloadFailed"


def test_a_failed_pair_and_a_passed_pair_each_node_with_its_jobs_values_and_verdict() -> None:
    jobs = [
        job(
            "g0",
            "group-0",
            ["n0", "n1"],
            "2026-03-31T09:00:00Z",
            "u0",
            thresholds={"busBandwidthGBps": "value > 400"},
        ),
        job(
            "g1",
            "group-1",
            ["n2", "n3"],
            "2026-03-31T09:00:00Z",
            "u1",
            thresholds={"busBandwidthGBps": "value > 400"},
        ),
    ]
    bws = [bandwidth("u0", ["20.5", "487.7", "456.4"]), bandwidth("u1", ["10", "198.3"])]
    failed = [
        {"name": "n3", "reason": "ThresholdViolation", "cause": "ThresholdViolated", "message": "slow"},
        {"name": "n2", "reason": "ThresholdViolation", "cause": "ThresholdViolated", "message": "slow"},
    ]
    results = node_results(workflow(), jobs, bws, [], failed)
    assert sorted(results) == ["n0", "n1", "n2", "n3"]
    assert results["n0"] == {
        "time": "2026-03-31T10:00:00Z",
        "run": {"kind": "Certification", "namespace": "nvcre", "name": "cert", "uid": "cert-uid"},
        "workflow": {"namespace": "nvcre", "name": "cert-comm", "uid": "wf-uid"},
        "job": {"namespace": "nvcre", "name": "g0", "uid": "u0"},
        "group": "group-0",
        "groupSize": 2,
        "partners": ["n1"],
        "values": {"algBandwidthGBps": 243.85, "busBandwidthGBps": 487.7},  # the max of each column
        "thresholds": {"busBandwidthGBps": "value > 400"},
        "verdict": "Passed",
    }
    assert results["n3"]["values"] == {"algBandwidthGBps": 99.15, "busBandwidthGBps": 198.3}
    assert (results["n3"]["verdict"], results["n3"]["reason"], results["n3"]["cause"]) == (
        "Failed",
        "ThresholdViolation",
        "ThresholdViolated",
    )
    assert results["n3"]["partners"] == ["n2"]
    NodeRecord.model_validate(
        {
            "metadata": {"name": "n3"},
            "spec": {"nodeName": "n3"},
            "status": fold(None, "c", results.values(), NOW),
        }
    )


def failing(obj: dict[str, Any]) -> dict[str, Any]:
    """The Job with a failing verdict (it succeeded; its threshold failed it)."""
    obj["status"]["conditions"].append(
        {"type": "ValidationFailed", "status": "True", "reason": "ThresholdViolated", "message": ""}
    )
    return obj


def test_isolation_each_node_shows_the_job_that_agrees_with_its_verdict() -> None:
    """group-1 (n2, n3) fails; n2 is re-tested with n0 and passes, n3 with n1 and fails again:
    n3 shows its failed re-test, n2 the re-test that cleared it, and n1, a healthy partner lent
    to n3's failing re-test, keeps its own passing group's values."""
    jobs = [
        job("g0", "group-0", ["n0", "n1"], "2026-03-31T09:00:00Z", "u0"),
        failing(job("g1", "group-1", ["n2", "n3"], "2026-03-31T09:00:00Z", "u1")),
        job("iso0", "isolate-0", ["n0", "n2"], "2026-03-31T09:30:00Z", "u2"),
        failing(job("iso1", "isolate-1", ["n1", "n3"], "2026-03-31T09:30:00Z", "u3")),
    ]
    bws = [bandwidth(u, [b]) for u, b in (("u0", "490"), ("u1", "300"), ("u2", "495"), ("u3", "200.1"))]
    failed = [{"name": "n3", "reason": "ThresholdViolation", "cause": "ThresholdViolated", "message": "m"}]
    results = node_results(workflow(), jobs, bws, [], failed)
    shown = {
        n: (r["verdict"], r["job"]["name"], r["partners"], r["values"]["busBandwidthGBps"])
        for n, r in results.items()
    }
    assert shown == {
        "n0": ("Passed", "iso0", ["n2"], 495.0),  # its latest passed Job
        "n1": ("Passed", "g0", ["n0"], 490.0),  # not the failed re-test it was lent to
        "n2": ("Passed", "iso0", ["n0"], 495.0),  # cleared by its re-test
        "n3": ("Failed", "iso1", ["n1"], 200.1),  # failed again, with the re-test's value
    }


def test_expected_floors_and_goodput_values() -> None:
    expected = {
        "floorFraction": 0.8,
        "figures": [{"key": "busBandwidthGBps", "value": "487.09", "source": "", "row": ""}],
    }
    gp = {
        "metadata": {"labels": {"nvcre.nvidia.com/job-uid": "u0"}},
        "status": {
            "result": "0.950000",
            "avgStepTimeSec": "3.860000",
            **ended("Complete", "2026-03-31T09:00:00Z"),
        },
    }
    jobs = [job("g0", "group-0", ["n0"], "2026-03-31T09:00:00Z", "u0", expectedPerformance=expected)]
    [result] = node_results(workflow(), jobs, [], [gp], []).values()
    assert result["floors"] == {"busBandwidthGBps": 389.67}  # 0.8 x 487.09 = 389.672
    assert result["values"] == {"avgStepTimeSec": 3.86, "goodputRatio": 0.95}
    assert "partners" not in result and result["groupSize"] == 1


def test_a_workflow_not_ended_gives_no_result() -> None:
    running = workflow()
    running["status"] = {}
    assert (
        node_results(running, [job("g0", "group-0", ["n0"], "2026-03-31T09:00:00Z", "u0")], [], [], []) == {}
    )


def result(time: str, verdict: str, uid: str, bus: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "time": time,
        "workflow": {"namespace": "nvcre", "name": f"wf-{uid}", "uid": f"wf-{uid}"},
        "job": {"namespace": "nvcre", "name": f"j-{uid}", "uid": f"j-{uid}"},
        "verdict": verdict,
    }
    if bus is not None:
        out["values"] = {"busBandwidthGBps": bus}
    return out


BASELINE_480 = {
    "category": "comm",
    "groupSize": 0,
    "domains": 0,
    "key": "busBandwidthGBps",
    "value": 480.0,
    "results": 1,
}


def test_fold_is_idempotent_and_summarises() -> None:
    first = fold(None, "comm", [result("2026-02-01T00:00:00Z", "Passed", "a", 480.0)], NOW)
    assert first["summary"] == {
        "lastVerdict": "Passed",
        "lastResultTime": "2026-02-01T00:00:00Z",
        "lastCategory": "comm",
        "lastPassTime": "2026-02-01T00:00:00Z",
        "lastBusBandwidthGBps": 480.0,
        "failuresLast30Days": 0,
        "consecutiveFailures": 0,
        "baselines": [BASELINE_480],
    }
    assert fold(first, "comm", [result("2026-02-01T00:00:00Z", "Passed", "a", 480.0)], NOW) == first
    again = dict(result("2026-03-01T00:00:00Z", "Failed", "b"), job={"name": "j-a", "uid": "j-a"})
    assert recorded(first, "comm", again)  # the same Job uid, whatever else
    second = fold(first, "comm", [result("2026-03-20T00:00:00Z", "Failed", "c", 200.0)], NOW)
    third = fold(second, "train", [result("2026-03-30T00:00:00Z", "Failed", "d")], NOW)
    assert [r["job"]["uid"] for r in third["categories"][0]["results"]] == ["j-a", "j-c"]
    assert third["summary"] == {
        "lastVerdict": "Failed",
        "lastResultTime": "2026-03-30T00:00:00Z",
        "lastCategory": "train",
        "lastPassTime": "2026-02-01T00:00:00Z",
        "lastBusBandwidthGBps": 200.0,  # the newest result with one (train's has none)
        "failuresLast30Days": 2,  # 03-20 and 03-30; the window starts 03-01 12:00
        "consecutiveFailures": 2,
        "baselines": [BASELINE_480],  # the failed 200 GB/s is no part of it
        "busBandwidthVsBaseline": -58.3,  # 200 / 480 - 1
    }


def test_the_window_counts_failures_of_the_last_30_days_only() -> None:
    old = result("2026-03-01T11:59:59Z", "Failed", "a")  # 30 days and 1 second before NOW
    edge = result("2026-03-01T12:00:00Z", "Failed", "b")  # exactly 30 days
    status = fold(None, "comm", [old, edge, result("2026-03-10T00:00:00Z", "Passed", "c")], NOW)
    assert (status["summary"]["failuresLast30Days"], status["summary"]["consecutiveFailures"]) == (1, 0)


def test_each_category_keeps_its_newest_results_only() -> None:
    days = [f"2026-01-{d:02d}T00:00:00Z" for d in range(1, MAX_RESULTS + 6)]  # 25 results
    status = fold(None, "comm", [result(t, "Passed", str(i)) for i, t in enumerate(days)], NOW)
    kept = status["categories"][0]["results"]
    assert len(kept) == MAX_RESULTS == 20
    assert (kept[0]["time"], kept[-1]["time"]) == ("2026-01-06T00:00:00Z", "2026-01-25T00:00:00Z")
    # An older result than every kept one (a Workflow still in the cluster) changes nothing.
    assert fold(status, "comm", [result("2025-12-01T00:00:00Z", "Failed", "old")], NOW) == status
