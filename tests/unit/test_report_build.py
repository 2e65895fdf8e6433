"""The report builders and renderers (cli.md 4.5) on the objects nvcre writes."""

from __future__ import annotations

import json
from typing import Any

from nvcre.report.build import CertificationObjects, WorkflowObjects, certification_report
from nvcre.report.text import render_text

SPEC_EXAMPLE = """\
╔════════════════════════════════════════════════════════════════╗
║                      Certification Report                      ║
╚════════════════════════════════════════════════════════════════╝

  Name:      cert-threshold
  Platform:  onprem
  GPU:       h100
  Nodes:     2

┌────────────────────────────────────────────────────────────────┐
│  training/nemotron5-8b                                         │
├────────────────────────────────────────────────────────────────┤
│  Status:    Failed                                             │
│  Reason:    1 groups failed across 1 iterations                │
│  Runtime:   10m 0s                                             │
│  Scale:     full-scale                                         │
│  Nodes/Job: 2                                                  │
│  Jobs:      1                                                  │
│                                                                │
│  Failed Groups:                                                │
│      ✗  group-0 (2 nodes)                                      │
│         Threshold "goodputRatio" violated: measured 0.8800,... │
│           - node001                                            │
│           - node002                                            │
└────────────────────────────────────────────────────────────────┘

┌────────────────────────────────────────────────────────────────┐
│  Summary                                                       │
├────────────────────────────────────────────────────────────────┤
│  Categories:   0/1 passed                                      │
│  Failed Nodes: none                                            │
│  Result:       FAILED                                          │
└────────────────────────────────────────────────────────────────┘
"""


def _condition(kind: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": at}


def _spec_example() -> CertificationObjects:
    """The objects behind cli.md 4.5's example (failed nodes not recorded, as in the reference)."""
    cert = {
        "metadata": {"name": "cert-threshold", "namespace": "ns"},
        "spec": {"categories": [{"domain": "training", "variant": "nemotron5-8b"}]},
        "status": {
            "conditions": [_condition("Failed", "WorkflowFailed", "x", "2026-01-01T00:10:00Z")],
            "categoryStatuses": [
                {
                    "domain": "training",
                    "variant": "nemotron5-8b",
                    "status": "Failed",
                    "workflowRef": {"name": "wf"},
                }
            ],
        },
    }
    workflow = {
        "metadata": {"name": "wf", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"orchestration": {}},
        "status": {
            "conditions": [
                _condition(
                    "Failed",
                    "JobValidationFailed",
                    "1 groups failed across 1 iterations",
                    "2026-01-01T00:10:00Z",
                )
            ],
            "orchestration": {
                "totalNodes": 2,
                "nodesPerJob": 2,
                "totalGroups": 1,
                "detectedPlatform": "onprem",
                "detectedGPUArchitecture": "h100",
                "groups": [
                    {
                        "name": "group-0",
                        "nodes": ["node001", "node002"],
                        "phase": "Failed",
                        "jobRef": {"name": "wf-job"},
                    }
                ],
            },
        },
    }
    job = {
        "metadata": {"name": "wf-job", "labels": {"nvcre.nvidia.com/group": "group-0"}},
        "spec": {"thresholds": {"goodputRatio": "value >= 0.95"}},
        "status": {
            "conditions": [
                _condition(
                    "ValidationFailed",
                    "ThresholdViolated",
                    'Threshold "goodputRatio" violated: measured 0.8800, expression: value >= 0.95',
                    "2026-01-01T00:10:00Z",
                )
            ]
        },
    }
    return CertificationObjects(cert, [WorkflowObjects(workflow, [job])])


def test_the_spec_example_renders_exactly() -> None:
    assert render_text(certification_report(_spec_example())) == SPEC_EXAMPLE


# --- on the objects of the goldens (made by the controllers' pure functions) --------------------

import copy  # noqa: E402
import xml.etree.ElementTree as ET  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from nvcre.cli.report_io import report_exit_errors, results_json  # noqa: E402
from nvcre.report.build import normalise_phase, violations  # noqa: E402
from nvcre.report.junit import render_junit  # noqa: E402
from nvcre.report.model import FailureLog, Report  # noqa: E402
from nvcre.report.text import LOG_LINES, TEXT, WIDTH, fit, human_size  # noqa: E402
from tests.golden.report_inputs import report_of  # noqa: E402

GOLDEN = Path(__file__).parents[1] / "golden" / "report"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "input.yaml").is_file())


