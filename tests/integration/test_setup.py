"""``nvcrectl setup init|status|reset`` with the real helm against a control plane of its own.

A control plane of this module's own, started without nvcre's or Trainer's CRDs (an empty
cluster, as setup meets one): installing Trainer's chart puts admission webhooks on it that no
controller serves here, which would break the shared control plane's TrainJobs. Nothing runs the
Deployments (no kube-controller-manager), so init runs with ``--no-wait``; tests/sandbox installs
the chart where the manager Deployment does become Available.

helm is the real binary (``nvcre.testing.binaries``), run through a wrapper that appends each
argv to a log and then execs it: the log is how a test shows helm was not called at all.
``Setup.fail_once(prefix, stderr)`` makes the wrapper answer the next call whose argv starts with
``prefix`` with ``stderr`` and exit status 1 instead of running helm (the call is still logged):
how a test meets a helm failure it cannot cause for real here. Several such failures may wait at
once, each for its own prefix.

A test that installs something removes it again (``setup reset``) or uses names no other test
uses, so the tests pass in any order. Namespaces stay: with no kube-controller-manager a deleted
namespace is never finalized unless a test does what the namespace controller would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.models.core_v1 import NamespaceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import (
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from nvcre import __version__, resources
from nvcre.cli.setup import NVCRE_CHART, TRAINER_CHART
from nvcre.setup import plan
from nvcre.testing import binaries
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.waiting import wait_for

NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
TOKEN = "ghp_setupTestToken0123456789"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "certification"
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
TRAINER_UPGRADE = ["upgrade", "--install", "kubeflow-trainer"]
NVCRE_UPGRADE = ["upgrade", "--install", "nvcre"]


@dataclass
class Setup:
    control_plane: ControlPlane
    helm_log: Path
    helm_fail: Path
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

    def fail_once(self, prefix: Sequence[str], stderr: str) -> None:
        """The next helm call whose argv starts with ``prefix`` prints ``stderr`` and exits 1."""
        rules = json.loads(self.helm_fail.read_text()) if self.helm_fail.exists() else []
        self.helm_fail.write_text(json.dumps([*rules, {"prefix": list(prefix), "stderr": stderr}]))


@pytest.fixture(scope="module")
def setup_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    helm = binaries.ensure([binaries.HELM]).path(binaries.HELM)
    work = tmp_path_factory.mktemp("setup")
    log = work / "helm-calls.jsonl"
    fail = work / "helm-fail-once.json"
    wrapper = work / "helm"
    wrapper.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"rules = json.load(open({str(fail)!r})) if os.path.exists({str(fail)!r}) else []\n"
        "for rule in rules:\n"
        "    if sys.argv[1 : 1 + len(rule['prefix'])] == rule['prefix']:\n"
        "        rules.remove(rule)\n"
        f"        json.dump(rules, open({str(fail)!r}, 'w'))\n"
        "        sys.stderr.write(rule['stderr'])\n"
        "        sys.exit(1)\n"
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
        yield Setup(cp, log, fail, env)


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
    before = len(setup_cluster.helm_calls())
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
    assert not any(
        call[0] in ("upgrade", "install", "uninstall") for call in setup_cluster.helm_calls()[before:]
    )
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
    before_refused = len(setup_cluster.helm_calls())
    refused = setup_cluster.run("reset", "--auto-approve")
    assert refused.returncode == 1
    assert f"Certification/{name} (namespace: {namespace}) exists" in refused.stderr
    assert not any(call[0] == "uninstall" for call in setup_cluster.helm_calls()[before_refused:])
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


# -- JobSet ownership, skipped phases, chart refs and recovery (user reports 7, 8 and 9) ---------


def _calls_since(setup: Setup, before: int) -> list[list[str]]:
    return setup.helm_calls()[before:]


def _starting(calls: list[list[str]], prefix: Sequence[str]) -> list[list[str]]:
    return [call for call in calls if call[: len(prefix)] == list(prefix)]


def _reset(setup: Setup) -> None:
    done = setup.run("reset", "--auto-approve")
    assert done.returncode == 0, done.stderr


def _delete_crd(kube: Client, name: str) -> None:
    try:
        kube.delete(CustomResourceDefinition, name)
    except ApiError as error:
        if error.status.code != 404:
            raise
    wait_for(lambda: _crd_or_none(kube, name) is None, what=f"CRD {name} deleted")


def _crd_or_none(kube: Client, name: str) -> CustomResourceDefinition | None:
    try:
        return kube.get(CustomResourceDefinition, name)
    except ApiError as error:
        if error.status.code == 404:
            return None
        raise


def _ensure_namespace(kube: Client, name: str) -> None:
    kube.apply(Namespace(metadata=ObjectMeta(name=name)), field_manager="test-setup")


def _jobset_deployment(namespace: str, name: str, image: str) -> Deployment:
    labels = {"control-plane": "controller-manager"}
    return from_dict(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "manager", "image": image}]},
                },
            },
        }
    )


def test_reset_keeps_a_jobset_crd_setup_did_not_install(setup_cluster: Setup, kube: Client) -> None:
    """User report 7: a JobSet CRD that was there before init (crd-only: Trainer's bundled JobSet
    is kept, helm skips the existing CRD) survives reset, which warns that it is retained."""
    _delete_crd(kube, JOBSET_CRD)  # a JobSet CRD an earlier install left: this test brings its own
    kube.create(
        from_dict(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": JOBSET_CRD, "labels": {"installed-by": "another-team"}},
                "spec": {
                    "group": "jobset.x-k8s.io",
                    "scope": "Namespaced",
                    "names": {
                        "kind": "JobSet",
                        "listKind": "JobSetList",
                        "plural": "jobsets",
                        "singular": "jobset",
                    },
                    "versions": [
                        {
                            "name": "v1alpha2",
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    ],
                },
            }
        )
    )
    uid = kube.get(CustomResourceDefinition, JOBSET_CRD).metadata.uid
    try:
        before = len(setup_cluster.helm_calls())
        init = setup_cluster.run("init", "--auto-approve", "--no-wait", "--skip-phases=helm")
        assert init.returncode == 0, init.stderr
        (install,) = _starting(_calls_since(setup_cluster, before), TRAINER_UPGRADE)
        assert "jobset.install=false" not in install  # crd-only: the bundled JobSet controller is wanted
        assert kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org")

        reset = setup_cluster.run("reset", "--auto-approve")
        assert reset.returncode == 0, reset.stderr
        assert f'[deps] Uninstalling release "{plan.TRAINER_RELEASE}"...' in reset.stderr
        assert "  Trainer CRDs removed." in reset.stderr
        assert (
            f"  warning: the shared CRD {JOBSET_CRD} is retained (other workloads may use JobSet)"
            in reset.stderr
        )
        assert _starting(_calls_since(setup_cluster, before), ["uninstall", plan.TRAINER_RELEASE])
        for name in plan.TRAINER_CRDS:
            assert _crd_or_none(kube, name) is None, name
        kept = kube.get(CustomResourceDefinition, JOBSET_CRD)
        assert kept.metadata.uid == uid
        assert kept.metadata.deletionTimestamp is None
        assert (kept.metadata.labels or {}).get("installed-by") == "another-team"
    finally:
        _delete_crd(kube, JOBSET_CRD)


def test_init_with_an_external_jobset_installs_trainer_without_its_jobset(
    setup_cluster: Setup, kube: Client
) -> None:
    """User report 7: the upstream kustomize JobSet install (jobset-controller-manager and a webhook
    calling jobset-webhook-service in its namespace) is external: Trainer is installed with
    ``--set jobset.install=false`` and so runs no JobSet controller of its own."""
    namespace = "jobset-system"
    _ensure_namespace(kube, namespace)
    deployment = _jobset_deployment(
        namespace, "jobset-controller-manager", "registry.k8s.io/jobset/jobset:v0.8.1"
    )
    webhook = from_dict(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "jobset-validating-webhook-configuration"},
            "webhooks": [
                {
                    "name": "vjobset.kb.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Ignore",
                    "clientConfig": {
                        "service": {
                            "namespace": namespace,
                            "name": "jobset-webhook-service",
                            "path": "/validate",
                        }
                    },
                    "rules": [
                        {
                            "apiGroups": ["jobset.x-k8s.io"],
                            "apiVersions": ["v1alpha2"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["jobsets"],
                        }
                    ],
                }
            ],
        }
    )
    kube.create(deployment)
    kube.create(webhook)
    try:
        before = len(setup_cluster.helm_calls())
        init = setup_cluster.run("init", "--auto-approve", "--no-wait", "--skip-phases=helm")
        assert init.returncode == 0, init.stderr
        assert "[deps] Installing Kubeflow Trainer v" in init.stderr
        (install,) = _starting(_calls_since(setup_cluster, before), TRAINER_UPGRADE)
        flag = install.index("jobset.install=false")
        assert install[flag - 1] == "--set"
        ours = [d.metadata.name for d in kube.list(Deployment, namespace=plan.TRAINER_NAMESPACE)]
        assert ours and not [name for name in ours if "jobset" in name], ours

        _reset(setup_cluster)
        assert kube.get(Deployment, "jobset-controller-manager", namespace=namespace)  # not ours to remove
        assert kube.get(ValidatingWebhookConfiguration, "jobset-validating-webhook-configuration")
    finally:
        kube.delete(ValidatingWebhookConfiguration, "jobset-validating-webhook-configuration")
        kube.delete(Deployment, "jobset-controller-manager", namespace=namespace)


def test_init_with_an_unknown_jobset_owner_stops_before_changing_anything(
    setup_cluster: Setup, kube: Client
) -> None:
    """User report 7: a JobSet controller that is neither Trainer's nor a recognised install
    (no jobset chart label, not the kustomize layout) stops init before helm installs anything
    and says how to go on by hand."""
    namespace = "jobset-fork"
    _ensure_namespace(kube, namespace)
    kube.create(_jobset_deployment(namespace, "jobset-fork-controller", "example.com/jobset-fork:v1"))
    try:
        before = len(setup_cluster.helm_calls())
        init = setup_cluster.run("init", "--auto-approve", "--no-wait")
        assert init.returncode == 1, init.stderr
        assert (
            "[deps] Cannot tell who owns JobSet on this cluster (a JobSet webhook or controller that is "
            "neither Trainer's nor a recognised JobSet install). Install Kubeflow Trainer yourself, then run "
            "'nvcrectl setup init --skip-phases=deps'."
        ) in init.stderr
        assert init.stderr.rstrip().endswith("Error: [deps] stopped before changing anything")
        assert "initialized successfully" not in init.stderr
        # Only the read-only release query ran: no install, no chart read, no phase helm.
        assert [call[0] for call in _calls_since(setup_cluster, before)] == ["list"]
        assert _crd_or_none(kube, "trainjobs.trainer.kubeflow.org") is None
        assert _nvcre_crds(kube) == []
    finally:
        kube.delete(Deployment, "jobset-fork-controller", namespace=namespace)


def test_skipped_helm_phase_calls_no_helm_for_nvcre(setup_cluster: Setup, kube: Client) -> None:
    """User report 7: ``--skip-phases=helm`` installs (init) and removes (reset) Kubeflow Trainer
    only: no helm call names nvcre's release or chart, and no nvcre CRD appears."""
    before = len(setup_cluster.helm_calls())
    init = setup_cluster.run("init", "--auto-approve", "--no-wait", "--skip-phases=helm")
    assert init.returncode == 0, init.stderr
    assert f"    [helm]  NVCRE Helm chart (nvcre-manager:{__version__}) (skipped)" in init.stderr
    assert "[helm] Skipped." in init.stderr
    assert "No --image given" not in init.stderr  # the notice is about the skipped phase
    calls = _calls_since(setup_cluster, before)
    assert len(_starting(calls, TRAINER_UPGRADE)) == 1  # phase deps did run
    assert _starting(calls, NVCRE_UPGRADE) == []
    assert not [call for call in calls if str(NVCRE_CHART) in call or f"^{plan.RELEASE}$" in call]
    assert _nvcre_crds(kube) == []
    assert list(kube.list(Deployment, namespace=plan.NAMESPACE)) == []

    middle = len(setup_cluster.helm_calls())
    reset = setup_cluster.run("reset", "--auto-approve", "--skip-phases=helm")
    assert reset.returncode == 0, reset.stderr
    assert "[helm] Skipped." in reset.stderr
    calls = _calls_since(setup_cluster, middle)
    assert _starting(calls, ["uninstall", plan.TRAINER_RELEASE])
    assert _starting(calls, ["uninstall", plan.RELEASE]) == []
    assert not [call for call in calls if f"^{plan.RELEASE}$" in call]
    assert _crd_or_none(kube, "trainjobs.trainer.kubeflow.org") is None


