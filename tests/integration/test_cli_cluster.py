"""``nvcrectl cluster info`` and ``kubectl nvcre`` against the real API server, with kwok GPU nodes.

Nodes are cluster-wide, so each test labels its own with a pool label and passes ``-l`` (the
nodes are deleted after the test). No manager runs in this module: a WorkloadRun created here
keeps the empty status the user created it with.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Node
from lightkube.resources.resource_v1 import ResourceSlice

from nvcre import resources
from nvcre.testing import binaries
from nvcre.testing.builders import WorkloadRun
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.nodes import gpu_resource_slice, node_ready, platform_node_spec
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import POOL_LABEL, pool_name

BIN = Path(sys.executable).parent
AWS_RACK = "topology.k8s.aws/network-node-layer-1"
H100 = "NVIDIA-H100-80GB-HBM3"


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path, **(env or {})},
        timeout=120,
    )


def nvcrectl(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run(BIN / "nvcrectl", *args, env=env)


def kubectl() -> Path:
    return binaries.ensure([binaries.KUBECTL]).path(binaries.KUBECTL)


def ready_nodes(kube: Client, gpu_nodes: Any, pool: str, gpus: list[int]) -> list[str]:
    """One AWS H100 node per count (as nvcre's own node helper describes an AWS p5), all in rack-a."""
    names = []
    for count in gpus:
        spec = platform_node_spec("aws", H100, gpus=count)
        spec = dataclasses.replace(spec, labels={**spec.labels, POOL_LABEL: pool, AWS_RACK: "rack-a"})
        names += [str(n.metadata.name) for n in gpu_nodes(1, spec) if n.metadata]

    def all_ready() -> bool:
        return all(node_ready(kube.get(Node, name)) for name in names)

    wait_for(all_ready, 60, what="kwok to make the nodes Ready")
    return sorted(names)


def test_acceptance_case_10(control_plane: ControlPlane, kube: Client, gpu_nodes: Any) -> None:
    pool = pool_name()
    names = ready_nodes(kube, gpu_nodes, pool, [8, 2])
    config = control_plane.kubeconfig_path

    done = nvcrectl("cluster", "info", "-o", "json", "-l", f"{POOL_LABEL}={pool}", "--kubeconfig", config)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["gpusPerNode"], out["totalGPUs"], out["catalogGpusPerNode"], out["totalNodes"]) == (
        2,
        10,
        8,
        2,
    )
    assert (out["platform"], out["gpuArchitecture"], out["gpuProduct"]) == ("aws", "h100", H100)
    rack = out["topology"]["racks"][0]
    assert (rack["name"], rack["nodeCount"]) == ("rack-a", 2)
    assert [(n["name"], n["gpus"], n["ready"]) for n in out["nodes"]] == [
        (names[0], 8, True),
        (names[1], 2, True),
    ]

    done = nvcrectl("cluster", "info", "-l", f"{POOL_LABEL}={pool}", "--kubeconfig", config)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Nodes:        2 ready" in lines
    assert "Total GPUs:   10" in lines
    header = next(i for i, line in enumerate(lines) if line.split() == ["NODE", "GPUS", "READY"])
    assert [lines[header + 1].split(), lines[header + 2].split()] == [
        [names[0], "8", "true"],
        [names[1], "2", "true"],
    ]
    assert any(line.endswith("or the pods ask for more GPUs than a node has.") for line in lines)
    topology = lines.index(f"TOPOLOGY ({AWS_RACK}):")
    assert lines[topology + 1] == "  rack-a    2 nodes"
    assert done.stderr == ""


