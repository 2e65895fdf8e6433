"""Seed 001's command on the sandbox: ``workloadrun run --workload-registry nvcr.io
--workload-registry-username '$oauthtoken' --workload-registry-password ... --wait`` of the basic
example creates the docker-registry pull Secret, every pod Trainer and JobSet create for the run
(the MPI launcher and the workers) references it, and the password shows up in nothing but the
Secret: not in the command's output, not in any log the sandbox writes, not in the command line
of any other process while the run goes on.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Pod, Secret

from nvcre import resources
from nvcre.sandbox import control
from nvcre.sandbox.state import StateDir
from nvcre.sandbox.supervisor import Options
from nvcre.testing.history import follow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workloadrun" / "basic.yaml"
NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
SECRET = "nvcrectl-pull-my-workload"


@dataclass
class Box:
    state: StateDir
    kubeconfig: str

    def client(self) -> Client:
        return Client(KubeConfig.from_file(self.kubeconfig))


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    state = StateDir(tmp_path_factory.mktemp("sandbox") / "state")
    with control.running(state, Options(nodes=4, platform="aws", product="NVIDIA-H100-80GB-HBM3")) as record:
        yield Box(state, record.kubeconfig)


def _cmdlines_with(text: bytes, skip: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (skip, os.getpid()):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def test_the_pull_secret_reaches_launcher_and_workers_and_the_password_nothing_else(
    box: Box, tmp_path: Path
) -> None:
    password = f"pw-{secrets.token_hex(16)}"
    pods: dict[str, dict[str, Any]] = {}
    stop, ready = threading.Event(), threading.Event()
    watch = threading.Thread(
        target=follow,
        args=(
            box.client,
            Pod,
            lambda _event, pod: pods.__setitem__(pod["metadata"]["uid"], pod),
            stop,
            ready,
        ),
        kwargs={"namespace": "default"},
        daemon=True,
    )
    watch.start()
    assert ready.wait(timeout=30), "the pod watch did not start"
    command = subprocess.Popen(
        [NVCRECTL, "workloadrun", "run", "--kubeconfig", box.kubeconfig,
         "--workload-registry", "nvcr.io", "--workload-registry-username", "$oauthtoken",
         "--workload-registry-password", password, "--wait", "--results-file", "out.json", str(EXAMPLE)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    leaked: list[str] = []
    scans = 0
    while command.poll() is None:
        leaked += _cmdlines_with(password.encode(), skip=command.pid)
        scans += 1
        stop.wait(0.2)
    stdout, stderr = command.communicate()
    stop.set()
    assert command.returncode == 0, stderr
    assert scans > 0 and leaked == []
    assert 'Created image pull secret "nvcrectl-pull-my-workload" in namespace default.' in stderr
    assert "Result:       PASSED" in stderr
    assert password not in stdout + stderr + (tmp_path / "out.json").read_text()

    kube = box.client()
    secret = kube.get(Secret, SECRET, namespace="default")
    assert secret.type == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode((secret.data or {})[".dockerconfigjson"]))
    assert config["auths"]["nvcr.io"]["username"] == "$oauthtoken"
    assert config["auths"]["nvcr.io"]["password"] == password
    run = kube.get(resources.WorkloadRun, "my-workload", namespace="default").to_dict()
    assert {"name": SECRET} in run["spec"]["imagePullSecrets"]
    assert [(r.kind, r.name) for r in secret.metadata.ownerReferences or []] == [  # type: ignore[union-attr]
        ("WorkloadRun", "my-workload")
    ]

    roles: dict[str, list[list[str]]] = {}
    for pod in pods.values():
        role = (pod["metadata"].get("labels") or {}).get(REPLICATED_JOB, "")
        roles.setdefault(role, []).append([s["name"] for s in pod["spec"].get("imagePullSecrets") or []])
    assert set(roles) == {"launcher", "node"}, roles
    assert len(roles["node"]) == 4
    assert all(names == [SECRET] for names in roles["launcher"] + roles["node"]), roles

    # Every file the sandbox wrote but etcd's data, where the Secret itself is stored.
    etcd = box.state.path / "cluster" / "etcd"
    logs = [p for p in box.state.path.rglob("*") if p.is_file() and not p.is_relative_to(etcd)]
    assert any("nvcre-manager" in p.name for p in logs), logs
    assert [str(p) for p in logs if password.encode() in p.read_bytes()] == []
