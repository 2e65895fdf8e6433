"""The test control plane is real: version, CRDs, TrainJobs, kwok nodes, pod phases and logs."""

from __future__ import annotations

import asyncio

import pytest
from lightkube import AsyncClient, Client
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.fixtures import GpuNodeFactory
from nvcre.testing.kwok import EXIT_CODE_ANNOTATION, PHASE_ANNOTATION, REASON_ANNOTATION, Kwok
from nvcre.testing.nodes import GPU_CLIQUE, GPU_PRODUCT, GPU_RESOURCE, GpuNodeSpec, node_ready
from nvcre.testing.waiting import wait_for

TRAINER_CRDS = (
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
)

TrainJob = create_namespaced_resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
MINIMAL = {"runtimeRef": {"name": "torch-distributed"}}


def test_apiserver_reports_the_pinned_version(control_plane: ControlPlane) -> None:
    assert control_plane.version() == control_plane.binaries.versions.kubernetes


def test_trainer_crds_are_established(kube: Client) -> None:
    for name in TRAINER_CRDS:
        crd = kube.get(CustomResourceDefinition, name)
        assert crd.status is not None and crd.status.conditions is not None
        established = {c.type: c.status for c in crd.status.conditions}
        assert established.get("Established") == "True", name


def test_discovery_gives_kubectl_each_kinds_short_name_and_the_nvcre_category(kube: Client) -> None:
    """What ``kubectl get nvcre`` and ``kubectl get nvcert`` resolve names with: the API server's discovery."""
    response = kube._client._client.get("/apis/nvcre.nvidia.com/v1alpha1")
    response.raise_for_status()
    served = {r["name"]: r for r in response.json()["resources"] if "/" not in r["name"]}
    assert {name: (r.get("shortNames"), r.get("categories")) for name, r in served.items()} == {
        "certifications": (["nvcert"], ["nvcre"]),
        "workloadruns": (["nvwr"], ["nvcre"]),
        "workflows": (["nvwf"], ["nvcre"]),
        "jobs": (["nvjob"], ["nvcre"]),
        "bandwidthmeasurements": (["nvbw"], ["nvcre"]),
        "goodputmeasurements": (["nvgp"], ["nvcre"]),
        "logprofiles": (["nvlp"], ["nvcre"]),
        "noderecords": (["nvnr"], ["nvcre"]),
        "reportexportpolicies": (["rep"], ["nvcre"]),
        "reportexports": (["rex"], ["nvcre"]),
    }


def test_trainjob_round_trips_through_the_real_schema(kube: Client, namespace: str) -> None:
    job = TrainJob(
        metadata=ObjectMeta(
            name="nccl", namespace=namespace, labels={"app.kubernetes.io/managed-by": "nvcre"}
        ),
        spec={
            "runtimeRef": {"name": "nccl-all-reduce-runtime", "kind": "TrainingRuntime"},
            "suspend": True,
            "trainer": {
                "image": "nvcr.io/nvidia/pytorch:26.01-py3",
                "command": ["timeout", "3600", "/usr/local/mpi/bin/mpirun"],
                "args": ["-N", "8", "--allow-run-as-root"],
                "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                "numNodes": 2,
                "numProcPerNode": 8,
                "resourcesPerNode": {"limits": {GPU_RESOURCE: "8"}, "requests": {GPU_RESOURCE: "8"}},
            },
        },
    )
    kube.create(job)
    stored = kube.get(TrainJob, "nccl", namespace=namespace)
    assert stored.spec["trainer"]["numNodes"] == 2
    assert stored.spec["runtimeRef"]["apiGroup"] == "trainer.kubeflow.org"  # schema default applied
    assert stored.spec["suspend"] is True


def test_trainjob_cel_rules_are_enforced(kube: Client, namespace: str) -> None:
    """The Trainer CRD's x-kubernetes-validations run in the real apiserver (create and update)."""
    with pytest.raises(ApiError) as caught:
        kube.create(
            TrainJob(metadata=ObjectMeta(name="9-starts-with-digit", namespace=namespace), spec=MINIMAL)
        )
    assert caught.value.status.code == 422
    assert "RFC 1035" in str(caught.value.status.message)

    kube.create(TrainJob(metadata=ObjectMeta(name="immutable", namespace=namespace), spec=MINIMAL))
    with pytest.raises(ApiError) as caught:
        kube.patch(
            TrainJob,
            "immutable",
            {"spec": {"runtimeRef": {"name": "other"}}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
    assert caught.value.status.code == 422
    assert "field is immutable" in str(caught.value.status.message)


def test_kwok_nodes_become_ready_with_gpu_capacity(kube: Client, gpu_nodes: GpuNodeFactory) -> None:
    nodes = gpu_nodes(3, GpuNodeSpec(platform="gcp", product="NVIDIA-GB200", gpus=4), clique_size=2)
    names = [n.metadata.name for n in nodes if n.metadata and n.metadata.name]
    assert len(names) == 3
    wait_for(
        lambda: all(node_ready(kube.get(Node, name)) for name in names),
        timeout=30,
        what=f"nodes {names} to become Ready",
    )
    for node in (kube.get(Node, name) for name in names):
        assert node.status is not None and node.status.allocatable is not None
        assert node.status.allocatable[GPU_RESOURCE] == "4"
        assert node.metadata is not None and node.metadata.labels is not None
        assert node.metadata.labels[GPU_PRODUCT] == "NVIDIA-GB200"
        assert node.spec is not None and str(node.spec.providerID).startswith("gce://")
    cliques = sorted(kube.get(Node, n).metadata.labels[GPU_CLIQUE] for n in names)  # type: ignore[union-attr,index]
    assert cliques[0] == cliques[1] != cliques[2]


def _pod(name: str, namespace: str, node: str, annotations: dict[str, str] | None = None) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace, annotations=annotations),
        spec=PodSpec(
            nodeName=node,
            restartPolicy="Never",
            containers=[Container(name="node", image="nvcr.io/nvidia/pytorch:26.01-py3")],
        ),
    )


