"""``nvcrectl workloadrun render``: output formats, offline vs --platform vs --dry-run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.cli import workloadrun as command
from nvcre.cli.main import cli
from nvcre.platform import synthetic_nodes

EXAMPLE = Path(__file__).parents[2] / "examples" / "workloadrun" / "nccl-all-reduce.yaml"
ANNOTATIONS = ("metadata", "annotations")


def render(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["workloadrun", "render", str(EXAMPLE), *args])
    assert result.exit_code == 0, result.stderr
    return result


def test_yaml_and_json_are_the_same_workflow() -> None:
    as_yaml = yaml.safe_load(render("--platform", "aws", "--gpu-arch", "h100").stdout)
    as_json = json.loads(render("--platform", "aws", "--gpu-arch", "h100", "-o", "json").stdout)
    assert as_yaml == as_json
    assert as_yaml["kind"] == "Workflow"


def test_offline_without_platform_keeps_overrides_and_names_only_the_architecture() -> None:
    workflow = yaml.safe_load(render("--gpu-arch", "h100").stdout)
    assert workflow["metadata"]["annotations"] == {"nvcrectl.nvidia.com/detected-gpu-architecture": "h100"}
    assert workflow["spec"]["overrides"]


def test_platform_resolves_and_records_detection() -> None:
    workflow = yaml.safe_load(render("--platform", "gcp", "--gpu-arch", "NVIDIA-GB200").stdout)
    annotations = workflow["metadata"]["annotations"]
    assert annotations["nvcrectl.nvidia.com/detected-platform"] == "gcp"
    assert annotations["nvcrectl.nvidia.com/detected-gpu-architecture"] == "gb200"
    assert json.loads(annotations["nvcrectl.nvidia.com/applied-overrides"])
    assert "overrides" not in workflow["spec"]


def test_dry_run_detects_from_discovered_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = synthetic_nodes("aws", "gb200", count=2)
    seen: list[Any] = []

    def fake(run: Any, kubeconfig: str | None, context: str | None) -> list[dict[str, Any]]:
        seen.append((run.name, kubeconfig, context))
        return nodes

    monkeypatch.setattr(command, "list_target_nodes", fake)
    result = render("--dry-run", "--kubeconfig", "/k", "--context", "c")
    assert seen == [("nccl-all-reduce", "/k", "c")]
    assert result.stderr.splitlines()[0] == "Discovered 2 nodes: NVIDIA-GB200 (gb200 on aws)"
    workflow = yaml.safe_load(result.stdout)
    assert workflow["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-platform"] == "aws"
    kinds = [d["kind"] for d in workflow["spec"]["dependencies"]]
    assert kinds == ["TrainingRuntime", "ComputeDomain"]


def test_dry_run_with_no_matching_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command, "list_target_nodes", lambda *_: [])
    result = CliRunner().invoke(cli, ["workloadrun", "render", str(EXAMPLE), "--dry-run"])
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: workloadrun nccl-all-reduce: no schedulable GPU node matches spec.target on the cluster\n"
    )


def test_dry_run_with_an_unreadable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = CliRunner().invoke(
        cli, ["workloadrun", "render", str(EXAMPLE), "--dry-run", "--kubeconfig", str(missing)]
    )
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot load kubeconfig:")
    assert "Traceback" not in result.output
