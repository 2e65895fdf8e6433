"""What ``nvcrectl workloadrun run --wait`` and ``workloadrun report`` ask of the real API server.

The command runs in this process against the real controllers; every request its client sends
is recorded (method, path, label selector), as the API server's audit log would show them. The
test plays Kubeflow Trainer (it ends the run's TrainJob).

The wait's poll reads the run, its Workflows by the run's label and their Jobs by the Workflow
label, never everything the namespace holds; the report that follows is built from the poll that
saw the run end, so it reads only what the poll did not: the measurements (by the Job label), the
node-result ConfigMaps and the NodeRecords of the run's nodes (by name: the report's node history).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
import yaml
from click.testing import CliRunner
from lightkube import Client

from nvcre.cli import run_execution
from nvcre.cli.main import cli
from nvcre.testing.builders import WorkloadRun, new_pool
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_workflow_jobs

MPI = {"mpi": {"mpirunPath": "/usr/local/mpi/bin/mpirun", "binary": "/usr/local/bin/all_reduce_perf_mpi"}}
MEASUREMENTS = ("bandwidthmeasurements", "goodputmeasurements")


class Requests:
    """The requests of every client but the test's own, each as (phase, method, resource path,
    label selector); ``phase`` is what the command was doing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, own: Client) -> None:
        self.phase = "wait"
        self.seen: list[tuple[str, str, str, str]] = []
        own_transport = own._client._client  # the test's own client (it plays Trainer)
        send = httpx2.Client.send

        def recording(client: httpx2.Client, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
            if client is not own_transport:
                url = urlsplit(str(request.url))
                selector = parse_qs(url.query).get("labelSelector", [""])[0]
                self.seen.append((self.phase, request.method, url.path, selector))
            return send(client, request, **kwargs)

        monkeypatch.setattr(httpx2.Client, "send", recording)
        follow = run_execution.follow

        def following(*args: Any, **kwargs: Any) -> run_execution.Outcome:
            try:
                return follow(*args, **kwargs)
            finally:
                self.phase = "report"

        monkeypatch.setattr(run_execution, "follow", following)

    def of(self, phase: str) -> list[tuple[str, str, str]]:
        return [(method, path, selector) for p, method, path, selector in self.seen if p == phase]


def resource(path: str) -> str:
    """The plural a request's path names, namespaced (``.../namespaces/NS/PLURAL/...``) or
    cluster-scoped (``/apis/GROUP/VERSION/PLURAL/...``); ``""`` for a Namespace itself."""
    parts = path.strip("/").split("/")
    scoped = parts.index("namespaces") + 2 if "namespaces" in parts else None
    at = scoped if scoped is not None else (3 if parts[0] == "apis" else 2)
    return parts[at] if at < len(parts) else ""


def record_reads(requests: list[tuple[str, str, str]]) -> list[str]:
    """The NodeRecords ``requests`` read, by name."""
    return [path.rsplit("/", 1)[1] for method, path, _ in requests if resource(path) == "noderecords"]


def lists_of(requests: list[tuple[str, str, str]], plural: str) -> list[str]:
    """The label selectors of the lists of ``plural`` among ``requests``."""
    return [
        selector for method, path, selector in requests if method == "GET" and path.endswith(f"/{plural}")
    ]


def test_the_wait_selects_by_label_and_the_report_reads_only_what_the_wait_did_not(
    control_plane: ControlPlane,
    kube: Client,
    namespace: str,
    gpu_nodes: Any,
    manager: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool, nodes = new_pool(gpu_nodes, 1)
    document = WorkloadRun("waited").namespace(namespace).framework(MPI).nodes(1).pool(pool).obj()
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(document))
    requests = Requests(monkeypatch, kube)
    trainer = threading.Thread(target=finish_workflow_jobs, args=(kube, namespace, "waited", 1))
    trainer.start()
    kubeconfig = ["--kubeconfig", str(control_plane.kubeconfig_path)]
    try:
        result = CliRunner().invoke(
            cli,
            [
                "workloadrun",
                "run",
                str(tmp_path / "run.yaml"),
                "--wait",
                "--timeout",
                "2m",
                "--html-file",
                str(tmp_path / "r.html"),
                *kubeconfig,
            ],
        )
    finally:
        trainer.join()
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output
    page = (tmp_path / "r.html").read_text()  # the same report as one HTML page, from the same poll
    assert "WorkloadRun Report: waited" in page and "PASSED" in page

    waited = requests.of("wait")
    job_lists = lists_of(waited, "jobs")
    assert job_lists, "the poll read the run's Jobs"
    assert set(job_lists) == {"nvcre.nvidia.com/workflow in (waited)"}, "only the run's Workflow's Jobs"
    assert set(lists_of(waited, "workflows")) == {"nvcre.nvidia.com/workload-run=waited"}

    reported = requests.of("report")
    assert {resource(path) for _, path, _ in reported} <= {*MEASUREMENTS, "configmaps", "noderecords"}, (
        "the run, its Workflow and their Jobs are the ones the last poll read",
        reported,
    )
    assert record_reads(reported) == nodes, "the history of the run's one node: its record, by name"
    for plural in MEASUREMENTS:
        assert lists_of(reported, plural) == ["nvcre.nvidia.com/job in (waited-job)"], plural

    # `workloadrun report` reads each kind in one list that the label selects
    requests.phase = "report-command"
    again = CliRunner().invoke(cli, ["workloadrun", "report", "waited", "-n", namespace, *kubeconfig])
    assert again.exit_code == 0, again.output
    report = requests.of("report-command")
    lists = [(resource(path), selector) for method, path, selector in report if method == "GET"]
    assert record_reads(report) == nodes
    shown = [
        (plural, selector)
        for plural, selector in lists
        if selector or plural not in ("configmaps", "noderecords")
    ]
    assert shown == [
        ("workloadruns", ""),
        ("workflows", "nvcre.nvidia.com/workload-run=waited"),
        ("jobs", "nvcre.nvidia.com/workflow in (waited)"),
        ("bandwidthmeasurements", "nvcre.nvidia.com/job in (waited-job)"),
        ("goodputmeasurements", "nvcre.nvidia.com/job in (waited-job)"),
    ]
