"""The ``run`` flags on the objects the commands create on a real API server, and the kubectl
connection flags (``--token``, ``--as``/``--as-group``, ``--server``, ``--certificate-authority``,
``--insecure-skip-tls-verify``, ``-n`` from the context) on the requests that server answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ServiceAccount

from nvcre import resources
from nvcre.cli.main import cli
from nvcre.setup.helm import HELM_ENV
from nvcre.testing import binaries
from nvcre.testing.access import service_account_token
from nvcre.testing.builders import Certification, WorkloadRun, category, new_pool, pool_name, pool_nodes
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import get

AWS_KEY = "topology.k8s.aws/network-node-layer-1"
UNREACHABLE = "https://127.0.0.1:9"


def nvcrectl(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.output


def write_kubeconfig(control_plane: ControlPlane, path: Path, change: Any = None) -> Path:
    """The admin kubeconfig, after ``change`` edited it (its one cluster, user and context)."""
    config = control_plane.kubeconfig()
    if change is not None:
        change(config["clusters"][0]["cluster"], config["users"][0]["user"], config["contexts"][0]["context"])
    path.write_text(yaml.safe_dump(config))
    return path


def test_workloadrun_run_flags_and_the_contexts_namespace(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, tmp_path: Path
) -> None:
    pool = pool_name()
    rack = pool_nodes(gpu_nodes, 2, pool, labels={AWS_KEY: f"{pool}-a"})
    pool_nodes(gpu_nodes, 1, pool, labels={AWS_KEY: f"{pool}-b"})
    config = write_kubeconfig(
        control_plane, tmp_path / "config", lambda cluster, user, context: context.update(namespace=namespace)
    )
    file = tmp_path / "run.yaml"
    file.write_text(yaml.safe_dump(WorkloadRun("racked").namespace(None).pool(pool).nodes(3).obj()))

    code, out = nvcrectl(
        "workloadrun", "run", str(file), "--kubeconfig", str(config), "--topology-domain", f"{pool}-a",
        "--test-scale", "intra-rack",
    )  # fmt: skip
    assert code == 0, out
    assert f"WorkloadRun racked created in namespace {namespace}." in out  # no -n: the context's
    spec = get(kube, resources.WorkloadRun, "racked", namespace)["spec"]
    assert spec["target"]["matchExpressions"] == [{"key": AWS_KEY, "operator": "In", "values": [f"{pool}-a"]}]
    assert (spec["numNodes"], spec["orchestration"]["testScale"]) == (2, "intra-rack")

    code, out = nvcrectl(
        "workloadrun",
        "run",
        str(file),
        "--kubeconfig",
        str(config),
        "--name",
        "listed",
        "--node-list",
        rack[0],
    )
    assert code == 0, out
    spec = get(kube, resources.WorkloadRun, "listed", namespace)["spec"]
    assert (spec["target"]["nodeNames"], spec["numNodes"]) == ([rack[0]], 1)

    code, out = nvcrectl(
        "workloadrun", "run", str(file), "--kubeconfig", str(config), "--topology-domain", f"{pool}-z"
    )
    assert (code, out) == (
        1,
        f'Error: --topology-domain "{pool}-z": no schedulable GPU node of the target has {AWS_KEY}={pool}-z\n',
    )


def test_certification_run_flags_on_a_file_and_on_categories(
    control_plane: ControlPlane, kube: Client, namespace: str, gpu_nodes: Any, tmp_path: Path
) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    config = str(control_plane.kubeconfig_path)
    file = tmp_path / "cert.yaml"
    cert = (
        Certification("from-file")
        .namespace(None)
        .pool(pool)
        .categories(category("communication", "nccl-all-reduce"))
    )
    file.write_text(yaml.safe_dump(cert.obj()))
    flags = [
        "--enable-checkpoint", "--no-enable-mnnvl", "--max-steps", "40", "--exit-duration-mins", "15",
        "--max-restarts", "2", "--storage-class", "fast-ssd",
    ]  # fmt: skip
    expected = {
        "enableCheckpoint": True,
        "enableMNNVL": False,
        "maxSteps": 40,
        "exitDurationMins": 15,
        "maxRestarts": 2,
        "storageClassName": "fast-ssd",
    }
    code, out = nvcrectl(
        "certification", "run", "--cert-file", str(file), "-n", namespace, "--kubeconfig", config, *flags
    )
    assert code == 0, out
    spec = get(kube, resources.Certification, "from-file", namespace)["spec"]
    assert {key: spec.get(key) for key in expected} == expected

    code, out = nvcrectl(
        "certification", "run", "--category", "communication/nccl-all-reduce", "--name", "by-category",
        "-n", namespace, "--kubeconfig", config, "--max-steps", "-1", "--enable-mnnvl",
    )  # fmt: skip
    assert code == 0, out
    assert "Discovered GPU nodes with product: NVIDIA-H100-80GB-HBM3" in out
    assert f"Certification by-category created in namespace {namespace}." in out
    spec = get(kube, resources.Certification, "by-category", namespace)["spec"]
    assert spec["target"]["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert spec["categories"] == [{"domain": "communication", "variant": "nccl-all-reduce"}]
    assert (spec["maxSteps"], spec["enableMNNVL"]) == (-1, True)
    assert "enableCheckpoint" not in spec  # a switch not given sets nothing


@pytest.fixture
def token(kube: Client, namespace: str) -> str:
    """A token of ServiceAccount ``reader`` of the namespace, which no role binds."""
    kube.create(ServiceAccount(metadata=ObjectMeta(name="reader", namespace=namespace)))
    return service_account_token(kube, namespace, "reader")


def test_token_and_impersonation_decide_who_asks(
    control_plane: ControlPlane, namespace: str, token: str
) -> None:
    status = [
        "workloadrun",
        "status",
        "missing",
        "-n",
        namespace,
        "--kubeconfig",
        str(control_plane.kubeconfig_path),
    ]
    not_found = (1, f'Error: workloadrun "missing" not found in namespace "{namespace}"\n')
    assert nvcrectl(*status) == not_found  # the admin may read

    code, out = nvcrectl(*status, "--token", token)
    assert code == 1
    assert f'User "system:serviceaccount:{namespace}:reader" cannot get resource "workloadruns"' in out
    assert token not in out

    code, out = nvcrectl(*status, "--as", "jane")
    assert code == 1
    assert 'User "jane" cannot get resource "workloadruns"' in out
    assert nvcrectl(*status, "--as", "jane", "--as-group", "system:masters") == not_found


def test_server_certificate_authority_and_insecure_override_the_kubeconfig(
    control_plane: ControlPlane, namespace: str, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert control_plane.server and control_plane.certs
    elsewhere = write_kubeconfig(
        control_plane,
        tmp_path / "elsewhere",
        lambda cluster, user, context: cluster.update(server=UNREACHABLE),
    )
    status = ["workloadrun", "status", "missing", "-n", namespace, "--kubeconfig", str(elsewhere)]
    not_found = (1, f'Error: workloadrun "missing" not found in namespace "{namespace}"\n')
    code, out = nvcrectl(*status)
    assert code == 1 and "ConnectError" in out
    assert nvcrectl(*status, "--server", control_plane.server) == not_found

    no_ca = write_kubeconfig(
        control_plane,
        tmp_path / "no-ca",
        lambda cluster, user, context: cluster.pop("certificate-authority-data"),
    )
    status = ["workloadrun", "status", "missing", "-n", namespace, "--kubeconfig", str(no_ca)]
    code, out = nvcrectl(*status)
    assert code == 1 and "CERTIFICATE_VERIFY_FAILED" in out
    ca = tmp_path / "ca.crt"
    ca.write_bytes(control_plane.certs.ca.cert_pem)
    assert nvcrectl(*status, "--certificate-authority", str(ca)) == not_found
    assert nvcrectl(*status, "--insecure-skip-tls-verify") == not_found

    # no kubeconfig at all: the server and the token are enough
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out = nvcrectl(
        "workloadrun", "status", "missing", "-n", namespace, "--server", control_plane.server,
        "--certificate-authority", str(ca), "--token", token,
    )  # fmt: skip
    assert code == 1
    assert f'User "system:serviceaccount:{namespace}:reader" cannot get resource "workloadruns"' in out
    assert token not in out


def test_setup_status_hands_the_connection_flags_to_helm(
    control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helm reads the overrides from its environment: with the kubeconfig's server unreachable,
    a release helm could not ask about is ``unknown``; with ``--server`` it is ``not installed``
    (this control plane has none)."""
    assert control_plane.server and control_plane.certs
    monkeypatch.setenv(HELM_ENV, str(binaries.ensure([binaries.HELM]).path(binaries.HELM)))
    monkeypatch.setenv("HELM_CACHE_HOME", str(tmp_path / "helm-cache"))
    monkeypatch.setenv("HELM_CONFIG_HOME", str(tmp_path / "helm-config"))
    elsewhere = write_kubeconfig(
        control_plane,
        tmp_path / "elsewhere",
        lambda cluster, user, context: (
            cluster.update(server=UNREACHABLE) or cluster.pop("certificate-authority-data")
        ),
    )
    ca = tmp_path / "ca.crt"
    ca.write_bytes(control_plane.certs.ca.cert_pem)
    status = ["setup", "status", "-o", "json", "--kubeconfig", str(elsewhere)]
    code, out = nvcrectl(*status, "--server", control_plane.server, "--certificate-authority", str(ca))
    assert code == 0, out
    assert {r["name"]: r["state"] for r in json.loads(out)["helmReleases"]} == {
        "nvcre": "not installed",
        "kubeflow-trainer": "not installed",
    }
    code, out = nvcrectl(*status, "--server", control_plane.server, "--insecure-skip-tls-verify")
    assert code == 0, out
    assert {r["state"] for r in json.loads(out)["helmReleases"]} == {"not installed"}

    code, out = nvcrectl("setup", "status", "--kubeconfig", str(elsewhere), "--user", "someone")
    assert (code, out) == (
        1,
        "Error: helm takes no --user: set them in the kubeconfig and use --context\n",
    )
