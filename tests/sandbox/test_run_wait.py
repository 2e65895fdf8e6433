"""``workloadrun run --wait --timeout`` on a cluster where the run never ends (cli.md 14, case 11).

The full chain's control plane (kube-controller-manager finalizes deleted namespaces) and no
nvcre-manager: the WorkloadRun gets no condition, so the wait times out and prints the partial
report. Without ``--cleanup`` the follow-up commands are printed and the run is left running;
with it the ``[cleanup]`` lines replace them and the run and the namespace it created are gone.
Ctrl-C during the wait detaches: the same follow-up commands, the run left running.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Namespace

from nvcre import resources
from nvcre.testing.controlplane import ControlPlane

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workloadrun" / "basic.yaml"
NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
FOLLOW_UP = (
    "kubectl get workloadrun timeout-run -n {ns} --watch",
    "nvcrectl workloadrun report timeout-run -n {ns}",
    "nvcrectl workloadrun cancel timeout-run -n {ns}",
)


def _run(
    control_plane: ControlPlane, tmp_path: Path, namespace: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"].update(name="timeout-run", namespace=namespace)
    (tmp_path / "wr.yaml").write_text(yaml.safe_dump(document))
    return subprocess.run(
        [NVCRECTL, "workloadrun", "run", "--kubeconfig", str(control_plane.kubeconfig_path),
         "--wait", "--timeout", "1s", "--results-file", "out.json", *flags, "wr.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _exists(kube: Client, resource: object, name: str, namespace: str | None = None) -> bool:
    try:
        kube.get(resource, name, **({"namespace": namespace} if namespace else {}))  # type: ignore[call-overload]
    except ApiError as error:
        if error.status.code == 404:
            return False
        raise
    return True


def _common(result: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    assert result.returncode == 1, result.stderr
    assert "Waiting for completion (timeout: 1s)..." in result.stderr
    assert "Result:       RUNNING" in result.stderr
    assert "Results written to out.json" in result.stderr
    assert result.stderr.rstrip().endswith("Error: timeout waiting for WorkloadRun timeout-run")
    assert json.loads((tmp_path / "out.json").read_text())["result"] == "RUNNING"


def test_a_timeout_prints_the_partial_report_and_leaves_the_run(
    control_plane: ControlPlane, kube: Client, tmp_path: Path
) -> None:
    result = _run(control_plane, tmp_path, "test-ns")
    _common(result, tmp_path)
    assert "[namespace] Creating namespace test-ns..." in result.stderr
    for command in FOLLOW_UP:
        assert command.format(ns="test-ns") in result.stderr
    assert "[cleanup]" not in result.stderr
    assert _exists(kube, resources.WorkloadRun, "timeout-run", "test-ns")


def test_with_cleanup_the_run_and_its_namespace_are_deleted(
    control_plane: ControlPlane, kube: Client, tmp_path: Path
) -> None:
    result = _run(control_plane, tmp_path, "test-ns-cleanup", "--cleanup")
    _common(result, tmp_path)
    lines = result.stderr.splitlines()
    start = lines.index("[cleanup] Cleaning up...")
    assert lines[start:] == [
        "[cleanup] Cleaning up...",
        "[cleanup] Deleting WorkloadRun...",
        "[cleanup] Deleting namespace test-ns-cleanup...",
        "  Waiting for namespace test-ns-cleanup to terminate...",
        "  Namespace test-ns-cleanup deleted.",
        "[cleanup] Done.",
        "Error: timeout waiting for WorkloadRun timeout-run",
    ]
    for command in FOLLOW_UP:
        assert command.format(ns="test-ns-cleanup") not in result.stderr
    assert not _exists(kube, Namespace, "test-ns-cleanup")
    assert not _exists(kube, resources.WorkloadRun, "timeout-run", "test-ns-cleanup")


def test_ctrl_c_detaches_and_deletes_nothing(
    control_plane: ControlPlane, kube: Client, tmp_path: Path
) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"].update(name="timeout-run", namespace="test-ns-interrupted")
    (tmp_path / "wr.yaml").write_text(yaml.safe_dump(document))
    command = subprocess.Popen(
        [NVCRECTL, "workloadrun", "run", "--kubeconfig", str(control_plane.kubeconfig_path), "--wait", "wr.yaml"],
        cwd=tmp_path, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert command.stderr is not None
    seen = []
    for line in command.stderr:  # the wait has begun once this line is out
        seen.append(line)
        if line.startswith("Waiting for completion (timeout: 30m0s)..."):
            break
    command.send_signal(signal.SIGINT)
    rest = command.stderr.read()
    assert command.wait(timeout=60) == 1, "".join(seen) + rest
    assert "Interrupted: detached; the WorkloadRun keeps running (nothing was deleted)." in rest
    for follow_up in FOLLOW_UP:
        assert follow_up.format(ns="test-ns-interrupted") in rest
    assert rest.rstrip().endswith("Error: interrupted")
    assert _exists(kube, resources.WorkloadRun, "timeout-run", "test-ns-interrupted")
