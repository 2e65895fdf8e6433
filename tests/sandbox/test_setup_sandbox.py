"""``nvcrectl setup init`` installs nvcre's chart into a cluster with the workload chain, where
the manager Deployment's pods are scheduled onto kwok nodes and become Ready, so helm's
``--wait`` and ``setup status`` see a real rollout; ``setup reset`` then removes it all.

A cluster of this module's own, started without nvcre's CRDs or LogProfiles (an empty cluster as
setup meets one; ``setup reset`` deletes CRDs, which the session's shared cluster keeps). Trainer
and JobSet already run there as processes of the chain, with their webhooks, so init skips phase
``deps`` (installing Trainer's chart too is tests/integration/test_setup.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.rbac_authorization_v1 import ClusterRole

from nvcre.testing.cluster import EmptyCluster
from nvcre.testing.nodes import create_gpu_nodes

NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))


def nvcrectl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NVCRECTL, "setup", *args], capture_output=True, text=True, env=env, timeout=900, check=False
    )


def test_init_rolls_out_the_manager_then_reset_removes_everything(
    empty_cluster: EmptyCluster,
) -> None:
    cluster, env = empty_cluster.cluster, empty_cluster.env
    with cluster.control_plane.client() as kube:
        create_gpu_nodes(kube, 2, prefix="setup-node")
        assert not [c for c in kube.list(CustomResourceDefinition) if c.spec.group == "nvcre.nvidia.com"]

        before = nvcrectl(env, "status")
        assert before.returncode == 0, before.stderr
        assert "Status: not ready — run 'nvcrectl setup init' to install missing components" in before.stdout

        # --wait (the default): helm returns only once the Deployment is Available.
        init = nvcrectl(env, "init", "--auto-approve", "--skip-phases=deps")
        assert init.returncode == 0, init.stderr
        assert "[deps] Skipped." in init.stderr
        deployment = kube.get(Deployment, "nvcre-manager", namespace="nvcre")
        conditions = {c.type: c.status for c in deployment.status.conditions or []}
        assert conditions.get("Available") == "True", deployment.status
        assert deployment.status.availableReplicas == deployment.spec.replicas == 2

        status = nvcrectl(env, "status")
        assert status.returncode == 0, status.stderr
        assert "Status: ready" in status.stdout, status.stdout
        as_json = json.loads(nvcrectl(env, "status", "-o", "json").stdout)
        assert as_json["installed"] is True
        assert all(ok for key, ok in as_json["components"].items() if key != "dcgm"), as_json

        reset = nvcrectl(env, "reset", "--auto-approve", "--skip-phases=deps")
        assert reset.returncode == 0, reset.stderr
        assert not [c for c in kube.list(CustomResourceDefinition) if c.spec.group == "nvcre.nvidia.com"]
        assert list(kube.list(Deployment, namespace="nvcre")) == []
        assert [r.metadata.name for r in kube.list(ClusterRole) if r.metadata.name.startswith("nvcre")] == []
        after = json.loads(nvcrectl(env, "status", "-o", "json").stdout)
        assert {r["name"]: r["state"] for r in after["helmReleases"]}["nvcre"] == "not installed"
        # Trainer (not installed by setup) is left as it was.
        kube.get(CustomResourceDefinition, "trainjobs.trainer.kubeflow.org")
