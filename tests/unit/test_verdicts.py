"""Threshold enforcement and the data verdicts (spec/measurements.md 4 and acceptance cases 6-9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nvcre.measure import outliers, thresholds, verdicts
from nvcre.measure.outliers import Sample
from nvcre.measure.thresholds import Verdict
from nvcre.measure.verdicts import Wait

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
VALID_KEYS = "[busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]"


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def job(
    limits: dict[str, str] | None = None,
    *,
    succeeded_ago: timedelta | None = timedelta(seconds=10),
    bandwidth: dict[str, Any] | None = None,
    timeout: str | None = None,
    nodes: str | None = None,
    uid: str = "job-uid",
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if limits is not None:
        spec["thresholds"] = limits
    if bandwidth is not None:
        spec["bandwidthMeasurement"] = bandwidth
    if timeout is not None:
        spec["measurementTimeout"] = timeout
    conditions = []
    if succeeded_ago is not None:
        conditions.append(
            {"type": "Succeeded", "status": "True", "lastTransitionTime": stamp(NOW - succeeded_ago)}
        )
    metadata: dict[str, Any] = {"name": "j", "uid": uid}
    if nodes is not None:
        metadata["annotations"] = {"nvcre.nvidia.com/group-nodes": nodes}
    return {"metadata": metadata, "spec": spec, "status": {"conditions": conditions}}


def complete(reason: str = "JobSucceeded") -> list[dict[str, Any]]:
    return [
        {"type": "Measuring", "status": "False", "reason": reason},
        {"type": "Complete", "status": "True", "reason": reason},
    ]


def bm(
    bus: list[str] | None = None,
    *,
    reason: str = "JobSucceeded",
    alg: list[str] | None = None,
    wrong: int | None = None,
    transport: list[str] | None = None,
    uid: str = "job-uid",
) -> dict[str, Any]:
    bus = bus or []
    alg = alg or ["1.00"] * len(bus)
    status: dict[str, Any] = {
        "results": [
            {"sizeBytes": 8 << i, "algBW": a, "busBW": b, "samples": 1}
            for i, (a, b) in enumerate(zip(alg, bus, strict=True))
        ],
        "conditions": complete(reason),
    }
    if wrong is not None:
        status["wrongValues"] = wrong
    if transport is not None:
        status["transport"] = transport
    return {
        "metadata": {"name": "j-bandwidth", "labels": {"nvcre.nvidia.com/job-uid": uid}},
        "status": status,
    }


def gm(**status: Any) -> dict[str, Any]:
    conditions = status.pop("conditions", complete())
    return {"metadata": {"name": "j-goodput"}, "status": {**status, "conditions": conditions}}


def judge(j: dict[str, Any], b: dict[str, Any] | None = None, g: dict[str, Any] | None = None) -> Any:
    return verdicts.judge(j, b, g, NOW)


# --- acceptance case 6: bandwidth pass and boundary ---------------------------------------------


def test_case_6_max_bus_bandwidth_meets_the_boundary() -> None:
    measurement = bm(["20.61", "487.70", "456.47"])
    assert thresholds.measured_values(measurement, None)["busBandwidthGBps"] == 487.70
    assert judge(job({"busBandwidthGBps": "value >= 487.7"}), measurement) == Verdict(
        False, "ThresholdsMet", "All performance thresholds satisfied"
    )
    failed = judge(job({"busBandwidthGBps": "value > 487.7"}), measurement)
    assert failed == Verdict(
        True,
        "ThresholdViolated",
        'Threshold "busBandwidthGBps" violated: measured 487.7000, expression: value > 487.7',
    )


def test_an_int_literal_compares_with_the_double_value() -> None:
    measurement = bm(["487.00"])
    assert judge(job({"busBandwidthGBps": "value >= 487"}), measurement).reason == "ThresholdsMet"
    assert judge(job({"busBandwidthGBps": "value == 487"}), measurement).reason == "ThresholdsMet"
    assert judge(job({"busBandwidthGBps": "value > 487"}), measurement).reason == "ThresholdViolated"


def test_alg_bandwidth_is_the_max_of_alg_bw() -> None:
    measurement = bm(["10.00", "20.00"], alg=["300.50", "200.00"])
    assert thresholds.measured_values(measurement, None) == {
        "busBandwidthGBps": 20.0,
        "algBandwidthGBps": 300.5,
    }


# --- acceptance case 7: violation message, ordering, failed nodes -------------------------------


def test_case_7_first_violation_by_key_and_the_group_nodes() -> None:
    limits = {"goodputRatio": "value >= 0.9", "avgStepTimeSec": "value <= 3.0"}
    j = job(limits, nodes="n2, n1,n2")
    decided = judge(j, None, gm(result="0.5", avgStepTimeSec="5"))
    message = 'Threshold "avgStepTimeSec" violated: measured 5.0000, expression: value <= 3.0'
    assert decided == Verdict(True, "ThresholdViolated", message)
    assert verdicts.failed_nodes(j, decided) == [
        {"name": "n1", "reason": "ThresholdViolation", "cause": "ThresholdViolated", "message": message},
        {"name": "n2", "reason": "ThresholdViolation", "cause": "ThresholdViolated", "message": message},
    ]


def test_failed_nodes_are_left_alone_when_the_job_already_names_some() -> None:
    j = job({"goodputRatio": "value >= 0.9"}, nodes="n1")
    j["status"]["failedNodes"] = [{"name": "n1", "reason": "HardwareFailureDetected"}]
    assert verdicts.failed_nodes(j, Verdict(True, "ThresholdViolated", "m")) is None
    assert verdicts.failed_nodes(job(nodes="n1"), Verdict(False, "ThresholdsMet", "m")) is None


# --- acceptance case 8: unknown keys, non-bool expressions --------------------------------------


def test_case_8_unknown_keys_fail_at_once_sorted() -> None:
    decided = judge(job({"zzzNotAKey": "value > 1", "aaaNotAKey": "value > 1"}), None)
    assert decided == Verdict(
        True,
        "UnknownThresholdKey",
        f"unknown threshold key(s) [aaaNotAKey, zzzNotAKey]; valid keys: {VALID_KEYS}",
    )


def test_case_8_a_non_bool_expression_is_invalid() -> None:
    decided = judge(job({"busBandwidthGBps": "value + 1"}), bm(["100.00"]))
    assert decided == Verdict(
        True, "InvalidThresholdExpression", 'Threshold "busBandwidthGBps": must evaluate to bool, got double'
    )


def test_a_syntax_error_is_invalid_and_sorts_with_violations() -> None:
    limits = {"busBandwidthGBps": "value >=", "goodputRatio": "value >= 0.9"}
    decided = judge(job(limits), bm(["100.00"]), gm(result="0.5"))
    assert decided.reason == "InvalidThresholdExpression"
    assert decided.message.startswith('Threshold "busBandwidthGBps": syntax error')


# --- acceptance case 9: measurement timeout ------------------------------------------------------


def test_case_9_missing_goodput_times_out_after_5m() -> None:
    measuring = gm(
        conditions=[{"type": "Measuring", "status": "True", "reason": "JobRunning"}], result="0.95"
    )
    limits = {"goodputRatio": "value >= 0.9"}
    assert judge(job(limits, succeeded_ago=timedelta(minutes=6)), None, measuring) == Verdict(
        True, "MeasurementTimeout", "Measurement data not available within 5m0s for keys: [goodputRatio]"
    )
    assert isinstance(judge(job(limits, succeeded_ago=timedelta(minutes=4)), None, measuring), Wait)


def test_timeout_lists_missing_keys_sorted_with_the_jobs_own_timeout() -> None:
    limits = {"goodputRatio": "value >= 0.9", "busBandwidthGBps": "value > 1"}
    decided = judge(job(limits, succeeded_ago=timedelta(minutes=11), timeout="10m"), None, None)
    assert decided.message == (
        "Measurement data not available within 10m0s for keys: [busBandwidthGBps goodputRatio]"
    )
    assert isinstance(judge(job(limits, succeeded_ago=timedelta(minutes=9), timeout="10m")), Wait)


@pytest.mark.parametrize("reason", ["NoDataCollected", "LogsUnavailable", "JobFailed"])
def test_only_job_succeeded_bandwidth_counts(reason: str) -> None:
    assert thresholds.measured_values(bm(["100.00"], reason=reason), None) == {}


def test_provisional_or_empty_bandwidth_does_not_count() -> None:
    provisional = bm(["100.00"])
    provisional["status"]["conditions"] = [{"type": "Measuring", "status": "True", "reason": "JobRunning"}]
    assert thresholds.measured_values(provisional, None) == {}
    assert thresholds.measured_values(bm([]), None) == {}


def test_goodput_values_need_complete_and_a_positive_value() -> None:
    values = thresholds.measured_values(
        None, gm(result="0.000000", avgTFLOPSPerGPU="139.250000", avgStepTimeSec="5.000000")
    )
    assert values == {"avgTFLOPsPerGPU": 139.25, "avgStepTimeSec": 5.0}


def test_a_measurement_of_an_earlier_attempt_does_not_count() -> None:
    limits = {"busBandwidthGBps": "value > 1"}
    assert isinstance(judge(job(limits), bm(["100.00"], uid="earlier")), Wait)


def test_no_thresholds_and_no_bandwidth_measurement_is_not_judged() -> None:
    assert judge(job(None), bm(["1.00"])) is None
    assert not verdicts.expects_verdict(job({}))


def test_a_job_that_did_not_succeed_is_never_judged() -> None:
    assert judge(job({"busBandwidthGBps": "value > 1"}, succeeded_ago=None), bm(["0.10"])) is None


# --- DataCorruption and UnexpectedTransport ------------------------------------------------------


def test_wrong_values_fail_whatever_the_bandwidth() -> None:
    decided = judge(job({"busBandwidthGBps": "value > 1"}), bm(["900.00"], wrong=3))
    assert decided == Verdict(
        True,
        "DataCorruption",
        "nccl-tests found 3 wrong values (#wrong columns): the results are corrupted, whatever the bandwidth",
    )
    assert (
        judge(job(None, bandwidth={"logProfileRef": "p"}), bm(["900.00"], wrong=1)).reason == "DataCorruption"
    )


def test_corruption_is_decided_before_goodput_arrives() -> None:
    decided = judge(job({"goodputRatio": "value > 0.5"}), bm(["900.00"], wrong=2), None)
    assert isinstance(decided, Verdict) and decided.reason == "DataCorruption"


def test_a_fallback_to_sockets_names_what_was_used() -> None:
    config = {"logProfileRef": "nccl-bandwidth", "expectedTransport": "AWS Libfabric"}
    decided = judge(
        job({"busBandwidthGBps": "value > 1"}, bandwidth=config), bm(["3.02"], transport=["Socket"])
    )
    assert decided == Verdict(True, "UnexpectedTransport", "NCCL used [Socket], expected [AWS Libfabric]")
    mixed = judge(job(None, bandwidth=config), bm(["400.00"], transport=["AWS Libfabric", "Socket"]))
    assert mixed.message == "NCCL used [AWS Libfabric, Socket], expected [AWS Libfabric]"
    silent = judge(job(None, bandwidth=config), bm(["400.00"]))
    assert (
        silent.message == "NCCL used no network transport (is NCCL_DEBUG=INFO set?), expected [AWS Libfabric]"
    )


def test_the_expected_transport_passes() -> None:
    config = {"logProfileRef": "nccl-bandwidth", "expectedTransport": "AWS Libfabric"}
    decided = judge(job(None, bandwidth=config), bm(["489.00"], transport=["AWS Libfabric"], wrong=0))
    assert decided == Verdict(
        False,
        "MeasurementsChecked",
        "No performance thresholds set; no corrupted results, transport [AWS Libfabric] as expected",
    )


def test_bandwidth_without_thresholds_waits_for_the_final_measurement() -> None:
    config = {"logProfileRef": "nccl-bandwidth"}
    running = bm(["100.00"])
    running["status"]["conditions"] = [{"type": "Measuring", "status": "True", "reason": "JobRunning"}]
    assert isinstance(judge(job(None, bandwidth=config), running), Wait)
    assert judge(job(None, bandwidth=config), bm([], reason="NoDataCollected")) == Verdict(
        False,
        "MeasurementsChecked",
        "No performance thresholds set; the bandwidth measurement collected no final data",
    )


# --- outliers -----------------------------------------------------------------------------------


def samples(values: list[float], size: int = 2) -> list[Sample]:
    return [Sample(f"group-{i}", ("all_reduce", size), v) for i, v in enumerate(values)]


def test_a_slow_group_is_a_bandwidth_outlier() -> None:
    found = outliers.bandwidth_outliers(samples([480.0, 144.0, 470.0, 490.0]), 0.8)
    assert found == [
        outliers.Outlier(
            "group-1",
            "BandwidthOutlier",
            "bus bandwidth 144.00 GB/s is below 0.8 of the median of its 3 peer groups (480.00 GB/s)",
        )
    ]


def test_outliers_need_three_groups_of_one_size_and_a_fraction() -> None:
    assert outliers.bandwidth_outliers(samples([480.0, 144.0]), 0.8) == []
    mixed = samples([480.0, 144.0]) + samples([470.0], size=4)
    assert outliers.bandwidth_outliers(mixed, 0.8) == []
    assert outliers.bandwidth_outliers(samples([480.0, 144.0, 470.0]), 0) == []


def test_the_boundary_is_not_an_outlier() -> None:
    assert outliers.bandwidth_outliers(samples([400.0, 500.0, 500.0]), 0.8) == []
    assert [o.group for o in outliers.bandwidth_outliers(samples([399.99, 500.0, 500.0]), 0.8)] == ["group-0"]


def test_a_group_that_failed_already_is_a_peer_but_not_flagged_again() -> None:
    group = [Sample("a", (2,), 100.0, judged=False), Sample("b", (2,), 500.0), Sample("c", (2,), 510.0)]
    assert outliers.bandwidth_outliers(group, 0.8) == []


def test_a_slow_step_time_is_an_outlier() -> None:
    found = outliers.step_time_outliers(samples([2.0, 2.1, 3.0]), 0.8)
    assert found == [
        outliers.Outlier(
            "group-2",
            "StepTimeOutlier",
            "step time 3.0000 s is slower than the median of its 2 peer groups (2.0500 s) "
            "by more than the fraction 0.8 allows",
        )
    ]
    assert outliers.step_time_outliers(samples([2.0, 2.1, 2.5]), 0.8) == []


def test_fraction_defaults_to_0_8() -> None:
    assert outliers.fraction_of(None) == 0.8
    assert outliers.fraction_of({"outlierFraction": 0}) == 0.0
    assert outliers.fraction_of({"outlierFraction": "0.5"}) == 0.5


def test_goodput_measurement_is_waited_for_until_complete() -> None:
    j = job(None)
    j["spec"]["goodputMeasurement"] = {"logProfileRef": "megatron-training"}
    running = gm(conditions=[{"type": "Measuring", "status": "True", "reason": "JobRunning"}])
    assert isinstance(judge(j, None, running), Wait)
    assert judge(j, None, gm(result="0.9")) == Verdict(
        False, "MeasurementsChecked", "No performance thresholds set; the goodput measurement is final"
    )
