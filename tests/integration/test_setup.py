"""``nvcrectl setup init|status|reset`` with the real helm against a control plane of its own.

A control plane of this module's own, started without nvcre's or Trainer's CRDs (an empty
cluster, as setup meets one): installing Trainer's chart puts admission webhooks on it that no
controller serves here, which would break the shared control plane's TrainJobs. Nothing runs the
Deployments (no kube-controller-manager), so init runs with ``--no-wait``; tests/sandbox installs
the chart where the manager Deployment does become Available.

helm is the real binary (``nvcre.testing.binaries``), run through a wrapper that appends each
argv to a log and then execs it: the log is how a test shows helm was not called at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from nvcre import __version__, resources
from nvcre.testing import binaries
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.waiting import wait_for

NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
TOKEN = "ghp_setupTestToken0123456789"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "certification"


@dataclass
class Setup:
    control_plane: ControlPlane
    helm_log: Path
    env: dict[str, str]

    def run(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [NVCRECTL, "setup", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=600,
            check=False,
        )

    def helm_calls(self) -> list[list[str]]:
        if not self.helm_log.exists():
            return []
        return [json.loads(line) for line in self.helm_log.read_text().splitlines()]


@pytest.fixture(scope="module")
def setup_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    helm = binaries.ensure([binaries.HELM]).path(binaries.HELM)
    work = tmp_path_factory.mktemp("setup")
    log = work / "helm-calls.jsonl"
    wrapper = work / "helm"
    wrapper.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"os.execv({str(helm)!r}, [{str(helm)!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    with ControlPlane(crd_paths=[], install_trainer_crds=False) as cp:
        env = {
            **os.environ,
            "KUBECONFIG": str(cp.kubeconfig_path),
            "NVCRE_HELM": str(wrapper),
            "HELM_CACHE_HOME": str(work / "helm-cache"),
            "HELM_CONFIG_HOME": str(work / "helm-config"),
            "HELM_DATA_HOME": str(work / "helm-data"),
        }
        yield Setup(cp, log, env)


@pytest.fixture
def kube(setup_cluster: Setup) -> Iterator[Client]:
    with setup_cluster.control_plane.client() as client:
        yield client


def _nvcre_crds(kube: Client) -> list[str]:
    return sorted(
        c.metadata.name for c in kube.list(CustomResourceDefinition) if c.spec.group == "nvcre.nvidia.com"
    )


def test_status_without_the_controller_says_to_run_init(setup_cluster: Setup) -> None:
    result = setup_cluster.run("status")
    assert result.returncode == 0, result.stderr
    assert "Status: not ready — run 'nvcrectl setup init' to install missing components" in result.stdout
    assert "✗ not found" in result.stdout
    as_json = json.loads(setup_cluster.run("status", "-o", "json").stdout)
    assert as_json["installed"] is False
    assert as_json["components"]["nvcreCRDs"] is False
    assert as_json["components"]["nvcreController"] is False
    assert "nvcrectl setup init" in as_json["problems"]["nvcreCRDs"]


def test_version_without_a_manager_says_not_found(setup_cluster: Setup) -> None:
    result = subprocess.run(
        [NVCRECTL, "version"], capture_output=True, text=True, env=setup_cluster.env, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Client:  nvcrectl {__version__}",
        "Manager: not found (no Deployment labelled app.kubernetes.io/name=nvcre,"
        "app.kubernetes.io/component=manager in any namespace; 'nvcrectl setup init' installs it)",
    ]
    # The connection flags decide who asks: a user without RBAC may not list Deployments.
    refused = subprocess.run(
        [NVCRECTL, "version", "--as", "jane"],
        capture_output=True,
        text=True,
        env=setup_cluster.env,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 1, refused.stdout
    assert 'User "jane" cannot list resource "deployments"' in refused.stderr, refused.stderr


def test_init_answered_no_is_cancelled_without_calling_helm(setup_cluster: Setup, kube: Client) -> None:
    before = len(setup_cluster.helm_calls())
    result = setup_cluster.run("init", "--no-wait", stdin="n\n")
    assert result.returncode == 0, result.stderr
    assert "Only 'yes' will be accepted to confirm." in result.stderr
    assert "Init cancelled." in result.stderr
    assert setup_cluster.helm_calls()[before:] == []
    assert _nvcre_crds(kube) == []


def test_unknown_phase_is_refused(setup_cluster: Setup) -> None:
    result = setup_cluster.run("init", "--skip-phases", "deps,bogus", "--auto-approve")
    assert result.returncode == 1
    assert "unknown phase(s) bogus" in result.stderr
    assert "Traceback" not in result.stderr


def test_dry_run_prints_the_changes_and_makes_none(setup_cluster: Setup, kube: Client) -> None:
    result = setup_cluster.run("init", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"NVCRE Helm chart (nvcre-manager:{__version__})" in result.stderr
    assert (
        f"[helm] No --image given: the chart runs nvcre-manager:{__version__}, which no registry "
        "publishes. Build it from the Dockerfile at the root of the nvcre source"
    ) in result.stderr
    assert "CustomResourceDefinition certifications.nvcre.nvidia.com: create" in result.stdout
    assert "LogProfile nccl-bandwidth: create" in result.stdout
    assert '[helm] would install release "nvcre"' in result.stdout
    assert "[deps] would install Kubeflow Trainer" in result.stdout
    assert not any(call[0] in ("upgrade", "install", "uninstall") for call in setup_cluster.helm_calls())
    assert _nvcre_crds(kube) == []


def test_init_twice_then_reset(setup_cluster: Setup, kube: Client) -> None:
    """Init installs everything, a second init changes nothing, reset refuses while a
    Certification exists and, once it is gone, leaves no nvcre object behind."""
    first = setup_cluster.run("init", "--auto-approve", "--no-wait", "--image-pull-secret", TOKEN)
    assert first.returncode == 0, first.stderr
    assert "initialized successfully" in first.stderr
    assert TOKEN not in first.stdout + first.stderr
    assert not any(TOKEN in arg for call in setup_cluster.helm_calls() for arg in call)
    crds = _nvcre_crds(kube)
    assert "certifications.nvcre.nvidia.com" in crds
    for name in crds:  # server-side applied by setup, not only created by helm
        crd = kube.get(CustomResourceDefinition, name)
        assert any(f.manager == "nvcrectl-setup" for f in crd.metadata.managedFields or [])
    assert {p.metadata.name for p in kube.list(resources.LogProfile)} >= {
        "nccl-bandwidth",
        "megatron-training",
    }
    deployment = kube.get(Deployment, "nvcre-manager", namespace="nvcre")
    assert deployment.spec.template.spec.imagePullSecrets[0].name == "nvcrectl-pull-secret"
    kube.get(ClusterRole, "nvcre-manager")
    labels = kube.get(ClusterRole, "nvcre-view").metadata.labels or {}
    assert labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true"  # the roles for people
    trainer_crd = kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org")
    assert trainer_crd.metadata.labels is not None
    version = subprocess.run(
        [NVCRECTL, "version"], capture_output=True, text=True, env=setup_cluster.env, timeout=60, check=False
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines() == [
        f"Client:  nvcrectl {__version__}",
        f"Manager: {__version__} (Deployment nvcre/nvcre-manager, image nvcre-manager:{__version__}, 0/2 ready)",
    ]

    upgrades = sum(1 for call in setup_cluster.helm_calls() if call[0] == "upgrade")
    second = setup_cluster.run("init", "--auto-approve", "--no-wait", "--image-pull-secret", TOKEN)
    assert second.returncode == 0, second.stderr
    assert "already deployed at chart version" in second.stderr, second.stderr
    assert 'Release "nvcre" already deployed' in second.stderr
    assert sum(1 for call in setup_cluster.helm_calls() if call[0] == "upgrade") == upgrades
    assert (
        kube.get(Deployment, "nvcre-manager", namespace="nvcre").metadata.generation
        == deployment.metadata.generation
    )

    status = json.loads(setup_cluster.run("status", "-o", "json").stdout)
    assert status["components"]["nvcreCRDs"] and status["components"]["kubeflowTrainer"]
    assert status["components"]["logProfiles"]
    assert status["kubeflowTrainerVersion"]["source"] == "helm"
    assert {r["name"]: r["state"] for r in status["helmReleases"]} == {
        "nvcre": "deployed",
        "kubeflow-trainer": "deployed",
    }

    # The example a user applies, in its own namespace (nvcre's, which setup created).
    cert_doc = yaml.safe_load((EXAMPLES / "gpu-cluster-cert.yaml").read_text())
    namespace, name = cert_doc["metadata"]["namespace"], cert_doc["metadata"]["name"]
    kube.create(resources.Certification.from_dict(cert_doc))
    refused = setup_cluster.run("reset", "--auto-approve")
    assert refused.returncode == 1
    assert f"Certification/{name} (namespace: {namespace}) exists" in refused.stderr
    assert not any(call[0] == "uninstall" for call in setup_cluster.helm_calls())
    assert "certifications.nvcre.nvidia.com" in _nvcre_crds(kube)

    kube.delete(resources.Certification, name, namespace=namespace)  # no manager here: no finalizer
    wait_for(
        lambda: not list(kube.list(resources.Certification, namespace=namespace)), what=f"{name} deleted"
    )
    reset = setup_cluster.run("reset", "--auto-approve")
    assert reset.returncode == 0, reset.stderr
    assert "Retained resources:" in reset.stderr
    assert _nvcre_crds(kube) == []
    assert [c.metadata.name for c in kube.list(ClusterRole) if c.metadata.name.startswith("nvcre")] == []
    assert [
        b.metadata.name for b in kube.list(ClusterRoleBinding) if b.metadata.name.startswith("nvcre")
    ] == []
    assert list(kube.list(Deployment, namespace="nvcre")) == []
    assert not any(
        c.metadata.name.endswith("trainer.kubeflow.org") for c in kube.list(CustomResourceDefinition)
    )
    after_run = setup_cluster.run("status", "-o", "json")
    assert after_run.returncode == 0, after_run.stderr
    after = json.loads(after_run.stdout)
    assert {r["name"]: r["state"] for r in after["helmReleases"]} == {
        "nvcre": "not installed",
        "kubeflow-trainer": "not installed",
    }


def test_a_wheel_installs_and_plans_without_the_source(
    setup_cluster: Setup, kube: Client, tmp_path: Path
) -> None:
    """The release: the built wheel, installed alone in a fresh virtual environment, carries the
    chart, so ``setup init`` needs no ``--chart-ref`` (run away from the source tree, which is then
    not on the path)."""
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels), str(ROOT)],
        capture_output=True,
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("nvcre-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        check=True,
        timeout=600,
    )
    env = {k: v for k, v in setup_cluster.env.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from nvcre.cli import setup; print(setup.NVCRE_CHART)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=env,
    )
    chart = Path(where.stdout.strip())
    assert chart.is_relative_to(venv) and not chart.is_symlink()
    assert yaml.safe_load((chart / "Chart.yaml").read_text())["version"] == __version__

    result = subprocess.run(
        [str(venv / "bin" / "nvcrectl"), "setup", "init", "--dry-run", "--image", "x/nvcre-manager:1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "--chart-ref" not in result.stderr
    assert "NVCRE Helm chart (x/nvcre-manager:1)" in result.stderr
    assert "No --image given" not in result.stderr
    assert "CustomResourceDefinition certifications.nvcre.nvidia.com: create" in result.stdout
    assert "LogProfile nccl-bandwidth: create" in result.stdout
    assert f'[helm] would install release "nvcre" in nvcre (chart {__version__})' in result.stdout
    assert "[deps] would install Kubeflow Trainer" in result.stdout
    assert _nvcre_crds(kube) == []