def _phase(kube: Client, name: str, namespace: str) -> str | None:
    pod = kube.get(Pod, name, namespace=namespace)
    return pod.status.phase if pod.status else None


@pytest.fixture
def ready_node(kube: Client, gpu_nodes: GpuNodeFactory) -> str:
    (node,) = gpu_nodes(1)
    assert node.metadata is not None and node.metadata.name is not None
    name = node.metadata.name
    wait_for(lambda: node_ready(kube.get(Node, name)), timeout=30, what=f"node {name} Ready")
    return name


def test_pod_on_kwok_node_runs_and_succeeds(kube: Client, namespace: str, ready_node: str) -> None:
    kube.create(_pod("worker-0", namespace, ready_node))
    wait_for(lambda: _phase(kube, "worker-0", namespace) == "Running", timeout=30, what="worker-0 Running")
    kube.patch(
        Pod, "worker-0", {"metadata": {"annotations": {PHASE_ANNOTATION: "Succeeded"}}}, namespace=namespace
    )
    wait_for(
        lambda: _phase(kube, "worker-0", namespace) == "Succeeded", timeout=30, what="worker-0 Succeeded"
    )
    pod = kube.get(Pod, "worker-0", namespace=namespace)
    assert pod.status is not None and pod.status.containerStatuses is not None
    terminated = pod.status.containerStatuses[0].state.terminated  # type: ignore[union-attr]
    assert terminated is not None and terminated.exitCode == 0


def test_pod_on_kwok_node_can_be_failed_with_exit_code(kube: Client, namespace: str, ready_node: str) -> None:
    kube.create(_pod("worker-1", namespace, ready_node))
    wait_for(lambda: _phase(kube, "worker-1", namespace) == "Running", timeout=30, what="worker-1 Running")
    failure = {PHASE_ANNOTATION: "Failed", EXIT_CODE_ANNOTATION: "137", REASON_ANNOTATION: "OOMKilled"}
    kube.patch(Pod, "worker-1", {"metadata": {"annotations": failure}}, namespace=namespace)
    wait_for(lambda: _phase(kube, "worker-1", namespace) == "Failed", timeout=30, what="worker-1 Failed")
    pod = kube.get(Pod, "worker-1", namespace=namespace)
    assert pod.status is not None and pod.status.containerStatuses is not None
    terminated = pod.status.containerStatuses[0].state.terminated  # type: ignore[union-attr]
    assert terminated is not None and (terminated.exitCode, terminated.reason) == (137, "OOMKilled")


def test_pending_annotation_keeps_pod_pending(kube: Client, namespace: str, ready_node: str) -> None:
    kube.create(_pod("stuck", namespace, ready_node, {PHASE_ANNOTATION: "Pending"}))
    kube.create(_pod("probe", namespace, ready_node))
    wait_for(lambda: _phase(kube, "probe", namespace) == "Running", timeout=30, what="probe Running")
    assert _phase(kube, "stuck", namespace) == "Pending"


def test_pod_logs_are_served_through_kwok(kube: Client, kwok: Kwok, namespace: str, ready_node: str) -> None:
    kube.create(_pod("launcher", namespace, ready_node))
    wait_for(lambda: _phase(kube, "launcher", namespace) == "Running", timeout=30, what="launcher Running")
    lines = ["#  Avg bus bandwidth    : 371.42", "# Out of bounds values : 0 OK"]
    kwok.write_pod_logs(kube, namespace, "launcher", lines, container="node")
    text = wait_for(
        lambda: "\n".join(kube.log("launcher", namespace=namespace, container="node", newlines=False)),
        timeout=30,
        what="launcher logs via the pod log subresource (served by kwok)",
        ignore=(ApiError,),
    )
    assert text.splitlines() == lines


def test_deleting_pod_on_kwok_node_completes(kube: Client, namespace: str, ready_node: str) -> None:
    kube.create(_pod("gone", namespace, ready_node))
    wait_for(lambda: _phase(kube, "gone", namespace) == "Running", timeout=30, what="gone Running")
    kube.delete(Pod, "gone", namespace=namespace)

    def deleted() -> bool:
        try:
            kube.get(Pod, "gone", namespace=namespace)
        except ApiError as error:
            return error.status.code == 404
        return False

    wait_for(deleted, timeout=30, what="pod gone to be deleted by kwok")


@pytest.mark.asyncio
async def test_async_client_watches_pod_phases(
    async_kube: AsyncClient, kube: Client, namespace: str, ready_node: str
) -> None:
    """Watches are real: an async watch sees kwok move a pod from Pending to Running to Failed."""
    kube.create(_pod("watched", namespace, ready_node))
    seen: list[str] = []

    async def watch() -> None:
        async for _, pod in async_kube.watch(Pod, namespace=namespace, fields={"metadata.name": "watched"}):
            phase = pod.status.phase if pod.status and pod.status.phase else "Pending"
            if not seen or seen[-1] != phase:
                seen.append(phase)
            if phase == "Running" and PHASE_ANNOTATION not in (pod.metadata.annotations or {}):  # type: ignore[union-attr]
                await async_kube.patch(
                    Pod,
                    "watched",
                    {"metadata": {"annotations": {PHASE_ANNOTATION: "Failed"}}},
                    namespace=namespace,
                )
            if phase == "Failed":
                return

    await asyncio.wait_for(watch(), timeout=30)
    assert seen[-2:] == ["Running", "Failed"]
