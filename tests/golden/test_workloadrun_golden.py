"""Golden renders of WorkloadRuns: YAML inputs and the expected Workflow, compared after parsing.

Each ``workloadrun/cases/<case>.yaml`` starts with a comment saying what it proves, then:

* ``workloadRun`` (inline) or ``workloadRunFile`` (a path from the repository root, e.g. an
  example), and
* ``cli: [flags...]``: rendered through ``nvcrectl workloadrun render FILE flags...``; the expected
  file holds the Workflow printed on stdout and the lines on stderr; or
* ``nodes: [...]`` and ``resolve: true|false``: rendered through ``build_workflow`` as the
  controller (``resolve: false``) or ``--dry-run`` (``resolve: true``) does with discovered nodes;
  the expected file holds the Workflow, the detection and the events.

Expected output lives in ``workloadrun/expected/<case>.yaml``. After a deliberate change run
``NVCRE_UPDATE_GOLDEN=1 pytest tests/golden`` and review every changed golden line by line.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.cli.common import to_yaml
from nvcre.cli.main import cli
from nvcre.render.workloadrun import build_workflow
from nvcre.validation.manifests import check_object

HERE = Path(__file__).parent / "workloadrun"
REPO = Path(__file__).parents[2]
CASES = sorted((HERE / "cases").glob("*.yaml"))
UPDATE = os.environ.get("NVCRE_UPDATE_GOLDEN") == "1"


def _input_file(case: dict[str, Any], tmp_path: Path) -> Path:
    if "workloadRunFile" in case:
        return REPO / str(case["workloadRunFile"])
    path = tmp_path / "workloadrun.yaml"
    path.write_text(yaml.safe_dump(case["workloadRun"], sort_keys=False))
    return path


def _render_cli(case: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    file = _input_file(case, tmp_path)
    result = CliRunner().invoke(cli, ["workloadrun", "render", str(file), *case["cli"]])
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.stderr}"
    out: dict[str, Any] = {"workflow": yaml.safe_load(result.stdout)}
    if result.stderr:
        out["stderr"] = result.stderr.splitlines()
    return out


def _render_nodes(case: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    run = WorkloadRun.model_validate(yaml.safe_load(_input_file(case, tmp_path).read_text()))
    rendered = build_workflow(run, case["nodes"], resolve=case["resolve"])
    det = rendered.detection
    out: dict[str, Any] = {
        "detection": {
            "platform": det.platform,
            "gpuArchitecture": det.gpu_architecture,
            "gpusPerNode": det.gpus_per_node,
            "mlnxPerNode": det.mlnx_per_node,
            "enableMNNVL": det.enable_mnnvl,
            "nicResourceName": det.nic.resource_name,
        },
        "workflow": rendered.workflow,
    }
    if rendered.events:
        out["events"] = [f"{e.type} {e.reason}: {e.message}" for e in rendered.events]
    if rendered.applied_overrides:
        out["appliedOverrides"] = list(rendered.applied_overrides)
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    actual = _render_cli(case, tmp_path) if "cli" in case else _render_nodes(case, tmp_path)
    findings = check_object(actual["workflow"], path.name, 0).findings  # what the API server would check
    assert not findings, [str(f) for f in findings]
    assert "&id" not in to_yaml(actual), "the render shares objects between places"
    expected_path = HERE / "expected" / path.name
    if UPDATE:
        expected_path.parent.mkdir(exist_ok=True)
        expected_path.write_text(to_yaml(actual))
    expected = yaml.safe_load(expected_path.read_text())
    if actual != expected:
        diff = difflib.unified_diff(
            to_yaml(expected).splitlines(), to_yaml(actual).splitlines(), "expected", "actual", lineterm=""
        )
        pytest.fail("render differs from " + str(expected_path.relative_to(REPO)) + ":\n" + "\n".join(diff))


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30
