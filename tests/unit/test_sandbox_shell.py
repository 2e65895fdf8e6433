"""The sandbox shell's decisions and its process bookkeeping (no cluster)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from nvcre.sandbox.control import SandboxError, check_options
from nvcre.sandbox.faults import apply_node_change, node_change, parse_faults
from nvcre.sandbox.runner import (
    HEARTBEAT_PAUSED,
    change_lost,
    configmap_mounts,
    container_command,
    container_files,
    end_annotations,
    expected_pods,
    is_service_pod,
    log_steps,
    node_patches,
    pause,
)
from nvcre.sandbox.state import StateDir, group_alive, listening_ports
from nvcre.sandbox.supervisor import Options, ready_timeout, startup_timeout
from nvcre.testing.kwok import EXIT_CODE_ANNOTATION, PHASE_ANNOTATION
from nvcre.testing.nodes import platform_nodes
from nvcre.testing.processes import wait_until


def test_a_deployments_pod_is_a_service_the_runner_leaves_running() -> None:
    """The chart's manager replicas land on kwok nodes; ending them would make their ReplicaSet
    create new ones without end. A Job's pod is a program."""

    def owned_by(kind: str) -> dict[str, object]:
        return {"metadata": {"ownerReferences": [{"kind": kind, "name": "x", "controller": True}]}}

    assert is_service_pod(owned_by("ReplicaSet"))
    assert not is_service_pod(owned_by("Job"))
    assert not is_service_pod({"metadata": {}})


def test_end_annotations_are_the_kwok_stage_ones() -> None:
    assert end_annotations(0) == {PHASE_ANNOTATION: "Succeeded"}
    failed = end_annotations(3)
    assert failed[PHASE_ANNOTATION] == "Failed" and failed[EXIT_CODE_ANNOTATION] == "3"


def test_the_container_sees_its_configmap_scripts_and_the_kubelets_env() -> None:
    """The catalog's training pods run ``/bin/bash /config/train.sh`` from a ConfigMap volume;
    the kubelet resolves ``$(VAR)`` and ``fieldRef`` values before anything runs."""
    pod = {
        "metadata": {"name": "p-0", "annotations": {"batch.kubernetes.io/job-completion-index": "3"}},
        "spec": {
            "containers": [
                {
                    "name": "node",
                    "command": ["/bin/bash"],
                    "args": ["/config/train.sh", "$(TRAIN_ITERS)", "$$(TRAIN_ITERS)", "$(UNSET)"],
                    "env": [
                        {"name": "TRAIN_ITERS", "value": "5"},
                        {"name": "LIMIT", "value": "iters=$(TRAIN_ITERS)"},
                        {
                            "name": "PET_NODE_RANK",
                            "valueFrom": {
                                "fieldRef": {
                                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                                }
                            },
                        },
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    ],
                    "volumeMounts": [
                        {"name": "work", "mountPath": "/mnt"},
                        {"name": "cfg", "mountPath": "/config"},
                        {"name": "topo", "mountPath": "/etc/topo/"},
                    ],
                }
            ],
            "volumes": [
                {"name": "work", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "train-config"}},
                {"name": "topo", "configMap": {"name": "topo", "items": [{"key": "a.xml", "path": "t.xml"}]}},
            ],
        },
    }
    command, env = container_command(pod)
    assert command == ["/bin/bash", "/config/train.sh", "5", "$(TRAIN_ITERS)", "$(UNSET)"]
    assert env == {"TRAIN_ITERS": "5", "LIMIT": "iters=5", "PET_NODE_RANK": "3", "POD": "p-0"}
    assert [(path, name) for path, name, _ in configmap_mounts(pod)] == [
        ("/config", "train-config"),
        ("/etc/topo", "topo"),
    ]
    configmaps = {"train-config": {"train.sh": "exec x"}, "topo": {"a.xml": "<a/>", "b.xml": "<b/>"}}
    assert container_files(pod, configmaps) == {"/config/train.sh": "exec x", "/etc/topo/t.xml": "<a/>"}
    assert container_files(pod, {}) == {}


def test_expected_pods_counts_replicas_times_parallelism() -> None:
    jobset = {
        "spec": {
            "replicatedJobs": [
                {"name": "launcher", "replicas": 1, "template": {"spec": {"parallelism": 1}}},
                {"name": "node", "replicas": 1, "template": {"spec": {"parallelism": 2}}},
            ]
        }
    }
    assert expected_pods(jobset) == 3


