"""A DRA-only cluster: GPU nodes known only by the NVIDIA DRA driver's ResourceSlices.

Such a node carries no GPU Operator label (``nvidia.com/gpu.present``, ``nvidia.com/gpu.product``)
and no ``nvidia.com/gpu`` allocatable; the Certification, WorkloadRun and Workflow controllers
discover it by its ``gpu.nvidia.com`` ResourceSlice (resource.k8s.io/v1) and read its product there.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.resource_v1 import ResourceSlice

from nvcre import resources
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import Certification, WorkloadRun, category, new_pool
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import get, true_condition, wait_true
from nvcre.testing.nodes import gpu_resource_slice
from nvcre.testing.waiting import wait_for

H100 = "NVIDIA-H100-80GB-HBM3"
DCGM = category("diagnostics", "dcgm-level3")


@pytest.fixture
def slices(kube: Client) -> Iterator[list[str]]:
    """Names of the ResourceSlices a test creates (cluster-scoped), deleted after it."""
    created: list[str] = []
    yield created
    for name in created:
        kube.delete(ResourceSlice, name)


def test_a_certification_runs_on_nodes_known_by_their_resource_slices(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, slices: list[str]
) -> None:
    pool, nodes = new_pool(gpu_nodes, 2, dra=True)
    cert = Certification("dra").namespace(namespace).pool(pool).allow_missing_data().categories(DCGM).obj()
    kube.create(resources.Certification.from_dict(cert))

    # without ResourceSlices the nodes are not GPU nodes: the Certification waits for some
    waiting = true_condition(wait_true(kube, resources.Certification, "dra", namespace, "InProgress"))
    assert waiting is not None and waiting[1] == "WaitingForNodes"
    assert re.match(r"No schedulable nodes match ", waiting[2])

    for node in nodes:
        created = kube.create(gpu_resource_slice(node, H100, 8))
        slices.append(str(created.metadata.name if created.metadata else ""))

    name = certification_workflow_name("dra", "diagnostics", "dcgm-level3")
    orchestration = wait_for(
        lambda: (
            (
                (get(kube, resources.Workflow, name, namespace).get("status") or {}).get("orchestration", {})
            ).get("groups")
            and get(kube, resources.Workflow, name, namespace)["status"]["orchestration"]
        ),
        60,
        what="the Workflow's groups on the DRA-only nodes",
        ignore=(Exception,),
    )
    assert (orchestration["detectedPlatform"], orchestration["detectedGPUArchitecture"]) == ("aws", "h100")
    assert sorted(n for g in orchestration["groups"] for n in g["nodes"]) == nodes
    assert "excludedNodes" not in orchestration
    workflow = get(kube, resources.Workflow, name, namespace)
    trainer = workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    assert trainer["args"][:5] == ["diag", "--host", "nvidia-dcgm.gpu-operator.svc:5555", "--run", "3"]


def test_a_workload_run_sizes_itself_for_the_product_its_resource_slices_publish(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, slices: list[str]
) -> None:
    pool, nodes = new_pool(gpu_nodes, 2, dra=True)
    for node in nodes:
        created = kube.create(gpu_resource_slice(node, H100, 8))
        slices.append(str(created.metadata.name if created.metadata else ""))
    mpi = {"mpi": {"mpirunPath": "/usr/local/mpi/bin/mpirun", "binary": "/usr/local/bin/all_reduce_perf_mpi"}}
    run = WorkloadRun("dra-run").namespace(namespace).framework(mpi).nodes(2).pool(pool).obj()
    kube.create(resources.WorkloadRun.from_dict(run))

    # an H100 node gets H100's 8 GPUs per node (an unknown architecture would get 4)
    status = wait_for(
        lambda: (
            (s := get(kube, resources.WorkloadRun, "dra-run", namespace).get("status") or {}).get(
                "detectedGPUArchitecture"
            )
            and s
        ),
        60,
        what="the run's detected architecture (from its Workflow)",
    )
    assert (status["resolvedGpusPerNode"], status["detectedGPUArchitecture"]) == (8, "h100")
    workflow = get(kube, resources.Workflow, "dra-run", namespace)
    groups = workflow["status"]["orchestration"]["groups"]
    assert sorted(n for g in groups for n in g["nodes"]) == nodes


def test_render_dry_run_discovers_them_too(
    kube: Client,
    namespace: str,
    gpu_nodes: Any,
    control_plane: ControlPlane,
    slices: list[str],
    tmp_path: Path,
) -> None:
    pool, nodes = new_pool(gpu_nodes, 2, dra=True)
    for node in nodes:
        created = kube.create(gpu_resource_slice(node, H100, 8))
        slices.append(str(created.metadata.name if created.metadata else ""))
    cert = tmp_path / "cert.yaml"
    cert.write_text(
        yaml.safe_dump(Certification("dry").namespace(namespace).pool(pool).categories(DCGM).obj())
    )
    done = subprocess.run(
        [
            Path(sys.executable).parent / "nvcrectl",
            "certification",
            "render",
            "--dry-run",
            "--kubeconfig",
            str(control_plane.kubeconfig_path),
            str(cert),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (workflow,) = yaml.safe_load_all(done.stdout)
    annotations = workflow["metadata"]["annotations"]
    assert annotations["nvcrectl.nvidia.com/detected-gpu-architecture"] == "h100"
    assert annotations["nvcrectl.nvidia.com/detected-platform"] == "aws"
    assert "GPUArchitectureDefaults" not in done.stderr
