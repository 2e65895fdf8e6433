"""Outliers by topology on the simulated cluster: 14 GB200 nodes in NVLink cliques of 4. The
catalog's all-reduce in groups of 4 packs three groups inside a clique (multi-node NVLink) and one
overflow group across two cliques, whose all-reduce crosses the network and rightly runs far
slower. That group is compared with no group of another shape, so nothing is blamed: a fleet
that is healthy passes, although by size alone (the rule before) the crossing group was an
outlier below 0.8 of its peers' median."""

from __future__ import annotations

import secrets
import statistics
from collections.abc import Iterator

import pytest
from lightkube import Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from nvcre.api.v1alpha1.constants import Annotation
from nvcre.controllers import resources
from nvcre.sandbox import control
from nvcre.sandbox.state import StateDir
from nvcre.sandbox.supervisor import Options
from nvcre.testing import binaries as bins
from nvcre.testing.inspect import get, jobs_of, true_condition, wait_true

NODES, CLIQUE, GROUP = 14, 4, 4


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    state = StateDir(tmp_path_factory.mktemp("sandbox") / "state")
    try:
        record = control.up(
            state, Options(nodes=NODES, platform="aws", product="NVIDIA-GB200", domain_size=CLIQUE)
        )
        yield Client(KubeConfig.from_file(record.kubeconfig))
    finally:
        control.down(state)


def _peak(measurement: dict[str, object]) -> float:
    return max(float(r["busBW"]) for r in measurement["status"]["results"])  # type: ignore[index]


def test_a_group_across_two_cliques_is_not_blamed_as_an_outlier(kube: Client) -> None:
    namespace = f"cliques-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    category = {
        "domain": "communication",
        "variant": "nccl-all-reduce",
        "options": {"nodesPerJob": GROUP, "numIterations": 20, "numCycles": 1},
    }
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": "cliques", "namespace": namespace},
        "spec": {"target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "categories": [category]},
    }
    kube.create(resources.Certification.from_dict(document))
    cert = wait_true(kube, resources.Certification, "cliques", namespace, "Succeeded", timeout=600)
    (status,) = cert["status"]["categoryStatuses"]
    workflow = get(kube, resources.Workflow, status["workflowRef"]["name"], namespace)
    groups = workflow["status"]["orchestration"]["groups"]
    across = [g for g in groups if len(g.get("domains") or ()) == 2]
    inside = [g for g in groups if len(g.get("domains") or ()) == 1]
    assert len(across) == 1 and len(inside) == 3, groups
    jobs = jobs_of(kube, namespace, workflow["metadata"]["name"])
    peak = {}
    for name, job in jobs.items():
        verdict = next(c for c in job["status"]["conditions"] if c["type"] == "ValidationFailed")
        assert verdict["status"] == "False", (name, verdict)
        nodes = job["metadata"]["annotations"][Annotation.GROUP_NODES]
        peak[nodes] = _peak(get(kube, resources.BandwidthMeasurement, f"{name}-bandwidth", namespace))
    crossing = peak[",".join(across[0]["nodes"])]
    median = statistics.median(peak[",".join(g["nodes"])] for g in inside)
    # what the size-only rule would have blamed: the crossing group far below its size peers
    assert crossing < 0.8 * median, (crossing, median)
    found = true_condition(cert)
    assert found is not None and found[:2] == ("Succeeded", "AllWorkflowsSucceeded"), found
    print(f"\nacross two cliques: {crossing} GB/s; inside a clique: median {median} GB/s")