def test_init_installs_from_the_chart_refs_given(setup_cluster: Setup, kube: Client, tmp_path: Path) -> None:
    """User report 9 (air gap): ``--chart-ref`` and ``--trainer-chart-ref`` name the charts every
    helm call reads and installs; the charts shipped with nvcre are not touched. The mirrors are
    local copies of those charts, installed for real."""
    mirror_nvcre, mirror_trainer = tmp_path / "mirror" / "nvcre", tmp_path / "mirror" / "kubeflow-trainer"
    shutil.copytree(NVCRE_CHART, mirror_nvcre)
    shutil.copytree(TRAINER_CHART, mirror_trainer)
    before = len(setup_cluster.helm_calls())
    init = setup_cluster.run(
        "init",
        "--auto-approve",
        "--no-wait",
        "--chart-ref",
        str(mirror_nvcre),
        "--trainer-chart-ref",
        str(mirror_trainer),
    )
    try:
        assert init.returncode == 0, init.stderr
        assert "initialized successfully" in init.stderr
        calls = _calls_since(setup_cluster, before)
        (trainer,) = _starting(calls, TRAINER_UPGRADE)
        assert trainer[3] == str(mirror_trainer)
        (nvcre,) = _starting(calls, NVCRE_UPGRADE)
        assert nvcre[3] == str(mirror_nvcre)
        assert _starting(calls, ["show", "crds", str(mirror_nvcre)])
        assert _starting(calls, ["show", "chart", str(mirror_nvcre)])
        shipped = {str(NVCRE_CHART), str(NVCRE_CHART.resolve()), str(TRAINER_CHART)}
        assert not [call for call in calls if shipped & set(call)]
        assert not [call for call in calls if any(arg.startswith("oci://") for arg in call)]
        assert "certifications.nvcre.nvidia.com" in _nvcre_crds(kube)
        assert kube.get(Deployment, "nvcre-manager", namespace=plan.NAMESPACE)
    finally:
        _reset(setup_cluster)