def _input(case: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((GOLDEN / case / "input.yaml").read_text())
    return data


@pytest.mark.parametrize("case", CASES)
def test_every_box_line_is_66_columns(case: str) -> None:
    text = render_text(report_of(_input(case)))
    boxed = [line for line in text.splitlines() if line and line[0] in "╔║╚┌│├└"]
    assert boxed and {len(line) for line in boxed} == {WIDTH}, text


def test_in_progress_is_running() -> None:
    assert normalise_phase("InProgress") == "Running"
    assert normalise_phase(None) == "Pending"
    report = report_of(_input("running"))
    assert [c.status for c in report.categories] == ["Running", "Pending"]
    assert report.result == "RUNNING"
    assert report_exit_errors([report]) == ['certification "cert-running" is still running']


def test_an_excluded_node_makes_a_passed_run_incomplete_never_passed() -> None:
    data = _input("excluded-node")
    report = report_of(data)
    assert report.result == "INCOMPLETE" and report.excluded_nodes == ("gpu-node-002",)
    assert report_exit_errors([report]) == []  # exit 0: the verdict is in the report (cli.md 14.12)
    for objects in data["workflows"]:
        objects["workflow"]["status"]["orchestration"].pop("excludedNodes")
    assert report_of(data).result == "PASSED"


def test_a_failed_run_with_excluded_nodes_is_failed() -> None:
    data = _input("threshold-violation")
    data["workflows"][0]["workflow"]["status"]["orchestration"]["excludedNodes"] = ["gpu-node-009"]
    report = report_of(data)
    assert report.result == "FAILED"
    assert report_exit_errors([report]) == ['certification "cert-threshold" failed']


def test_failed_nodes_name_the_measured_value_against_the_threshold() -> None:
    report = report_of(_input("threshold-violation"))
    assert [(f.node, f.reason, f.detail, f.group) for f in report.failed_nodes] == [
        ("gpu-node-002", "ThresholdViolation", "busbw 195.7 GB/s < 400", "group-1"),
        ("gpu-node-003", "ThresholdViolation", "busbw 195.7 GB/s < 400", "group-1"),
    ]
    text = render_text(report)
    assert "│  Failed Nodes: gpu-node-002  busbw 195.7 GB/s < 400 (group-1)  │" in text


def test_low_marks_only_the_group_below_the_threshold() -> None:
    (category,) = report_of(_input("threshold-violation")).categories
    assert [(g.group, g.low, g.passed) for g in category.bandwidth_groups] == [
        ("group-0", False, True),
        ("group-1", True, False),
    ]
    assert "│    ✗  group-1  195.68 GB/s  LOW" in render_text(report_of(_input("threshold-violation")))


def test_violations_use_the_threshold_rule() -> None:
    data = _input("threshold-violation")
    objects = data["workflows"][0]
    job, bandwidth = objects["jobs"][1], objects["bandwidths"][1]
    assert violations(job, bandwidth, None) == ["busbw 195.7 GB/s < 400"]
    job["spec"]["thresholds"] = {"busBandwidthGBps": "value >= 100 && value <= 150"}
    assert violations(job, bandwidth, None) == ['busbw 195.7 GB/s violates "value >= 100 && value <= 150"']
    job["spec"]["thresholds"] = {"busBandwidthGBps": "value > 100"}
    assert violations(job, bandwidth, None) == []
    provisional = copy.deepcopy(bandwidth)
    provisional["status"]["conditions"] = []  # not final: nothing to judge yet
    job["spec"]["thresholds"] = {"busBandwidthGBps": "value >= 400"}
    assert violations(job, provisional, None) == []


def test_provisional_values_are_marked() -> None:
    report = report_of(_input("running"))
    category = report.categories[0]
    assert category.bandwidth_provisional and category.bandwidth_groups[0].provisional
    text = render_text(report)
    assert "(provisional)" in text and "│  Bandwidth (provisional: " in text
    assert all(line.count("*") == 2 for line in text.splitlines() if " B  " in line or " KB  " in line)
    final = render_text(report_of(_input("passing")))
    assert "provisional" not in final and "*" not in final


def test_reason_and_long_lines_are_cut_with_dots() -> None:
    assert fit("x" * 80) == "x" * (TEXT - 3) + "..."
    assert fit("short") == "short"
    data = _input("threshold-violation")
    condition = data["workflows"][0]["workflow"]["status"]["conditions"][0]
    condition["message"] = "m" * 100
    text = render_text(report_of(data))
    assert "│  Reason:    " + "m" * (TEXT - 13 - 3) + "... │" in text


def _with_log(tail: str) -> list[str]:
    data = _input("execution-failure")
    data["workflows"][0]["jobs"][0]["status"]["failureLog"]["tail"] = tail
    return render_text(report_of(data)).splitlines()


def test_failure_log_shows_at_most_20_wrapped_lines_of_4_kib() -> None:
    lines = _with_log("".join(f"line {i}\n" for i in range(100)))
    tail = [line for line in lines if line.startswith("│           line ")]
    assert len(tail) == LOG_LINES and tail[-1].startswith("│           line 99 ")
    assert any("(log truncated: last 20 lines shown)" in line for line in lines)
    big = _with_log("y" * 10_000)
    shown = "".join(line[12:].rstrip(" │") for line in big if line.startswith("│           y"))
    assert 0 < len(shown) <= 4096
    short = _with_log("Segmentation fault\n")
    assert any("│           Segmentation fault " in line for line in short)
    assert not any("truncated" in line for line in short)


def test_execution_failure_shows_the_captured_pod_node_and_exit_code() -> None:
    (category,) = report_of(_input("execution-failure")).categories
    (group,) = category.failed_groups
    log = group.failure_log
    assert isinstance(log, FailureLog)
    assert (log.node, log.exit_code, log.reason) == ("gpu-node-001", 3, "Error")
    text = render_text(report_of(_input("execution-failure")))
    assert "│         Node:      gpu-node-001 " in text and "│         Exit code: 3 (Error) " in text


def test_iterations_runtime_and_icons() -> None:
    data = _input("threshold-violation")
    workflow = data["workflows"][0]["workflow"]
    workflow["spec"]["orchestration"]["iterations"] = 3
    group = {
        "phase": "Succeeded",
        "startTime": "2026-03-02T09:00:10Z",
        "completionTime": "2026-03-02T09:05:12Z",
    }
    failed = {**group, "phase": "Failed"}
    workflow["status"]["orchestration"]["iterationHistory"] = [
        {"iteration": 1, "groups": [{"name": "group-0", **group}]},
        {"iteration": 2, "groups": [{"name": "group-0", **failed}]},
    ]
    workflow["status"]["orchestration"]["currentIteration"] = 3
    (category,) = report_of(data).categories
    assert [(i.number, i.state, i.runtime) for i in category.iterations] == [
        (1, "Succeeded", "5m 2s"),
        (2, "Restarted", "5m 2s"),
        (3, "Failed", "9m 50s"),
    ]
    assert category.runtime == "10m 2s (across 3 iterations)"
    text = render_text(report_of(data))
    assert "│    ✓ #1 Succeeded 5m 2s " in text and "│    ↻ #2 Restarted 5m 2s " in text
    assert "│    ✗ #3 Failed 9m 50s " in text


def test_placement_mnnvl_and_cliques() -> None:
    data = _input("passing")
    workflow = data["workflows"][0]["workflow"]
    workflow["status"]["orchestration"]["placement"] = "Unpinned"
    workflow["status"]["orchestration"]["totalNodes"] = 8
    workflow["spec"]["dependencies"].append({"kind": "ComputeDomain", "metadata": {"name": "cd-0"}})
    workflow["spec"]["orchestration"]["topology"] = {"topologyKey": "nvidia.com/gpu.clique"}
    groups = workflow["status"]["orchestration"]["groups"]
    groups[0]["domains"], groups[1]["domains"] = ["clique-a"], ["clique-a"]
    groups[1]["phase"] = "Failed"
    text = render_text(report_of(data))
    assert "│  Placement: Unpinned (4 of 8 target nodes exercised) " in text
    assert "│  MNNVL:     enabled (ComputeDomain cd-0) " in text
    assert "│    ✗  clique-a  2/4 nodes " in text
    assert "│         Bus bandwidth: 490.14 GB/s " in text
    assert "│         Transport: AWS Libfabric " in text


def test_training_metrics_in_domain_boxes_or_flat() -> None:
    text = render_text(report_of(_input("workloadrun")))
    assert "│  ┌ gpu-node-block-0 (2 nodes) ─" in text
    assert "│  │  Avg Runtime Goodput:  0.91 (91%)" in text
    data = _input("workloadrun")
    for group in data["workflow"]["workflow"]["status"]["orchestration"]["groups"]:
        group.pop("domains")
    flat = render_text(report_of(data))
    assert "┌ " not in flat.split("Summary")[0].split("workloadrun/wr-train")[1]
    assert "│  Avg Runtime Goodput:  0.89 (89%) " in flat
    assert "│  Avg Step Time:  4.95s " in flat


def test_interruptions_and_lost_work_are_summed_per_domain() -> None:
    """What the GoodputMeasurements counted (``interruptionCount``, ``lostWorkTimeSec``: the work
    redone after each restart), summed over the domain's groups."""
    data = _input("workloadrun")
    first, second = (m["status"] for m in data["workflow"]["goodputs"])
    first.update(interruptionCount=1, lostWorkTimeSec="120.400000")
    second.update(interruptionCount=2, lostWorkTimeSec="219.700000")
    report = report_of(data)
    (category,) = report.categories
    assert [(m.name, m.interruptions, m.lost_work_sec) for m in category.metrics] == [
        ("gpu-node-block-0", 1, 120.4),
        ("gpu-node-block-1", 2, 219.7),
    ]
    text = render_text(report)
    assert "│  │  Interruptions:  1 (lost work 120s)" in text
    assert "│  │  Interruptions:  2 (lost work 220s)" in text
    for group in data["workflow"]["workflow"]["status"]["orchestration"]["groups"]:
        group.pop("domains")
    assert "│  Interruptions:  3 (lost work 340s) " in render_text(report_of(data))


def test_workloadrun_nodes_and_header() -> None:
    data = _input("workloadrun")
    report = report_of(data)
    assert report.title == "WorkloadRun Report" and (report.platform, report.gpu) == ("gcp", "h100")
    assert [(n.name, n.group, n.rack, n.status) for n in report.nodes] == [
        ("gpu-node-000", "group-0", "gpu-node-block-0", "Passed"),
        ("gpu-node-001", "group-0", "gpu-node-block-0", "Passed"),
        ("gpu-node-002", "group-1", "gpu-node-block-1", "Failed"),
        ("gpu-node-003", "group-1", "gpu-node-block-1", "Failed"),
    ]
    assert report_exit_errors([report]) == ['workloadrun "wr-train" failed']


def test_diagnosis_block() -> None:
    text = render_text(report_of(_input("diagnosis")))
    block = text.split("│  Diagnosis:")[1].split("│  Bandwidth by group:")[0]
    assert [line[1:].rstrip(" │") for line in block.splitlines()[1:-1]] == [
        "    Stage:    complete",
        "    Rounds:   2",
        "    Outcome:  Faulty",
        "    Healthy:  3 nodes",
        "    Faulty:",
        "      gpu-node-block-1: gpu-node-003",
        "    Max BW:   338.14 GB/s (gpu-node-000, gpu-node-001)",
        "    Min BW:   135.39 GB/s (gpu-node-002, gpu-node-003)",
        "    Test Results:",
        "      intra-screening: 1 passed, 1 failed (gpu-node-block-1)",
    ]


def test_sizes_in_1024_multiples() -> None:
    assert [human_size(n) for n in (8, 1024, 1536, 8 * 1024**3, 16 * 1024**3)] == [
        "8 B",
        "1 KB",
        "1.5 KB",
        "8 GB",
        "16 GB",
    ]


def test_results_are_one_object_or_an_array() -> None:
    one = report_of(_input("passing"))
    two = report_of(_input("running"))
    assert json.loads(results_json([one]))["name"] == "cert-pass"
    assert [r["result"] for r in json.loads(results_json([one, two]))] == ["PASSED", "RUNNING"]
    assert json.loads(results_json([one]))["failedNodes"] is None


# --- JUnit: the structure of the junit-10 schema CI systems read --------------------------------

_CASE_CHILDREN = {"failure", "error", "skipped", "system-out", "system-err"}


def _check_junit(xml: str) -> ET.Element:
    """What the junit-10 XSD requires of the elements used, checked without it."""
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    for suite in root:
        assert suite.tag == "testsuite" and suite.get("name")
        cases = list(suite)
        assert all(c.tag == "testcase" for c in cases)
        for case in cases:
            assert case.get("name") and case.get("classname")
            float(case.get("time") or "0")
            kinds = [child.tag for child in case]
            assert set(kinds) <= _CASE_CHILDREN
            assert sum(kinds.count(k) for k in ("failure", "error", "skipped")) <= 1
            for child in case:
                if child.tag in ("failure", "error"):
                    assert child.get("message") is not None and child.get("type")
        for key, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            assert int(suite.get(key) or -1) == sum(1 for c in cases for child in c if child.tag == tag)
        assert int(suite.get("tests") or -1) == len(cases)
    for key in ("tests", "failures", "errors", "skipped"):
        assert int(root.get(key) or -1) == sum(int(s.get(key) or 0) for s in root)
    return root


def _cases_of(reports: list[Report]) -> list[tuple[str, str | None]]:
    root = _check_junit(render_junit(reports))
    return [
        (str(case.get("name")), next((child.tag for child in case), None)) for suite in root for case in suite
    ]


def test_junit_one_suite_per_report_one_case_per_category() -> None:
    reports = [report_of(_input(case)) for case in CASES]
    root = _check_junit(render_junit(reports))
    assert [s.get("name") for s in root] == [r.name for r in reports]
    assert _cases_of([report_of(_input("threshold-violation"))]) == [
        ("communication/nccl-all-reduce", "failure")
    ]
    assert _cases_of([report_of(_input("passing"))]) == [("communication/nccl-all-reduce", None)]


def test_junit_running_incomplete_and_empty_reports_add_an_error_case() -> None:
    assert _cases_of([report_of(_input("running"))]) == [
        ("communication/nccl-all-reduce", "skipped"),
        ("communication/nccl-loopback", "skipped"),
        ("result", "error"),
    ]
    assert _cases_of([report_of(_input("excluded-node"))])[-1] == ("result", "error")
    empty = Report(kind="Certification", name="none", namespace="ns", result="PASSED")
    assert _cases_of([empty]) == [("result", "error")]


def test_a_running_category_names_a_workload_that_cannot_be_scheduled() -> None:
    """user-reports 3: WorkloadSchedulingBlocked is visible in the report, not hidden as Running."""
    data = _input("running")
    job = data["workflows"][0]["jobs"][0]
    name = job["status"]["workloadRef"]["name"]
    job["status"]["conditions"] = [
        {
            "type": "InProgress",
            "status": "True",
            "reason": "WorkloadSchedulingBlocked",
            "message": f"Workload TrainJob/{name} cannot be scheduled: pod {name}-node-0-0: "
            "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
            "lastTransitionTime": "2026-03-02T09:01:00Z",
        }
    ]
    (category, _) = report_of(data).categories
    assert category.status == "Running"
    assert category.reason.startswith("WorkloadSchedulingBlocked (group-0): Workload TrainJob/")
    assert "│  Reason:    WorkloadSchedulingBlocked (group-0): Workload T... │" in render_text(
        report_of(data)
    )


def test_a_node_of_the_failed_record_is_failed_even_in_a_passed_group() -> None:
    import base64

    from nvcre.orchestration.result_configmaps import merge_failed

    data = _input("workloadrun")
    config_map = data["workflow"]["failedNodes"]
    key = "failed-nodes.json.gz"
    entry = {"name": "gpu-node-000", "reason": "HardwareFailureDetected", "message": "XID 79"}
    merged = merge_failed(base64.b64decode(config_map["binaryData"][key]), [entry])
    config_map["binaryData"][key] = base64.b64encode(merged).decode()
    report = report_of(data)
    assert [(n.name, n.status) for n in report.nodes][:2] == [
        ("gpu-node-000", "Failed"),
        ("gpu-node-001", "Passed"),
    ]
    assert ("gpu-node-000", "HardwareFailureDetected", "group-0") in {
        (f.node, f.reason, f.group) for f in report.failed_nodes
    }


def test_an_unwritable_results_file_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nvcre.cli.common import UserError
    from nvcre.cli.report_io import write_junit, write_results

    report = report_of(_input("passing"))
    with pytest.raises(UserError, match=r"cannot write .*/missing/r\.json"):
        write_results(tmp_path / "missing" / "r.json", [report])
    write_junit(tmp_path / "j.xml", [report])
    assert capsys.readouterr().err == f"Results written to {tmp_path / 'j.xml'}\n"
