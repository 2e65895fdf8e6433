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
    late = job(None, bandwidth=config, succeeded_ago=timedelta(minutes=6))
    assert judge(late, running) == Verdict(
        True,
        "MeasurementUnavailable",
        "No final bandwidth data: the bandwidth measurement did not finish within 5m0s. "
        "Set bandwidthMeasurement.allowMissingData to make it informational",
    )


# --- no data is not a pass ------------------------------------------------------------------------

UNAVAILABLE_HINT = ". Set bandwidthMeasurement.allowMissingData to make it informational"


def with_status(measurement: dict[str, Any], **status: Any) -> dict[str, Any]:
    measurement["status"].update(status)
    return measurement


@pytest.mark.parametrize(
    ("name", "measurement", "why"),
    [
        (
            "no row recognised, the log's last lines quoted",
            with_status(
                bm([], reason="NoDataCollected"),
                linesRead=3,
                logTail=["# nThread 1 nGpus 1", "", "mpirun noticed that process rank 3 exited on signal 9"],
            ),
            "no nccl-tests row was recognised in the launcher's log in 3 lines; the log ends: "
            "# nThread 1 nGpus 1 | mpirun noticed that process rank 3 exited on signal 9",
        ),
        (
            "the log could not be read",
            bm([], reason="LogsUnavailable"),
            "the launcher's log could not be read ()",
        ),
        (
            "a table cut short",
            with_status(
                bm(["20.00", "40.00"]),
                complete=False,
                incompleteReason="the table stopped at 16 B before the footer",
            ),
            "the nccl-tests table is incomplete: the table stopped at 16 B before the footer",
        ),
    ],
)
def test_a_measurement_without_final_data_fails(name: str, measurement: dict[str, Any], why: str) -> None:
    config = {"logProfileRef": "nccl-bandwidth"}
    assert judge(job(None, bandwidth=config), measurement) == Verdict(
        True, "MeasurementUnavailable", f"No final bandwidth data: {why}{UNAVAILABLE_HINT}"
    ), name


def test_allow_missing_data_passes_saying_so_but_never_waives_a_threshold() -> None:
    config = {"logProfileRef": "nccl-bandwidth", "allowMissingData": True}
    empty = bm([], reason="NoDataCollected")
    assert judge(job(None, bandwidth=config), empty) == Verdict(
        False,
        "MeasurementsChecked",
        "No performance thresholds set; no nccl-tests row was recognised in the launcher's log "
        "(allowMissingData: informational)",
    )
    assert judge(job({"busBandwidthGBps": "value >= 1"}, bandwidth=config), empty) == Verdict(
        True,
        "MeasurementUnavailable",
        "No final value for threshold(s) [busBandwidthGBps]: no nccl-tests row was recognised in the "
        "launcher's log",
    )


def test_corruption_and_failures_fail_whatever_the_thresholds_say() -> None:
    config = {"logProfileRef": "nccl-bandwidth", "allowMissingData": True}
    limits = {"busBandwidthGBps": "value >= 1"}
    bounds = with_status(bm(["480.00"]), outOfBounds={"count": 108, "status": "FAILED"})
    assert judge(job(limits, bandwidth=config), bounds) == Verdict(
        True,
        "DataCorruption",
        "nccl-tests reported Out of bounds values : 108 FAILED: the results are corrupted, whatever the bandwidth",
    )
    failures = with_status(
        bm(["480.00"]),
        failureLines={
            "count": 39,
            "lines": ["host-1: Test NCCL failure common.cu:1204 'remote process exited'"],
        },
    )
    assert judge(job(limits, bandwidth=config), failures) == Verdict(
        True,
        "FailuresLogged",
        "the launcher's log reports 39 NCCL/CUDA failure line(s): "
        "host-1: Test NCCL failure common.cu:1204 'remote process exited'",
    )


@pytest.mark.parametrize(
    ("ranks", "hosts", "message"),
    [
        (
            1,
            ["node-a"],
            "the nccl-tests log shows a single rank, but the group has 2 nodes: "
            "it measured no communication between them",
        ),
        (
            8,
            ["node-a"],
            "the nccl-tests log shows ranks on 1 host(s) (node-a), but the group has 2 nodes: "
            "it is not a measurement across them",
        ),
        (16, ["node-a", "node-b"], None),
    ],
)
def test_a_log_from_fewer_hosts_than_the_group_measures_no_link(
    ranks: int, hosts: list[str], message: str | None
) -> None:
    measurement = with_status(bm(["267.00"]), ranks=ranks, hosts=hosts)
    verdict = judge(
        job({"busBandwidthGBps": "value >= 100"}, bandwidth={"logProfileRef": "nccl-bandwidth"}, nodes="a,b"),
        measurement,
    )
    if message is None:
        assert verdict.failed is False
    else:
        assert verdict == Verdict(True, "MeasurementUnavailable", message)


# --- the expected-performance floor ----------------------------------------------------------------

EXPECTED = {
    "floorFraction": 0.8,
    "figures": [
        {
            "key": "busBandwidthGBps",
            "value": "487.09",
            "source": "AWS p5 EFA",
            "row": "h100/aws/all_reduce/2-nodes",
        }
    ],
}


def expecting(limits: dict[str, str] | None = None, **expected: Any) -> dict[str, Any]:
    j = job(limits, bandwidth={"logProfileRef": "nccl-bandwidth"}, nodes="a,b")
    j["spec"]["expectedPerformance"] = {**EXPECTED, **expected}
    return j


def test_no_threshold_is_judged_against_the_expected_floor() -> None:
    slow = judge(expecting(), bm(["191.41"]))
    assert slow == Verdict(
        True,
        "ThresholdViolated",
        "busBandwidthGBps: measured 191.41 GB/s, expected 487.09 GB/s (AWS p5 EFA), floor 389.67 GB/s "
        "(80% of expected; row h100/aws/all_reduce/2-nodes)",
        "BelowExpected",
    )
    assert verdicts.failed_nodes(expecting(), slow) == [
        {"name": n, "reason": "ThresholdViolation", "cause": "BelowExpected", "message": slow.message}
        for n in "ab"
    ]
    assert judge(expecting(), bm(["467.92"])) == Verdict(
        False,
        "ThresholdsMet",
        "busBandwidthGBps: measured 467.92 GB/s, expected 487.09 GB/s (AWS p5 EFA), floor 389.67 GB/s "
        "(80% of expected; row h100/aws/all_reduce/2-nodes)",
    )


def test_an_explicit_threshold_wins_and_a_zero_fraction_turns_the_floor_off() -> None:
    assert judge(expecting({"busBandwidthGBps": "value >= 100"}), bm(["191.41"])) == Verdict(
        False, "ThresholdsMet", "All performance thresholds satisfied"
    )
    assert judge(expecting(floorFraction=0), bm(["191.41"])).reason == "MeasurementsChecked"


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


def test_only_groups_with_enough_peers_of_their_shape_are_compared() -> None:
    """An isolation re-test across domains has no peers of its shape: the rule judged nothing."""
    iteration = [Sample(f"group-{i}", ("all_reduce", 2, 1), 480.0, judged=False) for i in range(3)]
    same = Sample("isolate-0", ("all_reduce", 2, 1), 470.0)
    across = Sample("isolate-1", ("all_reduce", 2, 2), 400.0)
    assert outliers.compared([*iteration, same, across]) == {"isolate-0"}


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


def test_fraction_defaults_to_0_9() -> None:
    assert outliers.fraction_of(None) == 0.9
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