CONFLICT = (
    "Error: UPGRADE FAILED: conflict occurred while applying object kubeflow-system/"
    "kubeflow-trainer-webhook-cert /v1, Kind=Secret: Apply failed with 1 conflict: conflict with "
    '"trainer-controller-manager" using v1: .data\n'
)
"""What helm printed when a retried init met the Secrets Trainer's controller had written (user
report 8): the wrapper answers with it, as no helm that does not server-side apply can meet it."""


def _failed_trainer_release(setup: Setup) -> None:
    """A partial install, as an interrupted init leaves one: the real helm installs the shipped
    Trainer chart and gives up waiting for its rollout (nothing runs Deployments here), so the
    release is ``failed`` with its CRDs and namespace in place."""
    helm = binaries.ensure([binaries.HELM]).path(binaries.HELM)
    done = subprocess.run(
        [
            str(helm),
            *TRAINER_UPGRADE,
            str(TRAINER_CHART),
            "--namespace",
            plan.TRAINER_NAMESPACE,
            "--create-namespace",
            "--wait",
            "--timeout",
            "1s",
        ],
        capture_output=True,
        text=True,
        env=setup.env,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0, done.stdout
    status = json.loads(setup.run("status", "-o", "json").stdout)
    assert {r["name"]: r["state"] for r in status["helmReleases"]}[plan.TRAINER_RELEASE] == "failed"


@contextmanager
def _namespace_finalizer(setup: Setup, name: str) -> Iterator[None]:
    """What kube-controller-manager's namespace controller does, which this control plane lacks:
    once ``name`` is being deleted, clear its finalizers so that the deletion completes."""
    stop = threading.Event()

    def finalize() -> None:
        with setup.control_plane.client() as client:
            while not stop.wait(0.2):
                try:
                    namespace = client.get(Namespace, name)
                except ApiError:
                    continue
                if namespace.metadata.deletionTimestamp and namespace.spec and namespace.spec.finalizers:
                    try:
                        client.replace(
                            Namespace.Finalize(
                                metadata=ObjectMeta(name=name), spec=NamespaceSpec(finalizers=[])
                            ),
                            name,
                        )
                    except ApiError:
                        continue  # gone or changed meanwhile: look again

    thread = threading.Thread(target=finalize, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def test_a_partial_trainer_install_is_recovered_in_order(setup_cluster: Setup, kube: Client) -> None:
    """User report 8: a retried init whose Trainer upgrade fails with the Secret ``.data`` conflict,
    on a release left ``failed``, recovers: helm uninstall, then the Trainer CRDs, then the
    namespace, then one reinstall, each printed; the reinstall makes a new namespace and new CRDs."""
    _failed_trainer_release(setup_cluster)
    old_namespace = kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid
    old_crd = kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org").metadata.uid
    before = len(setup_cluster.helm_calls())
    setup_cluster.fail_once(TRAINER_UPGRADE, CONFLICT)
    try:
        with _namespace_finalizer(setup_cluster, plan.TRAINER_NAMESPACE):
            init = setup_cluster.run("init", "--auto-approve", "--no-wait", "--skip-phases=helm")
        assert init.returncode == 0, init.stderr
        assert '[deps] Kubeflow Trainer release is in state "failed"; attempting install of v' in init.stderr
        steps = [
            "[deps][recover] Plan: uninstall the release, delete the Trainer CRDs and kubeflow-system, reinstall.",
            f"[deps][recover] helm uninstall {plan.TRAINER_RELEASE}",
            f"[deps][recover] deleting CRDs {', '.join(plan.TRAINER_CRDS)}",
            f"[deps][recover] deleting namespace {plan.TRAINER_NAMESPACE}",
            "[deps][recover] reinstalling",
        ]
        lines = init.stderr.splitlines()
        assert [lines.index(step) for step in steps] == sorted(lines.index(step) for step in steps)
        assert "initialized successfully" in init.stderr

        calls = _calls_since(setup_cluster, before)
        mutating = [call[:3] for call in calls if call[0] in ("upgrade", "install", "uninstall", "rollback")]
        assert mutating == [
            TRAINER_UPGRADE,  # failed with the conflict
            ["uninstall", plan.TRAINER_RELEASE, "--namespace"],
            TRAINER_UPGRADE,  # the one reinstall
        ]
        assert kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid != old_namespace
        assert kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org").metadata.uid != old_crd
        status = json.loads(setup_cluster.run("status", "-o", "json").stdout)
        assert {r["name"]: r["state"] for r in status["helmReleases"]}[plan.TRAINER_RELEASE] == "deployed"
    finally:
        setup_cluster.helm_fail.unlink(missing_ok=True)
        _reset(setup_cluster)


def test_a_failed_uninstall_stops_the_recovery_before_anything_is_deleted(
    setup_cluster: Setup, kube: Client
) -> None:
    """When the recovery's ``helm uninstall`` fails, init stops there with helm's words and the
    manual procedure: the Trainer CRDs and kubeflow-system stay, and nothing is reinstalled."""
    _failed_trainer_release(setup_cluster)
    old_namespace = kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid
    old_crd = kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org").metadata.uid
    before = len(setup_cluster.helm_calls())
    refused = "Error: uninstallation completed with 1 error(s): context deadline exceeded\n"
    setup_cluster.fail_once(TRAINER_UPGRADE, CONFLICT)
    setup_cluster.fail_once(["uninstall", plan.TRAINER_RELEASE], refused)
    try:
        init = setup_cluster.run("init", "--auto-approve", "--no-wait", "--skip-phases=helm")
        assert init.returncode == 1, init.stderr
        assert f"[deps][recover] helm uninstall {plan.TRAINER_RELEASE}\n{plan.MANUAL_RECOVERY}" in init.stderr
        assert init.stderr.rstrip().endswith(f"Error: [deps] automatic recovery failed: {refused.strip()}")
        assert "[deps][recover] deleting" not in init.stderr
        assert "[deps][recover] reinstalling" not in init.stderr
        calls = _calls_since(setup_cluster, before)
        changes = [call[:3] for call in calls if call[0] in ("upgrade", "install", "uninstall", "rollback")]
        assert changes == [TRAINER_UPGRADE, ["uninstall", plan.TRAINER_RELEASE, "--namespace"]]
        assert kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org").metadata.uid == old_crd
        assert kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid == old_namespace
        status = json.loads(setup_cluster.run("status", "-o", "json").stdout)
        assert {r["name"]: r["state"] for r in status["helmReleases"]}[plan.TRAINER_RELEASE] == "failed"
    finally:
        setup_cluster.helm_fail.unlink(missing_ok=True)
        _reset(setup_cluster)


def _recovery_refused(setup: Setup) -> str:
    """Init meeting the conflict again on a partial install whose recovery is unsafe: it refuses,
    prints the manual procedure and makes no helm change but the failed upgrade; its stderr."""
    before = len(setup.helm_calls())
    setup.fail_once(TRAINER_UPGRADE, CONFLICT)
    init = setup.run("init", "--auto-approve", "--no-wait", "--skip-phases=helm")
    assert init.returncode == 1, init.stderr
    assert "[deps] Automatic recovery refused:" in init.stderr
    assert plan.MANUAL_RECOVERY in init.stderr
    assert "[deps][recover]" not in init.stderr
    assert init.stderr.rstrip().endswith("Error: [deps] automatic recovery refused")
    calls = _calls_since(setup, before)
    changes = [call[:3] for call in calls if call[0] in ("upgrade", "install", "uninstall", "rollback")]
    assert changes == [TRAINER_UPGRADE]
    return init.stderr


def test_a_partial_trainer_install_with_a_trainjob_is_not_recovered(
    setup_cluster: Setup, kube: Client
) -> None:
    """User report 8: the same failure with a TrainJob on the cluster refuses the automatic
    recovery (it would delete the TrainJob with its CRD), changes nothing and prints the manual
    procedure."""
    _failed_trainer_release(setup_cluster)
    # The partial install got as far as the CRDs; its admission webhooks, which nothing serves
    # here, would refuse the TrainJob.
    for kind in (ValidatingWebhookConfiguration, MutatingWebhookConfiguration):
        for config in kube.list(kind):
            if (config.metadata.annotations or {}).get("meta.helm.sh/release-name") == plan.TRAINER_RELEASE:
                kube.delete(kind, config.metadata.name)
    namespace, name = "recovery-refused", "llm-finetune"
    _ensure_namespace(kube, namespace)
    kube.create(
        resources.TrainJob.from_dict(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"runtimeRef": {"name": "torch-distributed"}},
            }
        )
    )
    old_namespace = kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid
    old_crd = kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org").metadata.uid
    try:
        assert f"  - TrainJob {namespace}/{name} exists" in _recovery_refused(setup_cluster)
        assert kube.get(resources.TrainJob, name, namespace=namespace)
        assert kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org").metadata.uid == old_crd
        assert kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid == old_namespace
    finally:
        setup_cluster.helm_fail.unlink(missing_ok=True)
        kube.delete(resources.TrainJob, name, namespace=namespace)
        _reset(setup_cluster)


def test_a_partial_trainer_install_beside_a_users_object_in_its_namespace_is_not_recovered(
    setup_cluster: Setup, kube: Client
) -> None:
    """Recovery deletes kubeflow-system: an object there that the Trainer release did not make
    (a person's ConfigMap) refuses it, naming the object, and the namespace stays."""
    _failed_trainer_release(setup_cluster)
    kube.create(
        ConfigMap.from_dict(
            {"metadata": {"name": "team-notes", "namespace": plan.TRAINER_NAMESPACE}, "data": {"a": "b"}}
        )
    )
    old_namespace = kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid
    try:
        assert (
            f"  - ConfigMap team-notes in namespace {plan.TRAINER_NAMESPACE} was not created by the "
            "Trainer release" in _recovery_refused(setup_cluster)
        )
        assert kube.get(Namespace, plan.TRAINER_NAMESPACE).metadata.uid == old_namespace
        assert kube.get(ConfigMap, "team-notes", namespace=plan.TRAINER_NAMESPACE)
    finally:
        setup_cluster.helm_fail.unlink(missing_ok=True)
        kube.delete(ConfigMap, "team-notes", namespace=plan.TRAINER_NAMESPACE)
        _reset(setup_cluster)
