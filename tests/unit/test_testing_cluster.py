"""The workload chain's configuration: webhook manifests, scheduler profiles, controller configs."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from nvcre.testing import binaries as bins
from nvcre.testing.cluster import (
    SCHEDULER_PROFILES,
    jobset_configuration,
    kustomized_webhooks,
    loopback_webhooks,
    scheduler_configuration,
    trainer_configuration,
)
from nvcre.testing.kwok import (
    HEARTBEATS_PER_SECOND,
    node_lease_seconds,
    node_monitor_grace_seconds,
    node_status_heartbeat_seconds,
)

MUTATING = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "mutating-webhook-configuration"},
    "webhooks": [
        {
            "name": "mjobset.kb.io",
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/m-js"}},
        },
        {
            "name": "mpod.kb.io",
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/m-pod"}},
        },
    ],
}
VALIDATING = {**MUTATING, "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "validating"}}
SELECTOR = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}


def _kustomization(tmp_path: Path) -> Path:
    (tmp_path / "manifests.yaml").write_text(yaml.safe_dump_all([MUTATING, VALIDATING]))
    (tmp_path / "service.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Service"}))
    (tmp_path / "patches").mkdir()
    pod_webhook = {**MUTATING["webhooks"][1], "objectSelector": SELECTOR}  # type: ignore[dict-item]
    (tmp_path / "patches" / "mutating.yaml").write_text(
        yaml.safe_dump([{"op": "replace", "path": "/webhooks/1", "value": pod_webhook}])
    )
    (tmp_path / "patches" / "rename.yaml").write_text(
        yaml.safe_dump([{"op": "replace", "path": "/metadata/name", "value": "renamed"}])
    )
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["manifests.yaml", "service.yaml"],
                "patches": [
                    {
                        "path": "patches/mutating.yaml",
                        "target": {
                            "kind": "MutatingWebhookConfiguration",
                            "name": "mutating-webhook-configuration",
                        },
                    },
                    {"path": "patches/rename.yaml", "target": {"kind": "ValidatingWebhookConfiguration"}},
                ],
            }
        )
    )
    return tmp_path


def test_kustomized_webhooks_apply_each_patch_to_its_target_only(tmp_path: Path) -> None:
    mutating, validating = kustomized_webhooks(_kustomization(tmp_path))
    assert mutating["webhooks"][1]["objectSelector"] == SELECTOR, "the pod webhook is narrowed to JobSet pods"
    assert "objectSelector" not in mutating["webhooks"][0]
    assert mutating["metadata"]["name"] == "mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "renamed"
    assert "objectSelector" not in validating["webhooks"][1]


def test_loopback_webhooks_point_every_webhook_at_the_local_server() -> None:
    (mutating,) = loopback_webhooks([MUTATING], port=9443, ca_bundle=b"PEM", name_prefix="jobset-controller-")
    assert mutating["metadata"] == {"name": "jobset-controller-mutating-webhook-configuration"}
    assert [w["clientConfig"] for w in mutating["webhooks"]] == [
        {"url": "https://127.0.0.1:9443/m-js", "caBundle": base64.b64encode(b"PEM").decode()},
        {"url": "https://127.0.0.1:9443/m-pod", "caBundle": base64.b64encode(b"PEM").decode()},
    ]
    assert MUTATING["webhooks"][0]["clientConfig"]["service"]["path"] == "/m-js"  # type: ignore[index]


def test_scheduler_runs_a_profile_per_scheduler_name_nvcre_renders(tmp_path: Path) -> None:
    config = scheduler_configuration(tmp_path / "kubeconfig")
    assert [p["schedulerName"] for p in config["profiles"]] == list(SCHEDULER_PROFILES)
    assert {"default-scheduler", "kai-scheduler", "runai-scheduler"} == set(SCHEDULER_PROFILES)
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "kubeconfig")


def test_controllers_run_without_their_own_certificate_management(tmp_path: Path) -> None:
    jobset = jobset_configuration(webhook_port=1, cert_dir=tmp_path, probe_port=2)
    assert jobset["internalCertManagement"] == {"enable": False}
    assert jobset["webhook"] == {"port": 1, "host": "127.0.0.1", "certDir": str(tmp_path)}
    trainer = trainer_configuration(webhook_port=3, probe_port=4)
    assert trainer["certManagement"] == {"enable": False}
    assert trainer["webhook"] == {"port": 3, "host": "127.0.0.1"}
    for config in (jobset, trainer):
        assert config["leaderElection"] == {"leaderElect": False}
        assert config["metrics"] == {"bindAddress": "0"}


def test_every_chain_binary_has_a_build_target_a_version_and_an_override() -> None:
    versions = bins.load_versions()
    assert versions.jobset == "v0.12.0", "the JobSet version Trainer v2.3.0 requires"
    for name in bins.CHAIN:
        assert name in bins.ALL
        assert versions.binary_version(name)
    assert bins.ENV_OVERRIDES[bins.JOBSET] == "TEST_ASSET_JOBSET_CONTROLLER"
    assert bins.ENV_OVERRIDES[bins.KUBE_SCHEDULER] == "TEST_ASSET_KUBE_SCHEDULER"
    assert bins.ENV_OVERRIDES[bins.KUBE_APISERVER] == "TEST_ASSET_KUBE_APISERVER", "unchanged"


def test_chain_binaries_are_fingerprinted_by_their_own_wrapper(tmp_path: Path) -> None:
    versions = bins.load_versions()
    for module in ("kubernetes", "kubernetes-controllers", "jobset", "trainer"):
        (tmp_path / module).mkdir()
        (tmp_path / module / "go.mod").write_text(f"module example/{module}\n")
    jobset = bins.fingerprint(bins.JOBSET, versions, tmp_path)
    trainer = bins.fingerprint(bins.TRAINER, versions, tmp_path)
    (tmp_path / "jobset" / "go.sum").write_text("changed\n")
    assert bins.fingerprint(bins.JOBSET, versions, tmp_path) != jobset
    assert bins.fingerprint(bins.TRAINER, versions, tmp_path) == trainer
    # kube-controller-manager's extra modules never invalidate the cached kube-apiserver
    apiserver = bins.fingerprint(bins.KUBE_APISERVER, versions, tmp_path)
    manager = bins.fingerprint(bins.KUBE_CONTROLLER_MANAGER, versions, tmp_path)
    (tmp_path / "kubernetes-controllers" / "go.sum").write_text("cadvisor\n")
    assert bins.fingerprint(bins.KUBE_CONTROLLER_MANAGER, versions, tmp_path) != manager
    assert bins.fingerprint(bins.KUBE_APISERVER, versions, tmp_path) == apiserver
    assert "gitVersion=" + versions.kubernetes in bins.ldflags_for(bins.KUBE_SCHEDULER, versions)


def test_node_heartbeats_slow_down_as_the_fleet_grows() -> None:
    # the kubelet's lease, kube-controller-manager's grace period and the stage's 20 s up to 200 nodes
    assert (node_lease_seconds(200), node_monitor_grace_seconds(200), node_status_heartbeat_seconds(200)) == (
        40,
        50,
        20,
    )
    # 4,096 nodes: each heartbeat at most 20 writes a second, not ~410 leases and ~180 statuses
    assert node_lease_seconds(4096) == 820
    assert 4 * 4096 / node_lease_seconds(4096) <= HEARTBEATS_PER_SECOND
    assert node_status_heartbeat_seconds(4096) == 205
    assert node_monitor_grace_seconds(4096) == 830