def test_node_patches_carry_the_xid_change_and_pause_the_heartbeat() -> None:
    (node,) = [n.to_dict() for n in platform_nodes(1, "aws", "NVIDIA-H100-80GB-HBM3")]
    change = node_change(parse_faults(["gpu-node-000=xid:79"]), "gpu-node-000")
    body, status = node_patches(node, change, "2026-01-01T00:00:00Z")
    expected = apply_node_change(node, change, now="2026-01-01T00:00:00Z")
    assert body["metadata"]["labels"] == expected["metadata"]["labels"]  # type: ignore[index]
    assert body["metadata"]["annotations"] == {HEARTBEAT_PAUSED: "true"}
    assert body["spec"]["taints"] == expected["spec"]["taints"]  # type: ignore[index]
    assert status["status"]["conditions"] == expected["status"]["conditions"]  # type: ignore[index]


def test_a_fault_rewritten_by_a_heartbeat_is_seen_as_lost_and_one_in_force_is_not() -> None:
    (node,) = [n.to_dict() for n in platform_nodes(1, "aws", "NVIDIA-H100-80GB-HBM3")]
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is ready"}
    node["status"] = {**node.get("status", {}), "conditions": [ready]}
    for spec in ("gpu-node-000=not-ready", "gpu-node-000=xid:79"):
        change = node_change(parse_faults([spec]), "gpu-node-000")
        assert change_lost(node, change), f"{spec}: a healthy node does not show it"
        faulty = apply_node_change(node, change, now="2026-01-01T00:00:00Z")
        assert not change_lost(faulty, change), f"{spec}: in force"
        # kwok's heartbeat stage, scheduled before the fault, rewrites the conditions it knows
        beat = {**faulty, "status": {**faulty["status"], "conditions": node["status"]["conditions"]}}
        assert change_lost(beat, change) == bool(change.conditions), spec


def test_up_refuses_a_fault_on_no_sandbox_node_before_starting() -> None:
    with pytest.raises(SandboxError, match="names no sandbox node"):
        check_options(Options(nodes=2, faults=["gpu-node-007=nccl-error"]))
    with pytest.raises(SandboxError):
        check_options(Options(nodes=2, faults=["gpu-node-001=no-such-kind"]))
    check_options(Options(nodes=2, faults=["gpu-node-001=nccl-error"]))
    with pytest.raises(SandboxError, match="unknown part 'slurm'"):
        check_options(Options(nodes=2, log_style="slurm"))
    with pytest.raises(SandboxError, match="--speed 0: must be a positive number"):
        check_options(Options(nodes=2, speed=0))
    check_options(Options(nodes=2, log_style="timestamps,srun", speed=4))


def test_listening_ports_are_read_from_proc() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port in listening_ports([os.getpid()])
    assert port not in listening_ports([os.getpid()])


def test_stop_kills_every_recorded_group_and_removes_the_directory(tmp_path: Path) -> None:
    """What a crashed supervisor leaves (a component and its child) goes with ``stop``."""
    state = StateDir(tmp_path / "state")
    child = subprocess.Popen(["sh", "-c", "sleep 600 & wait"], start_new_session=True)
    state.write_pid("etcd", child.pid)
    state.write_pid("supervisor", 2**22 + 1)  # long gone
    wait_until(lambda: group_alive(child.pid), timeout=10, what="component up")
    assert state.stop(grace=0.1) == ["etcd"]
    child.wait(timeout=10)
    wait_until(lambda: not group_alive(child.pid), timeout=10, what="the component's group gone")
    assert not state.path.exists()


def test_the_runner_pauses_at_least_as_long_as_a_slow_poll_took() -> None:
    assert pause(0.25, 0.01) == 0.25  # a few pods: the usual interval
    assert pause(0.25, 3.0) == 3.0  # thousands: at most half a core


def test_a_pods_log_grows_as_its_lines_times_come() -> None:
    """No line is readable before its time; lines within half a second are written together; a
    line printed out of order waits for the one before it."""
    assert log_steps([0.0, 0.1, 0.4, 2.0, 2.2, 9.0]) == [(0.4, 3), (2.2, 5), (9.0, 6)]
    assert log_steps([1.0, 0.2, 3.0]) == [(1.0, 2), (3.0, 3)]
    assert log_steps([]) == []


def test_the_sandbox_waits_longer_for_a_larger_fleet() -> None:
    assert ready_timeout(16) == pytest.approx(60.8)
    assert ready_timeout(4096) > 4096 / 20  # beyond the 60 s that 16 nodes need
    assert startup_timeout(4096) > startup_timeout(16) >= 300