def test_a_dra_only_node_is_known_by_its_resource_slice(
    control_plane: ControlPlane, kube: Client, gpu_nodes: Any
) -> None:
    """A node with no GPU Operator label and no nvidia.com/gpu resource is a GPU node by the
    gpu.nvidia.com ResourceSlice the NVIDIA DRA driver publishes for it: product and count."""
    pool = pool_name()
    spec = dataclasses.replace(platform_node_spec("aws", H100), dra=True, labels={POOL_LABEL: pool})
    (name,) = [str(n.metadata.name) for n in gpu_nodes(1, spec) if n.metadata]
    selector = ("-l", f"{POOL_LABEL}={pool}", "--kubeconfig", control_plane.kubeconfig_path)

    unknown = nvcrectl("cluster", "info", *selector)
    assert unknown.returncode == 1
    assert unknown.stderr.startswith(
        "Error: no GPU nodes found: no node is labelled nvidia.com/gpu.present=true"
    )

    created = kube.create(gpu_resource_slice(name, H100, 4))
    try:
        done = nvcrectl("cluster", "info", "-o", "json", *selector)
    finally:
        kube.delete(ResourceSlice, str(created.metadata.name if created.metadata else ""))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = json.loads(done.stdout)
    assert (out["platform"], out["gpuArchitecture"], out["gpuProduct"]) == ("aws", "h100", H100)
    assert (out["gpusPerNode"], out["totalGPUs"]) == (4, 4)
    assert [(n["name"], n["gpus"], n["product"]) for n in out["nodes"]] == [(name, 4, H100)]


