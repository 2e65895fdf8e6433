"""``nvcrectl certification report`` on the real API server (cli.md 14, acceptance case 12).

The Certifications run through the real controllers on kwok GPU nodes: a cordoned node matching
the target is excluded by the Workflow's discovery, and the test plays Kubeflow Trainer (it ends
the TrainJob of the one category that must finish).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from lightkube import Client

from nvcre import resources
from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.cli.main import cli
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import Certification, WorkloadRun, category, pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_workflow_jobs, get, jobs_of, wait_true
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name

ALL_REDUCE = category("communication", "nccl-all-reduce")


def _certification(name: str, namespace: str, pool: str) -> dict[str, Any]:
    cert = (
        Certification(name)
        .namespace(namespace)
        .pool(pool, **{NodeLabel.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"})
    )
    # TrainJobs ended by hand: no launcher log here
    return cert.allow_missing_data().categories(ALL_REDUCE).obj()


def _report(control_plane: ControlPlane, *args: str, kind: str = "certification") -> Result:
    """``nvcrectl <kind> report args`` against the test control plane."""
    return CliRunner().invoke(
        cli, [kind, "report", *args, "--kubeconfig", str(control_plane.kubeconfig_path)]
    )


def _category_state(kube: Client, name: str, namespace: str) -> str | None:
    cert = get(kube, resources.Certification, name, namespace)
    statuses = (cert.get("status") or {}).get("categoryStatuses") or ()
    return str(statuses[0]["status"]) if statuses else None


def test_acceptance_12_excluded_node_is_incomplete_and_a_running_one_fails_the_command(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    pool = pool_name()
    gpu_nodes(2, pool_spec(pool))
    (cordoned,) = gpu_nodes(1, pool_spec(pool, unschedulable=True))
    excluded = str(cordoned.metadata.name if cordoned.metadata else "")

    kube.create(resources.Certification.from_dict(_certification("c1", namespace, pool)))
    workflow = certification_workflow_name("c1", ALL_REDUCE["domain"], ALL_REDUCE["variant"])
    finish_workflow_jobs(kube, namespace, workflow, 1)
    wait_true(kube, resources.Certification, "c1", namespace, "Succeeded", timeout=90)
    assert get(kube, resources.Workflow, workflow, namespace)["status"]["orchestration"]["excludedNodes"] == [
        excluded
    ]

    results = tmp_path / "r.json"
    result = _report(control_plane, "c1", "-n", namespace, "--results-file", str(results))
    assert result.exit_code == 0, result.output
    assert f"  Excluded:  1 ({excluded})\n" in result.stdout
    assert "│  Result:       INCOMPLETE " in result.stdout
    assert f"Results written to {results}" in result.stderr
    single = json.loads(results.read_text())
    assert isinstance(single, dict) and single["result"] == "INCOMPLETE"
    assert single["excludedNodes"] == [excluded]

    page = _report(control_plane, "c1", "-n", namespace, "-o", "html")
    assert page.exit_code == 0, page.output
    assert page.stdout.startswith("<!DOCTYPE html>") and page.stdout.rstrip().endswith("</html>")
    assert "INCOMPLETE" in page.stdout and excluded in page.stdout

    missing = _report(control_plane, "c1")
    assert missing.exit_code == 1
    assert missing.stdout == ""
    assert missing.stderr == 'Error: certification "c1" not found in namespace "default"\n'

    # c2 runs: its one Job exists and nobody ends its TrainJob
    kube.create(resources.Certification.from_dict(_certification("c2", namespace, pool)))
    second = certification_workflow_name("c2", ALL_REDUCE["domain"], ALL_REDUCE["variant"])
    wait_for(lambda: jobs_of(kube, namespace, second) or None, 60, what="the Job of c2")
    wait_for(lambda: _category_state(kube, "c2", namespace) == "InProgress", 30, what="c2 in progress")

    both = tmp_path / "both.json"
    junit = tmp_path / "junit.xml"
    html = tmp_path / "report.html"
    result = _report(
        control_plane,
        "c1",
        "c2",
        "-n",
        namespace,
        "--results-file",
        str(both),
        "--junit-file",
        str(junit),
        "--html-file",
        str(html),
    )
    assert result.exit_code == 1
    assert result.stdout.count("Certification Report") == 2
    assert "  Name:      c1\n" in result.stdout and "  Name:      c2\n" in result.stdout
    assert "│  Result:       INCOMPLETE " in result.stdout and "│  Result:       RUNNING " in result.stdout
    assert result.stderr.endswith('Error: certification "c2" is still running\n')
    reports = json.loads(both.read_text())
    assert [r["name"] for r in reports] == ["c1", "c2"]
    assert [r["result"] for r in reports] == ["INCOMPLETE", "RUNNING"]
    assert reports[1]["categories"][0]["status"] == "Running"
    xml = junit.read_text()
    assert xml.count("<testsuite ") == 2 and xml.count("<error ") == 2
    page = html.read_text()
    assert page.count("<h1>") == 2 and "RUNNING" in page and "INCOMPLETE" in page

    finish_workflow_jobs(kube, namespace, second, 1)
    wait_true(kube, resources.Certification, "c2", namespace, "Succeeded", timeout=90)


MPI = {"mpi": {"binary": "/usr/local/bin/all_reduce_perf_mpi", "mpirunPath": "/usr/local/mpi/bin/mpirun"}}


def test_workloadrun_report_of_a_failed_run(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """cli.md 5.3: one category workloadrun/<name>; nodes of the failed-nodes ConfigMap are Failed."""
    pool = pool_name()
    nodes = sorted(str(n.metadata.name) for n in gpu_nodes(2, pool_spec(pool)) if n.metadata)
    run = (
        WorkloadRun("breaks")
        .namespace(namespace)
        .image("nvcr.io/nvidia/pytorch:26.01-py3")
        .framework(MPI)
        .nodes(2)
        .pool(pool)
        .obj()
    )
    kube.create(resources.WorkloadRun.from_dict(run))
    finish_workflow_jobs(kube, namespace, "breaks", 1, failing=frozenset({"breaks-job"}))
    wait_true(kube, resources.WorkloadRun, "breaks", namespace, "Failed", timeout=90)

    breaks = ("breaks", "-n", namespace)
    text = _report(control_plane, *breaks, kind="workloadrun")
    assert text.exit_code == 1
    assert "║                       WorkloadRun Report                       ║" in text.stdout
    assert "│  workloadrun/breaks " in text.stdout and "│  Result:       FAILED " in text.stdout
    for node in nodes:
        assert f"│           - {node}  Work" in text.stdout  # the reason, cut to the card
    assert text.stderr == 'Error: workloadrun "breaks" failed\n'

    junit = tmp_path / "junit.xml"
    data = _report(control_plane, *breaks, "-o", "json", "--junit-file", str(junit), kind="workloadrun")
    assert data.exit_code == 1
    report = json.loads(data.stdout)
    assert report["result"] == "FAILED" and report["categories"][0]["domain"] == "workloadrun"
    assert [(n["name"], n["status"]) for n in report["nodes"]] == [(n, "Failed") for n in nodes]
    assert sorted((f["name"], f["reason"]) for f in report["failedNodes"]) == [
        (n, "WorkloadFailed") for n in nodes
    ]
    assert junit.read_text().count("<failure ") == 1

    page = _report(control_plane, *breaks, "-o", "html", kind="workloadrun")
    assert page.exit_code == 1
    assert "workloadrun/breaks" in page.stdout and "FAILED" in page.stdout
    for node in nodes:
        assert f"<title>{node}: failed" in page.stdout  # its fleet-map cell

    missing = _report(control_plane, "breaks", kind="workloadrun")
    assert missing.exit_code == 1
    assert missing.stderr == 'Error: workloadrun "breaks" not found in namespace "default"\n'
