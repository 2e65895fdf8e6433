"""`nvcrectl validate`: one line per object, the field path for every problem, exit 1 on any."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from nvcre.cli.main import cli

EXAMPLES = Path(__file__).parents[2] / "examples"
GOOD = """\
apiVersion: nvcre.nvidia.com/v1alpha1
kind: WorkloadRun
metadata: {name: ok}
spec:
  image: img
  framework: {exec: {command: [nvidia-smi]}}
  numNodes: 1
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_examples_directory_is_valid() -> None:
    code, out, err = run("validate", str(EXAMPLES))
    assert code == 0, err
    assert "examples/workloadrun/nccl-all-reduce.yaml: WorkloadRun/nccl-all-reduce: OK" in out
    assert err == ""


def test_every_violation_is_reported_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("numNodes: 1", "numNodes: 0\n  gpusPerNode: 0") + "---\n" + GOOD)
    code, out, err = run("validate", str(bad))
    assert code == 1
    assert f"{bad}: WorkloadRun/ok: OK" in out
    assert "spec.numNodes: Invalid value: 0" in err
    assert "spec.gpusPerNode: Invalid value: 0" in err
    assert err.strip().endswith("1 of 2 objects invalid")


def test_not_yaml_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("kind: [unclosed\n")
    code, _, err = run("validate", str(bad))
    assert code == 2
    assert err.splitlines() == [
        f"Error: {bad}: not valid YAML (line 2, column 1): did not find expected ',' or ']'"
    ]


def test_unknown_kind_and_api_version(tmp_path: Path) -> None:
    bad = tmp_path / "kinds.yaml"
    bad.write_text(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Benchmark\nmetadata: {name: a}\n---\n"
        "apiVersion: cre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: b}\n"
    )
    code, _, err = run("validate", str(bad))
    assert code == 1
    assert "Benchmark/a: kind: unknown kind 'Benchmark' in nvcre.nvidia.com/v1alpha1; known kinds:" in err
    assert "WorkloadRun/b: apiVersion: unsupported apiVersion 'cre.nvidia.com/v1alpha1'" in err


def test_missing_required_field(tmp_path: Path) -> None:
    bad = tmp_path / "missing.yaml"
    bad.write_text(GOOD.replace("  image: img\n", ""))
    code, _, err = run("validate", str(bad))
    assert code == 1
    assert f"{bad}: WorkloadRun/ok: spec.image: Required value" in err


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    code, _, err = run("validate", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert err == f"Error: {tmp_path / 'nope.yaml'}: cannot read file: No such file or directory\n"


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0
    assert out.startswith("nvcrectl ")


def test_a_measurement_profile_is_looked_for_among_the_files_validated(tmp_path: Path) -> None:
    run_file = tmp_path / "run.yaml"
    run_file.write_text(GOOD + "  goodputMeasurement: {logProfileRef: my-training, sampleInterval: 30s}\n")
    code, out, err = run("validate", str(run_file))
    assert (code, out) == (0, f"{run_file}: WorkloadRun/ok: OK\n")
    assert err == (
        f"{run_file}: WorkloadRun/ok: warning: spec.goodputMeasurement.logProfileRef: LogProfile "
        '"my-training" is neither built in (megatron-bridge, megatron-training, nccl-all-reduce, '
        "nccl-bandwidth, nccl-loopback, nemo-training, nemo4) nor among the manifests validated; it must exist on the cluster\n"
    )
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: LogProfile\nmetadata: {name: my-training}\n"
        "spec:\n  timestamp: {layout: '2006-01-02 15:04:05'}\n"
        "  patterns: {bandwidthResult: {regex: '(?P<size>[0-9]+) (?P<algBW>[0-9.]+) (?P<busBW>[0-9.]+)'}}\n"
    )
    code, _, err = run("validate", str(run_file), str(profile))
    assert code == 1
    assert err.splitlines() == [
        f'{run_file}: WorkloadRun/ok: spec.goodputMeasurement.logProfileRef: LogProfile "my-training" has no '
        "spec.patterns.trainingStep, which this measurement reads",
        "1 of 2 objects invalid",
    ]