def test_no_gpu_node_is_one_error_line(control_plane: ControlPlane) -> None:
    done = nvcrectl(
        "cluster", "info", "-l", f"{POOL_LABEL}={pool_name()}", "--kubeconfig", control_plane.kubeconfig_path
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(
        "Error: no GPU nodes found: no node is labelled nvidia.com/gpu.present=true"
    )
    assert len(done.stderr.splitlines()) == 1


def test_kubectl_nvcre_is_nvcrectl() -> None:
    help_text = run(kubectl(), "nvcre", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert help_text.stdout.startswith("Usage: nvcrectl [OPTIONS] COMMAND [ARGS]...")
    for group in ("certification", "cluster", "completion", "workloadrun"):
        assert f"  {group} " in help_text.stdout
    version = run(kubectl(), "nvcre", "--version")
    assert (version.returncode, version.stdout) == (0, nvcrectl("--version").stdout)
    assert version.stdout.startswith("nvcrectl ")
    plugins = run(kubectl(), "plugin", "list", "--name-only")
    assert "kubectl-nvcre" in plugins.stdout.split()


def two_contexts(control_plane: ControlPlane, path: Path) -> Path:
    """A kubeconfig whose current context points at nothing; context ``test`` is the cluster."""
    config = control_plane.kubeconfig()
    good = config["contexts"][0]
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    config["contexts"].append(
        {"name": "nowhere", "context": {"cluster": "nowhere", "user": good["context"]["user"]}}
    )
    config["current-context"] = "nowhere"
    path.write_text(yaml.safe_dump(config))
    return path


def test_kubectl_nvcre_takes_kubeconfig_and_context(
    control_plane: ControlPlane, kube: Client, gpu_nodes: Any, tmp_path: Path
) -> None:
    pool = pool_name()
    ready_nodes(kube, gpu_nodes, pool, [8])
    config = two_contexts(control_plane, tmp_path / "kubeconfig")
    context = control_plane.kubeconfig()["contexts"][0]["name"]
    info = ("nvcre", "cluster", "info", "-o", "json", "-l", f"{POOL_LABEL}={pool}")

    chosen = run(kubectl(), *info, "--kubeconfig", config, "--context", context)
    assert chosen.returncode == 0, chosen.stderr
    assert json.loads(chosen.stdout)["totalNodes"] == 1
    from_env = run(kubectl(), *info, "--context", context, env={"KUBECONFIG": str(config)})
    assert from_env.returncode == 0, from_env.stderr
    assert json.loads(from_env.stdout)["totalNodes"] == 1

    current = run(kubectl(), *info, "--kubeconfig", config)  # the current context: nothing listens
    assert current.returncode == 1
    assert current.stderr.startswith("Error: cannot list nodes: ")
    assert len(current.stderr.splitlines()) == 1 and "Traceback" not in current.stderr
    unknown = run(kubectl(), *info, "--kubeconfig", config, "--context", "no-such-context")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("Error: cannot load kubeconfig: ")
    assert len(unknown.stderr.splitlines()) == 1


def test_kubectl_nvcre_namespace_flag(control_plane: ControlPlane, kube: Client, namespace: str) -> None:
    """A run the controller has not touched yet is ``Pending``; ``-n`` picks the namespace."""
    kube.create(
        resources.WorkloadRun.from_dict(
            WorkloadRun("fresh")
            .namespace(namespace)
            .image("nvcr.io/nvidia/pytorch:26.01-py3")
            .nodes(1)
            .framework({"torch": {"script": "train.py"}})
            .obj()
        )
    )
    env = {"KUBECONFIG": str(control_plane.kubeconfig_path)}
    status = run(kubectl(), "nvcre", "workloadrun", "status", "fresh", "-n", namespace, env=env)
    assert (status.returncode, status.stdout, status.stderr) == (0, "Pending\n", "")
    as_json = run(
        kubectl(), "nvcre", "workloadrun", "status", "fresh", "--namespace", namespace, "-o", "json", env=env
    )
    assert json.loads(as_json.stdout) == {"name": "fresh", "namespace": namespace, "status": "Pending"}
    elsewhere = run(kubectl(), "nvcre", "workloadrun", "status", "fresh", env=env)
    assert elsewhere.returncode == 1
    assert elsewhere.stderr == 'Error: workloadrun "fresh" not found in namespace "default"\n'
    missing = run(kubectl(), "nvcre", "workloadrun", "cancel", "missing", "-n", namespace, env=env)
    assert (missing.returncode, missing.stdout) == (0, "")
    assert missing.stderr == f'WorkloadRun "missing" not found in namespace "{namespace}"\n'


def test_expected_performance_of_the_detected_hardware(
    control_plane: ControlPlane, kube: Client, gpu_nodes: Any
) -> None:
    """Two AWS p5 nodes in one network block: each category's group, the figure it should reach
    with its published source, and "no published figure" where the table has none."""
    pool = pool_name()
    ready_nodes(kube, gpu_nodes, pool, [8, 8])
    config = control_plane.kubeconfig_path

    done = nvcrectl("cluster", "info", "-o", "json", "-l", f"{POOL_LABEL}={pool}", "--kubeconfig", config)
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)["expectedPerformance"]
    assert (expected["gpuArchitecture"], expected["platform"]) == ("h100", "aws")
    categories = {c["category"]: c for c in expected["categories"]}
    allreduce = categories["communication/nccl-all-reduce"]
    assert allreduce["groupShape"]["text"] == "2 nodes in one domain"
    assert allreduce["expected"] == [
        {
            "key": "busBandwidthGBps",
            "value": 487.09,
            "source": "AWS p5 EFA, awsome-distributed-training nccl-tests README",
            "row": "h100/aws/all_reduce/2-nodes",
        }
    ]
    assert categories["communication/nccl-all-gather"]["message"] == "no published figure"
    assert categories["communication/nccl-alltoall"]["expected"][0]["value"] == 79.25

    done = nvcrectl("cluster", "info", "-l", f"{POOL_LABEL}={pool}", "--kubeconfig", config)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    row = next(
        line for line in lines if line.startswith("  communication/nccl-all-reduce ") and "GB/s" in line
    )
    assert row.split()[1:7] == ["2", "nodes", "in", "one", "domain", "487.09"]
    assert row.endswith(
        "AWS p5 EFA, awsome-distributed-training nccl-tests README (h100/aws/all_reduce/2-nodes)"
    )
    assert "EXPECTED BUS BANDWIDTH BY GROUP SHAPE (h100 on aws):" in lines
