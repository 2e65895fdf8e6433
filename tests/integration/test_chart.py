"""charts/nvcre and config/ are one source: the check passes on the repository and fails on any
difference between them (rendered with the real helm; no control plane needed)."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from nvcre import __version__
from nvcre.setup import chart
from nvcre.setup.helm import Helm
from nvcre.testing import binaries

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def helm() -> Helm:
    return Helm(str(binaries.ensure([binaries.HELM]).path(binaries.HELM)))


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "charts" / "nvcre", tmp_path / "chart")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path


def check(helm: Helm, root: Path) -> int:
    return chart.main(
        ["--check", "--chart", str(root / "chart"), "--config", str(root / "config"), "--helm", helm.binary]
    )


def test_the_repository_is_in_sync(helm: Helm, copy: Path) -> None:
    assert check(helm, copy) == 0


def test_a_chart_default_that_config_lacks_fails(
    helm: Helm, copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = copy / "chart" / "values.yaml"
    values.write_text(values.read_text().replace("replicas: 2", "replicas: 3"))
    assert check(helm, copy) == 1
    assert "config/manager/manager.yaml: out of date" in capsys.readouterr().err


def test_a_hand_edited_config_file_fails(helm: Helm, copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    role = copy / "config" / "rbac" / "role.yaml"
    doc = yaml.safe_load(role.read_text())
    doc["rules"][0]["verbs"].append("patch")
    role.write_text(yaml.safe_dump(doc))
    assert check(helm, copy) == 1
    assert "ClusterRole nvcre-manager differs from the chart's render" in capsys.readouterr().err


def test_an_object_only_config_has_fails(helm: Helm, copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (copy / "config" / "rbac" / "extra.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n"
    )
    assert check(helm, copy) == 1
    assert "ConfigMap extra is not in the chart's render" in capsys.readouterr().err


def test_a_stale_chart_crd_fails(helm: Helm, copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (copy / "chart" / "crds" / "nvcre.nvidia.com_jobs.yaml").unlink()
    assert check(helm, copy) == 1
    assert "nvcre.nvidia.com_jobs.yaml: out of date" in capsys.readouterr().err


def test_a_value_missing_from_the_readme_fails(
    helm: Helm, copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = copy / "chart" / "values.yaml"
    values.write_text(values.read_text() + "# Something new.\nextra: 1\n")
    assert check(helm, copy) == 1
    assert "README.md: out of date" in capsys.readouterr().err
    chart.main(["--chart", str(copy / "chart"), "--config", str(copy / "config"), "--helm", helm.binary])
    assert "| `extra` | `1` | Something new. |" in (copy / "chart" / "README.md").read_text()


def test_helm_package(helm: Helm, tmp_path: Path) -> None:
    """The chart packages as it is (a chart repository or OCI registry takes the archive), with
    its README of values."""
    done = subprocess.run(
        [helm.binary, "package", str(ROOT / "charts" / "nvcre"), "--destination", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(tmp_path / f"nvcre-{__version__}.tgz") as archive:
        readme = archive.extractfile("nvcre/README.md")
        assert readme is not None
        text = readme.read().decode()
    assert '| `manager.image.repository` | `"nvcre-manager"` |' in text
    assert "docker build -t REGISTRY/nvcre-manager:TAG ." in text


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], f"nvcre-manager:{__version__}"),
        ([f"manager.image.digest=sha256:{'b' * 64}"], f"nvcre-manager@sha256:{'b' * 64}"),
        (["manager.image.tag=v9"], "nvcre-manager:v9"),
    ],
)
def test_image_by_tag_or_digest(helm: Helm, values: list[str], expected: str) -> None:
    rendered = chart.render_chart(helm, ROOT / "charts" / "nvcre", values)
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == expected


def test_service_monitor_and_scheduling_values(helm: Helm) -> None:
    rendered = chart.render_chart(
        helm,
        ROOT / "charts" / "nvcre",
        [
            "metrics.serviceMonitor.enabled=true",
            "manager.nodeSelector.role=infra",
            "manager.extraArgs[0]=--lease-duration=30",
            "manager.leaderElection.enabled=false",
        ],
    )
    kinds = {d["kind"] for d in rendered}
    assert "ServiceMonitor" in kinds
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"role": "infra"}
    assert "--lease-duration=30" in pod["containers"][0]["args"]
    assert "--leader-elect" not in pod["containers"][0]["args"]


def test_helm_lint(helm: Helm) -> None:
    for path in (ROOT / "charts" / "nvcre", ROOT / "src" / "nvcre" / "setup" / "charts" / "kubeflow-trainer"):
        done = subprocess.run([helm.binary, "lint", str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
