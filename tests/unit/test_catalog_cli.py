"""nvcrectl certification list-categories / render."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from nvcre.cli.main import cli

CERT = """
apiVersion: nvcre.nvidia.com/v1alpha1
kind: Certification
metadata: {name: c1, namespace: team-a}
spec:
  target: {nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
  categories:
  - {domain: communication, variant: nccl-all-reduce}
  - {domain: diagnostics, variant: dcgm-level4}
"""


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def cert(tmp_path: Path) -> Path:
    path = tmp_path / "cert.yaml"
    path.write_text(CERT)
    return path


def test_list_categories_table_is_domain_and_variant() -> None:
    code, out, _ = _run("certification", "list-categories")
    assert code == 0
    lines = out.splitlines()
    assert re.match(r"^DOMAIN {15}VARIANT$", lines[0])
    assert "communication        nccl-all-reduce" in lines
    assert lines[1:] == [
        "communication        nccl-all-gather",
        "communication        nccl-all-reduce",
        "communication        nccl-alltoall",
        "communication        nccl-loopback",
        "communication        nccl-loopback-nvswitch",
        "diagnostics          dcgm-level1",
        "diagnostics          dcgm-level2",
        "diagnostics          dcgm-level3",
        "diagnostics          dcgm-level4",
        "training             nemotron5-56b",
        "training             nemotron5-8b",
    ]


def test_list_categories_wide_adds_framework_timeout_and_description() -> None:
    code, out, _ = _run("certification", "list-categories", "-o", "wide")
    assert code == 0
    lines = out.splitlines()
    assert re.match(r"^DOMAIN {15}VARIANT {18}FRAMEWORK +TIMEOUT +DESCRIPTION$", lines[0])
    assert len(lines) == 12
    row = next(line for line in lines if " dcgm-level4 " in line)
    assert row.startswith("diagnostics          dcgm-level4 ")
    assert re.search(r"\btorch\s+2h\s+DCGM diagnostics level 4", row)
    row = next(line for line in lines if " dcgm-level1 " in line)
    assert re.search(r"\btorch\s+1h\s+DCGM diagnostics level 1 \(dcgmi diag --run 1\)", row)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_list_categories_structured(fmt: str) -> None:
    code, out, _ = _run("certification", "list-categories", "-o", fmt)
    assert code == 0
    items = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    entry = next(i for i in items if i["variant"] == "nemotron5-56b")
    assert entry == {
        "domain": "training",
        "variant": "nemotron5-56b",
        "framework": "torch",
        "description": entry["description"],
        "timeoutPerJob": "24h",
        "minGPUs": 32,
    }


def test_list_categories_rejects_arguments() -> None:
    code, _, err = _run("certification", "list-categories", "extra")
    assert code == 1
    assert err.strip() == "Error: list-categories takes no arguments, got extra"


def test_render_offline_yaml_stream(cert: Path) -> None:
    code, out, _ = _run("certification", "render", str(cert))
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert [d["metadata"]["labels"]["nvcre.nvidia.com/category-variant"] for d in docs] == [
        "nccl-all-reduce",
        "dcgm-level4",
    ]
    assert all(d["kind"] == "Workflow" and d["apiVersion"] == "nvcre.nvidia.com/v1alpha1" for d in docs)
    assert docs[1]["metadata"]["name"] == "c1-diagnostics-dcgm-level4"
    assert docs[1]["metadata"]["namespace"] == "team-a"
    # without --platform the overrides stay for the controller and no platform is claimed
    assert "overrides" in docs[0]["spec"]
    assert docs[0]["metadata"]["annotations"] == {"nvcrectl.nvidia.com/detected-gpu-architecture": "h100"}


def test_render_with_platform_json_records_detection(cert: Path) -> None:
    code, out, _ = _run(
        "certification", "render", "--platform", "oci", "-o", "json", "-n", "other", str(cert)
    )
    assert code == 0
    docs = json.loads(out)
    annotations = docs[1]["metadata"]["annotations"]
    assert annotations["nvcrectl.nvidia.com/detected-platform"] == "oci"
    applied = json.loads(annotations["nvcrectl.nvidia.com/applied-overrides"])
    assert applied == [{"index": 2, "when": "platform=oci", "patches": "1 dependencies", "noOp": False}]
    assert docs[1]["metadata"]["namespace"] == "other"
    assert "overrides" not in docs[1]["spec"]


def test_render_gpu_arch_flag_wins_over_the_selector(cert: Path) -> None:
    code, out, _ = _run(
        "certification", "render", "--platform", "aws", "--gpu-arch", "NVIDIA-GB200", str(cert)
    )
    assert code == 0
    first = next(yaml.safe_load_all(out))
    assert first["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-gpu-architecture"] == "gb200"


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        ((), "Error: requires a certification YAML file as argument", 1),
        (("--platform", "x", "CERT"), 'Error: invalid --platform "x": must be one of aws, gcp, azure', 1),
        (
            ("--dry-run", "--gpu-arch", "h100", "CERT"),
            "Error: --gpu-arch cannot be combined with --dry-run",
            1,
        ),
        (("-o", "table", "CERT"), 'Error: invalid --output "table": must be one of yaml, json', 1),
        (("/nonexistent/cert.yaml",), "Error: /nonexistent/cert.yaml: cannot read file", 2),
    ],
)
def test_render_rejections_are_one_line(cert: Path, args: tuple[str, ...], message: str, status: int) -> None:
    code, out, err = _run("certification", "render", *(str(cert) if a == "CERT" else a for a in args))
    assert code == status
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(message)


def test_render_rejects_a_non_certification(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text("apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: x}\n")
    code, _, err = _run("certification", "render", str(path))
    assert code == 1
    assert 'expected kind Certification, got "Workflow"' in err


def test_dry_run_with_an_unusable_kubeconfig_is_one_line(cert: Path, tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\n")
    code, out, err = _run("certification", "render", "--dry-run", "--kubeconfig", str(bad), str(cert))
    assert code == 1 and out == ""
    assert err.startswith("Error: cannot load kubeconfig:") and len(err.strip().splitlines()) == 1


class _Client:
    """Stands in for a lightkube client: serves a node list and records dry-run creates."""

    def __init__(self, nodes: list[dict[str, object]]) -> None:
        self.nodes = nodes
        self.listed: list[dict[str, object]] = []
        self.created: list[tuple[object, bool]] = []

    def list(
        self, res: object, *, labels: dict[str, object] | None = None, fields: object = None
    ) -> list[object]:
        """The nodes; no other kind (ResourceSlices, kube-system pods) has any object here."""
        if getattr(res, "__name__", "") != "Node":
            return []
        assert labels is not None
        self.listed.append(labels)

        class _Obj:
            def __init__(self, data: dict[str, object]) -> None:
                self.data = data

            def to_dict(self) -> dict[str, object]:
                return self.data

        return [_Obj(n) for n in self.nodes]

    def create(self, obj: object, *, dry_run: bool) -> None:
        self.created.append((obj, dry_run))


def test_dry_run_discovers_schedulable_target_nodes_and_validates_server_side(
    cert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nvcre.cli import certification as command

    def node(name: str, unschedulable: bool = False) -> dict[str, object]:
        return {
            "metadata": {
                "name": name,
                "labels": {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                },
            },
            "spec": {"providerID": "aws:///us-east-1a/i-" + name, "unschedulable": unschedulable},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        }

    client = _Client([node("b"), node("a"), node("c", unschedulable=True)])
    monkeypatch.setattr(command.connection, "client", lambda kubeconfig, context: client)
    code, out, err = _run("certification", "render", "--dry-run", str(cert))
    assert code == 0, err
    assert client.listed == [
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.present": "true"}
    ]
    docs = list(yaml.safe_load_all(out))
    assert docs[0]["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-platform"] == "aws"
    assert docs[0]["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["numNodes"] == 2  # a, b
    assert [dry for _, dry in client.created] == [True, True]
    assert "Dry-run validation: c1-communication-nccl-all-16989 accepted" in err


@pytest.mark.parametrize("level", ["1", "2"])
def test_render_dcgm_levels_one_and_two(tmp_path: Path, level: str) -> None:
    path = tmp_path / "cert.yaml"
    path.write_text(CERT.replace("dcgm-level4", f"dcgm-level{level}"))
    code, out, _ = _run("certification", "render", "--platform", "aws", str(path))
    assert code == 0
    workflow = list(yaml.safe_load_all(out))[1]
    assert workflow["metadata"]["name"] == f"c1-diagnostics-dcgm-level{level}"
    trainer = workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    assert trainer["command"] == ["dcgmi"]
    assert trainer["args"][:5] == ["diag", "--host", "nvidia-dcgm.gpu-operator.svc:5555", "--run", level]
    assert workflow["spec"]["orchestration"]["execution"]["timeoutPerJob"] == "1h"
