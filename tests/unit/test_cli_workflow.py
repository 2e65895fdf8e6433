"""``nvcrectl workflow render`` and ``resolve_workflow``: exit codes, stdout/stderr, messages."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.api.v1alpha1.workflow import Workflow
from nvcre.cli.main import cli
from nvcre.platform import HeterogeneousPlatformError, synthetic_nodes
from nvcre.render.overrides import OverrideError
from nvcre.render.workflow import WorkflowResolveError, resolve_workflow
from nvcre.testing.builders import runtime_overlay

PLATFORM_NAMES = "aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale"
ARCH_NAMES = "a100, b200, b300, gb200, gb300, h100, h200, l40, l40s, rtxpro6000"


def _job(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "template": {
            "metadata": {"labels": {"kai.scheduler/queue": "team-a"}},
            "spec": {
                "template": {
                    "metadata": {"labels": {"kai.scheduler/queue": "team-a"}},
                    "spec": {
                        "schedulerName": "kai-scheduler",
                        "containers": [{"name": "node", "image": "base"}],
                    },
                }
            },
        },
    }


WORKFLOW: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "nccl", "namespace": "nvcre"},
    "spec": {
        "gangScheduler": {
            "schedulerName": "kai-scheduler",
            "queue": "team-a",
            "queueLabelKey": "kai.scheduler/queue",
        },
        "orchestration": {"target": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}},
        "jobTemplate": {
            "spec": {
                "workloadMetadata": {"labels": {"kai.scheduler/queue": "team-a"}},
                "workload": {
                    "trainJob": {
                        "runtimeRef": {"name": "nccl-runtime", "kind": "TrainingRuntime"},
                        "trainer": {"image": "base", "args": ["-N", "8"]},
                    }
                },
            }
        },
        "dependencies": [
            runtime_overlay("nccl-runtime", _job("launcher"), _job("node")),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "aws-only"},
                "data": {"a": "b"},
                "when": {"platform": {"equals": "aws"}},
            },
        ],
        "overrides": [
            {
                "when": {"platform": {"equals": "aws"}},
                "jobTemplate": {
                    "spec": {
                        "workloadMetadata": {"labels": {"cost-center": "hpc"}},
                        "workload": {"trainJob": {"trainer": {"image": "efa"}}},
                    }
                },
            },
            {
                "when": {"platform": {"equals": "gcp"}},
                "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": "team-b"}}}},
            },
            {
                "when": {"gpuArchitecture": {"in": ["gb200", "gb300"]}},
                "orchestration": {"topology": {"topologyKey": "nvidia.com/gpu.clique"}},
            },
            {
                "when": {"platform": {"equals": "oci"}},
                "jobTemplatePatch": [{"op": "remove", "path": "/spec/nothing"}],
            },
            {"when": {"platform": {"equals": "azure"}}},
        ],
    },
}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path: Path, data: Any, name: str = "wf.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def run(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(cli, ["workflow", "render", *args], catch_exceptions=False)


def one_line_error(result: Any, message: str, code: int = 1) -> None:
    assert result.exit_code == code
    assert result.stdout == ""
    assert result.stderr == f"Error: {message}\n"
    assert "Traceback" not in result.output


# --- CLI -----------------------------------------------------------------------------------------


def test_render_aws_applies_matching_overrides(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "--platform", "aws", str(write(tmp_path, WORKFLOW)))
    assert result.exit_code == 0, result.output
    rendered = yaml.safe_load(result.stdout)
    assert rendered["kind"] == "Workflow"
    annotations = rendered["metadata"]["annotations"]
    assert annotations["nvcrectl.nvidia.com/detected-platform"] == "aws"
    assert annotations["nvcrectl.nvidia.com/detected-gpu-architecture"] == "h100"
    assert json.loads(annotations["nvcrectl.nvidia.com/applied-overrides"]) == [
        {"index": 0, "when": "platform=aws", "patches": "jobTemplate", "noOp": False}
    ]
    spec = rendered["spec"]
    assert "overrides" not in spec
    assert spec["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["image"] == "efa"
    assert spec["jobTemplate"]["spec"]["workloadMetadata"]["labels"] == {
        "kai.scheduler/queue": "team-a",
        "cost-center": "hpc",
    }
    assert [d["metadata"]["name"] for d in spec["dependencies"]] == ["nccl-runtime", "aws-only"]
    assert all("when" not in d for d in spec["dependencies"])
    assert "status" not in rendered
    assert result.stderr == ""


def test_render_json_output(runner: CliRunner, tmp_path: Path) -> None:
    result = run(
        runner,
        "--platform",
        "onprem",
        "--gpu-arch",
        "NVIDIA-GB200",
        "-o",
        "json",
        str(write(tmp_path, WORKFLOW)),
    )
    assert result.exit_code == 0, result.output
    rendered = json.loads(result.stdout)
    assert rendered["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-gpu-architecture"] == "gb200"
    assert rendered["spec"]["orchestration"]["topology"] == {"topologyKey": "nvidia.com/gpu.clique"}
    assert [d["metadata"]["name"] for d in rendered["spec"]["dependencies"]] == ["nccl-runtime"]


def test_render_output_is_a_valid_workflow(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "--platform", "aws", str(write(tmp_path, WORKFLOW)))
    Workflow.model_validate(yaml.safe_load(result.stdout))
    again = run(runner, "--platform", "aws", str(write(tmp_path, result.stdout, "rendered.yaml")))
    assert again.exit_code == 0
    assert yaml.safe_load(again.stdout)["spec"] == yaml.safe_load(result.stdout)["spec"]


def test_gang_conflict_is_reported_instead_of_a_workflow(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "--platform", "gcp", str(write(tmp_path, WORKFLOW)))
    one_line_error(
        result,
        'spec.jobTemplate.spec.workloadMetadata.labels["kai.scheduler/queue"]: conflicting label value "team-b", expected "team-a"',
    )


def test_override_error_names_the_override(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "--platform", "oci", str(write(tmp_path, WORKFLOW)))
    one_line_error(result, 'spec.overrides[3].jobTemplatePatch[0]: path "/spec/nothing" does not exist')


def test_no_op_override_warns_on_stderr(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "--platform", "azure", str(write(tmp_path, WORKFLOW)))
    assert result.exit_code == 0
    assert result.stderr == (
        "warning: OverrideNoOp: Override[4] matched (platform=azure) but produced no changes — check field paths\n"
    )


def test_invalid_platform_lists_valid_names(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "--platform", "bogus", str(write(tmp_path, WORKFLOW)))
    one_line_error(result, f'invalid --platform "bogus": must be one of {PLATFORM_NAMES}')


def test_invalid_gpu_arch_lists_valid_names(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "--platform", "aws", "--gpu-arch", "gb2OO", str(write(tmp_path, WORKFLOW)))
    one_line_error(result, f'invalid --gpu-arch "gb2OO": must be one of {ARCH_NAMES}')


def test_invalid_output_format(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "-o", "xml", "--platform", "aws", str(write(tmp_path, WORKFLOW)))
    one_line_error(result, 'invalid --output "xml": must be one of yaml, json')


def test_missing_file(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    result = run(runner, "--platform", "aws", str(missing))
    one_line_error(result, f"{missing}: cannot read file: No such file or directory", code=2)


def test_not_yaml(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, "kind: [", "bad.yaml")
    result = run(runner, "--platform", "aws", str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {path}: not valid YAML (line ")
    assert result.stderr.count("\n") == 1


def test_wrong_kind(runner: CliRunner, tmp_path: Path) -> None:
    doc = copy.deepcopy(WORKFLOW)
    doc["kind"] = "WorkloadRun"
    path = write(tmp_path, doc)
    one_line_error(
        run(runner, "--platform", "aws", str(path)), f'{path}: expected kind Workflow, got "WorkloadRun"'
    )


def test_several_documents(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, yaml.safe_dump(WORKFLOW) + "---\n" + yaml.safe_dump(WORKFLOW))
    one_line_error(
        run(runner, "--platform", "aws", str(path)), f"{path}: expected exactly one object, found 2"
    )


def test_schema_violations_name_field_paths(runner: CliRunner, tmp_path: Path) -> None:
    doc = copy.deepcopy(WORKFLOW)
    doc["spec"]["orchestration"]["iterations"] = 0
    doc["spec"]["bogus"] = 1
    path = write(tmp_path, doc)
    result = run(runner, "--platform", "aws", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: ")
    assert "spec.orchestration.iterations" in result.stderr
    assert "spec.bogus: Unknown field" in result.stderr
    assert result.stderr.count("\n") == 1


def test_architecture_from_target_or_error(runner: CliRunner, tmp_path: Path) -> None:
    doc = copy.deepcopy(WORKFLOW)
    del doc["spec"]["orchestration"]["target"]
    result = run(runner, "--platform", "aws", str(write(tmp_path, doc)))
    one_line_error(
        result,
        "cannot determine GPU architecture: pass --gpu-arch or set nvidia.com/gpu.product in spec.orchestration.target.nodeSelector",
    )
    ok = run(runner, "--platform", "aws", "--gpu-arch", "h100", str(write(tmp_path, doc)))
    assert ok.exit_code == 0
    doc["spec"]["orchestration"]["target"] = {"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}}
    result = run(runner, "--platform", "aws", str(write(tmp_path, doc)))
    assert result.exit_code == 1
    assert "is not a known architecture; pass --gpu-arch" in result.stderr


def test_without_platform_overrides_stay_unresolved(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, str(write(tmp_path, WORKFLOW)))
    assert result.exit_code == 0
    rendered = yaml.safe_load(result.stdout)
    assert rendered["spec"] == WORKFLOW["spec"]
    assert rendered["metadata"]["annotations"] == {"nvcrectl.nvidia.com/detected-gpu-architecture": "h100"}
    assert (
        result.stderr
        == "note: no --platform given; 5 override(s) left unresolved (pass --platform to apply them)\n"
    )


def test_nodes_file(runner: CliRunner, tmp_path: Path) -> None:
    nodes = synthetic_nodes("aws", "h100", count=2) + synthetic_nodes(
        "aws", "a100", count=1, name_prefix="zz"
    )
    nodes_path = write(tmp_path, {"apiVersion": "v1", "kind": "List", "items": nodes}, "nodes.yaml")
    result = run(runner, "--nodes-file", str(nodes_path), str(write(tmp_path, WORKFLOW)))
    assert result.exit_code == 0, result.output
    annotations = yaml.safe_load(result.stdout)["metadata"]["annotations"]
    assert annotations["nvcrectl.nvidia.com/detected-platform"] == "aws"
    assert result.stderr == (
        "warning: HeterogeneousGPU: Filtered 2/3 nodes to primary GPU architecture h100; excluded: zz-0\n"
    )


def test_nodes_file_heterogeneous_platforms(runner: CliRunner, tmp_path: Path) -> None:
    nodes = synthetic_nodes("aws", "h100") + synthetic_nodes("gcp", "h100", name_prefix="g")
    nodes_path = write(tmp_path, nodes, "nodes.yaml")
    result = run(runner, "--nodes-file", str(nodes_path), str(write(tmp_path, WORKFLOW)))
    one_line_error(result, "heterogeneous platforms detected: map[aws:1 gcp:1]")


def test_nodes_file_excludes_platform_flags(runner: CliRunner, tmp_path: Path) -> None:
    nodes_path = write(tmp_path, synthetic_nodes("aws", "h100"), "nodes.yaml")
    result = run(runner, "--nodes-file", str(nodes_path), "--platform", "aws", str(write(tmp_path, WORKFLOW)))
    one_line_error(result, "--nodes-file cannot be combined with --platform or --gpu-arch")


def test_nodes_file_must_hold_nodes(runner: CliRunner, tmp_path: Path) -> None:
    nodes_path = write(tmp_path, [{"kind": "Pod", "metadata": {"name": "p"}}], "nodes.yaml")
    result = run(runner, "--nodes-file", str(nodes_path), str(write(tmp_path, WORKFLOW)))
    one_line_error(result, f"{nodes_path}: item 0 is not a Node")


def test_stdin(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["workflow", "render", "--platform", "aws", "-"], input=yaml.safe_dump(WORKFLOW)
    )
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["metadata"]["name"] == "nccl"


def test_help_lists_render(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["workflow", "--help"])
    assert result.exit_code == 0
    assert "render" in result.stdout


# --- resolve_workflow ----------------------------------------------------------------------------


def test_resolve_is_pure_and_reports_detection() -> None:
    original = copy.deepcopy(WORKFLOW)
    nodes = synthetic_nodes("aws", "h100", count=2)
    resolved = resolve_workflow(WORKFLOW, nodes)
    assert original == WORKFLOW
    assert resolved.platform.platform == "aws"
    assert resolved.gpu.architecture == "h100"
    assert [n["metadata"]["name"] for n in resolved.nodes] == ["synthetic-node-0", "synthetic-node-1"]
    assert [a.index for a in resolved.overrides.applied] == [0]
    assert resolved.overrides.status_records()[0]["patches"] == ["jobTemplate"]
    assert [e.reason for e in resolved.events] == ["OverrideApplied"]


def test_resolve_from_model_matches_dict() -> None:
    nodes = synthetic_nodes("aws", "h100")
    from_dict = resolve_workflow(WORKFLOW, nodes).spec
    from_model = resolve_workflow(Workflow.model_validate(WORKFLOW), nodes).spec
    assert from_model["jobTemplate"] == from_dict["jobTemplate"]
    assert from_model["dependencies"] == from_dict["dependencies"]


def test_resolve_restores_removed_queue_label() -> None:
    doc = copy.deepcopy(WORKFLOW)
    doc["spec"]["overrides"] = [
        {"when": {}, "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": None}}}}}
    ]
    resolved = resolve_workflow(doc, synthetic_nodes("onprem", "h100"))
    assert resolved.gang.restored
    assert resolved.spec["jobTemplate"]["spec"]["workloadMetadata"]["labels"] == {
        "kai.scheduler/queue": "team-a"
    }


def test_resolve_without_annotations_and_forced_detection() -> None:
    resolved = resolve_workflow(WORKFLOW, [], platform="aws", gpu_architecture="h100", annotate=False)
    assert "annotations" not in resolved.workflow["metadata"]
    assert resolved.platform.platform == "aws"
    assert resolved.overrides.context.gpu_architecture == "h100"


def test_resolve_errors_are_value_errors() -> None:
    with pytest.raises(HeterogeneousPlatformError):
        resolve_workflow(
            WORKFLOW, synthetic_nodes("aws", "h100") + synthetic_nodes("oci", "h100", name_prefix="o")
        )
    with pytest.raises(OverrideError):
        resolve_workflow(WORKFLOW, synthetic_nodes("oci", "h100"))
    bad = copy.deepcopy(WORKFLOW)
    bad["spec"]["orchestration"]["iterations"] = 0
    with pytest.raises(WorkflowResolveError, match=r"^spec\.orchestration\.iterations: "):
        resolve_workflow(bad, [])
