"""A run's promises as pure rules (:mod:`nvcre.decide.limits`) and as flags: ``nvcrectl ... run
--max-nodes/--deadline`` set the spec fields, ``nvcre-manager --max-nodes-per-run`` the default.
The controllers that act on them are tested on the real API server (tests/integration/test_run_limits.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.cli import connection, run_execution
from nvcre.cli.main import cli
from nvcre.decide import limits
from nvcre.manager.main import main, parse_args
from nvcre.report.html import render_html
from nvcre.report.jsonreport import to_json
from nvcre.report.junit import render_junit
from nvcre.report.model import CategoryReport, Report, Stopped
from nvcre.report.text import render_text

CREATED = "2026-01-01T00:00:00Z"


def run(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r", "creationTimestamp": CREATED}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "default", "refusal"),
    [
        ({}, 0, None),
        (
            {},
            8,
            "the target resolves to 9 nodes, more than the run's limit of 8 (the manager's --max-nodes-per-run)",
        ),
        (
            {"maxNodes": 4},
            16,
            "the target resolves to 9 nodes, more than the run's limit of 4 (spec.maxNodes)",
        ),
        ({"maxNodes": 9}, 4, None),
        ({"maxNodes": 0}, 4, None),
    ],
)
def test_the_spec_limit_wins_over_the_managers_and_zero_is_none(
    spec: dict[str, Any], default: int, refusal: str | None
) -> None:
    assert limits.too_many_nodes(9, limits.node_limit(spec, default)) == refusal


def test_the_deadline_counts_from_creation_rounded_up_to_a_whole_second() -> None:
    assert limits.deadline_of(run(deadline="1h30m")) == datetime(2026, 1, 1, 1, 30, tzinfo=UTC)
    assert limits.deadline_of(run(deadline="1500ms")) == datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC)
    assert limits.deadline_of(run()) is None
    limit = limits.node_limit({}, 8)
    workflow = limits.with_promises({"spec": {}}, limits.deadline_of(run(deadline="90s")), limit)
    assert workflow["spec"]["orchestration"] == {"deadlineTime": "2026-01-01T00:01:30Z", "maxNodes": 8}
    assert limits.workflow_deadline(workflow) == datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)
    assert limits.too_many_nodes(9, limits.workflow_limit(workflow)) == (
        "the target resolves to 9 nodes, more than the run's limit of 8 (spec.orchestration.maxNodes)"
    )
    assert limits.with_promises({"spec": {}}, None, None) == {"spec": {"orchestration": {}}}


def job(name: str, condition: str | None = None) -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True"}] if condition else []
    return {"metadata": {"name": name}, "status": {"conditions": conditions}}


def test_a_stop_deletes_every_unfinished_job_and_never_a_judged_one() -> None:
    groups = [
        {"name": "group-0", "phase": "Succeeded", "jobRef": {"name": "j0"}},
        {"name": "group-1", "phase": "Running", "jobRef": {"name": "j1"}, "startTime": CREATED},
        {"name": "group-2", "phase": "Running", "jobRef": {"name": "j2"}},
        {"name": "group-3", "phase": "Pending"},
    ]
    # j0 still looks unfinished in the cache; j2 is not in it yet; old is an earlier iteration's
    cached = [job("j0"), job("j1"), job("old", "Succeeded")]
    workflow = {"spec": {"orchestration": {"deadlineTime": "2026-01-01T01:00:00Z"}}}
    decided = limits.stop(workflow, groups, cached)
    assert decided.jobs == ["j1", "j2"]
    assert [(g["name"], g["phase"], "jobRef" in g, "startTime" in g) for g in decided.groups] == [
        ("group-0", "Succeeded", True, False),
        ("group-1", "Pending", False, False),
        ("group-2", "Pending", False, False),
        ("group-3", "Pending", False, False),
    ]
    assert decided.message == (
        "Deadline 2026-01-01T01:00:00Z passed: 1 of 4 groups judged; "
        "running groups stopped, not judged: group-1, group-2"
    )


def test_a_stopped_run_is_an_error_in_junit_and_a_line_in_the_summary_and_the_page() -> None:
    """A refused run has only Pending categories: without the error, CI would read skips as a pass."""
    message = (
        "the target resolves to 4 nodes, more than the run's limit of 3 (the manager's --max-nodes-per-run)"
    )
    report = Report(
        kind="Certification",
        name="big",
        namespace="n",
        result="FAILED",
        categories=(CategoryReport("communication", "nccl-all-reduce", "Pending"),),
        stopped=Stopped("TooManyNodes", message),
    )
    suite = ET.fromstring(render_junit([report])).find("testsuite")
    assert suite is not None and (suite.get("skipped"), suite.get("errors")) == ("1", "1")
    error = suite.find("testcase[@name='result']/error")
    assert (
        error is not None
        and error.get("message") == f"Certification big was stopped (TooManyNodes): {message}"
    )
    summary = render_text(report).splitlines()
    start = summary.index("│  Stopped:      TooManyNodes                                    │")
    assert [line.strip("│ ") for line in summary[start + 1 : start + 4]] == [
        "the target resolves to 4 nodes, more than the",
        "run's limit of 3 (the manager's",
        "--max-nodes-per-run)",
    ]
    assert to_json(report)["stopped"] == {"reason": "TooManyNodes", "message": message}
    page = render_html([report]).replace("&#39;", "'")
    assert f'<p class="bad">Stopped: TooManyNodes: {message}</p>' in page


CERT = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "c1", "namespace": "nvcre"},
    "spec": {
        "target": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "categories": [{"domain": "communication", "variant": "nccl-all-reduce"}],
    },
}


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> list[run_execution.RunRequest]:
    """What the run commands would create and how long they would wait (no cluster is contacted)."""
    requests: list[run_execution.RunRequest] = []
    monkeypatch.setattr(connection, "client", lambda *args, **kwargs: object())
    monkeypatch.setattr(run_execution, "execute", lambda kube, request: requests.append(request))
    return requests


def test_run_flags_set_the_limits_and_the_wait_outlasts_the_deadline(
    tmp_path: Path, created: list[run_execution.RunRequest]
) -> None:
    path = tmp_path / "cert.yaml"
    path.write_text(yaml.safe_dump(CERT))
    limits_flags = ["--max-nodes", "16", "--deadline", "2h30m", "--wait"]
    result = CliRunner().invoke(cli, ["certification", "run", str(path), *limits_flags])
    assert result.exit_code == 0, result.output
    run = str(EXAMPLES / "workloadrun" / "basic.yaml")
    result = CliRunner().invoke(cli, ["workloadrun", "run", run, "--deadline", "1h", "--wait"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        cli, ["workloadrun", "run", run, "--deadline", "1h", "--wait", "--timeout", "5m"]
    )
    assert result.exit_code == 0, result.output
    cert, workloadrun, timed = created
    assert (cert.document["spec"]["maxNodes"], cert.document["spec"]["deadline"]) == (16, "2h30m")
    assert "maxNodes" not in workloadrun.document["spec"] and workloadrun.document["spec"]["deadline"] == "1h"
    # without --timeout the wait lasts until the deadline ended the run, plus a minute to stop it
    assert (cert.timeout, workloadrun.timeout, timed.timeout) == (9060.0, 3660.0, 300.0)


@pytest.mark.parametrize("value", ["1.5h", "0s", "soon"])
def test_a_deadline_the_api_would_refuse_is_refused_offline(
    tmp_path: Path, created: list[run_execution.RunRequest], value: str
) -> None:
    path = tmp_path / "cert.yaml"
    path.write_text(yaml.safe_dump(CERT))
    result = CliRunner().invoke(cli, ["certification", "run", str(path), "--deadline", value])
    assert result.exit_code == 1 and not created
    assert f'--deadline "{value}": give a duration longer than 0 in whole h, m, s or ms' in result.output


def test_the_manager_flag_defaults_to_no_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args([]).max_nodes_per_run == 0
    assert parse_args(["--max-nodes-per-run=64"]).max_nodes_per_run == 64
    with pytest.raises(SystemExit) as exited:
        main(["--max-nodes-per-run=-1"])
    assert exited.value.code == 2
    assert "--max-nodes-per-run must not be negative, got -1" in capsys.readouterr().err
