"""What the manager caches, on the real API server: workload pods only, trimmed nodes.

The pod cache is narrowed by a label selector, so the API server decides what the manager sees:
these tests check what it does when a pod gains or loses the label (it sends ADDED and DELETED)
and that pods of other workloads never reach the manager's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod

from nvcre import resources
from nvcre.api.v1alpha1.constants import Default, Label
from nvcre.controllers import indexes
from nvcre.health.nodes import unhealthy_nodes
from nvcre.objects import Obj, resource_version
from nvcre.orchestration.discovery import discover, name_of
from nvcre.platform.detect import detect_platform, node_architecture
from nvcre.runtime.manager import Manager
from nvcre.runtime.writes import update_with_retry
from nvcre.sandbox import faults
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import own_patch, trainjob_of
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.nodes import GpuNodeSpec, gpu_node
from nvcre.testing.waiting import async_wait_for, wait_for
from nvcre.testing.workloads import POOL_LABEL, pool_name, workflow

CACHED = "nvcre_informer_cached_objects"
NOW = "2026-01-01T00:00:00Z"


@pytest.fixture
def other_namespace(kube: Client) -> Iterator[str]:
    """A namespace nvcre has nothing to do with (another team's workloads)."""
    name = f"unrelated-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))
    yield name
    with contextlib.suppress(Exception):
        kube.delete(Namespace, name)


def unrelated_pod(kube: Client, namespace: str, name: str) -> None:
    kube.create(
        Pod.from_dict(
            {
                "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            }
        )
    )


def workload_pod(kube: Client, namespace: str, trainjob: dict[str, Any], name: str) -> str:
    """A pod as Kubeflow Trainer creates it from the pod template nvcre rendered into the
    TrainJob (its labels are nvcre's), unscheduled, so nothing runs it."""
    template = next(t for t in own_patch(trainjob).values() if Label.JOB in t["metadata"].get("labels", {}))
    kube.create(
        Pod.from_dict(
            {
                "metadata": {"name": name, "namespace": namespace, "labels": template["metadata"]["labels"]},
                "spec": {"containers": [{"name": "node", "image": "img"}]},
            }
        )
    )
    return name


def relabel(kube: Client, namespace: str, name: str, job: str | None) -> None:
    kube.patch(Pod, name, {"metadata": {"labels": {Label.JOB: job}}}, namespace=namespace)


def cached_pods(manager: ManagerProcess) -> float | None:
    return manager.metric(CACHED, kind="Pod")


def workload_pods(kube: Client) -> int:
    return len(list(kube.list(Pod, namespace="*", labels=indexes.WORKLOAD_PODS)))


def test_only_workload_pods_reach_the_manager_and_the_label_decides(
    kube: Client,
    control_plane: ControlPlane,
    kwok: Kwok,
    namespace: str,
    other_namespace: str,
    gpu_nodes: Any,
    tmp_path: Path,
) -> None:
    unrelated_pod(kube, other_namespace, "before-the-manager")
    pool = pool_name()
    gpu_nodes(1, GpuNodeSpec(labels={POOL_LABEL: pool}))
    manager = ManagerProcess(control_plane, tmp_path, name="cache-manager").start()
    try:
        # Synced (the list is done): exactly the labelled pods of the whole cluster are cached.
        labelled = (
            wait_for(
                lambda: (n := workload_pods(kube)) == cached_pods(manager) and n + 1,
                30,
                what="the gauge to count the workload pods of the cluster",
            )
            - 1
        )
        assert len(list(kube.list(Pod, namespace="*"))) > labelled, "other pods exist, uncounted"

        kube.create(resources.Workflow.from_dict(workflow("cache", namespace, pool, 1)))
        trainjob = trainjob_of(kube, namespace, "cache-job")
        pod = workload_pod(kube, namespace, trainjob, "cache-node-0")
        wait_for(lambda: cached_pods(manager) == labelled + 1, 30, what="the workload pod cached")

        # The watch: a new unrelated pod, then the workload pod loses its label. The API server
        # sends both in this order; only if the unrelated pod was never counted does the gauge
        # come back to `labelled` (otherwise it would stay one above).
        unrelated_pod(kube, other_namespace, "while-the-manager-runs")
        relabel(kube, namespace, pod, None)
        wait_for(
            lambda: cached_pods(manager) == labelled,
            30,
            what="the pod that lost its label to leave the cache (and the unrelated pod never in it)",
        )
        relabel(kube, namespace, pod, "cache-job")
        wait_for(lambda: cached_pods(manager) == labelled + 1, 30, what="the relabelled pod back")
        assert manager.running()
    finally:
        manager.stop()


@pytest.mark.asyncio
async def test_cached_nodes_are_trimmed_and_label_changes_arrive_as_added_and_deleted(
    async_kube: AsyncClient,
    kube: Client,
    namespace: str,
    other_namespace: str,
    gpu_nodes: Any,
    manager: ManagerProcess,
) -> None:
    """In process, to read the cache itself: which keys it holds (trimmed nodes and pods), which
    events it hands out.
    (The ``manager`` fixture only renders the TrainJob the workload pod comes from.)"""
    runtime = Manager(async_kube)
    pods, nodes = indexes.pods(runtime), indexes.nodes(runtime)
    events: list[tuple[str, str, str | None, str | None]] = []

    def record(event: str, old: Obj | None, new: Obj) -> None:
        def job(obj: Obj | None) -> str | None:
            return ((obj or {}).get("metadata", {}).get("labels") or {}).get(Label.JOB)

        events.append((event, new["metadata"]["name"], job(old), job(new)))

    pods.add_handler(record)
    name = f"trim-{secrets.token_hex(3)}"  # a node no kwok manages: its status stays as written
    kube.create(Node(metadata=ObjectMeta(name=name, labels={"nvcre.test/cache": "true"})))
    images = [{"names": ["nvcr.io/nvidia/pytorch:25.06-py3"], "sizeBytes": 9_000_000_000}]
    served = kube.patch(Node.Status, name, {"status": {"images": images}}).to_dict()
    assert served["status"]["images"] and served["metadata"]["managedFields"]
    tasks = [asyncio.create_task(informer.run()) for informer in (pods, nodes)]
    try:
        await asyncio.wait_for(asyncio.gather(pods.synced.wait(), nodes.synced.wait()), 30)
        cached = nodes.get("", name)
        assert cached is not None
        assert resource_version(cached) >= resource_version(served)
        assert "images" not in cached["status"] and "managedFields" not in cached["metadata"]
        assert cached["metadata"]["labels"] == {"nvcre.test/cache": "true"}, "the rest stays"

        pool = pool_name()
        gpu_nodes(1, GpuNodeSpec(labels={POOL_LABEL: pool}))
        kube.create(resources.Workflow.from_dict(workflow("events", namespace, pool, 1)))
        job = "events-job"
        unrelated_pod(kube, other_namespace, "unrelated")
        pod = workload_pod(kube, namespace, trainjob_of(kube, namespace, job), "events-node-0")
        await async_wait_for(lambda: now(pods.get(namespace, pod)), 30, what="the pod cached")
        served_pod = kube.get(Pod, pod, namespace=namespace).to_dict()
        cached_pod = pods.get(namespace, pod)
        assert cached_pod is not None and served_pod["spec"]["restartPolicy"], "the server's defaults"
        assert cached_pod["spec"] == {"containers": [{"name": "node"}]}, "of the spec: the containers' names"
        assert cached_pod["metadata"]["labels"] == served_pod["metadata"]["labels"]
        relabel(kube, namespace, pod, None)
        await async_wait_for(lambda: now(pods.get(namespace, pod) is None), 30, what="the pod gone")
        assert pods.by_index(indexes.POD_JOB_INDEX, job) == []
        relabel(kube, namespace, pod, job)
        await async_wait_for(lambda: now(pods.get(namespace, pod)), 30, what="the pod back")
        assert [p["metadata"]["name"] for p in pods.by_index(indexes.POD_JOB_INDEX, job)] == [pod]
        assert pods.get(other_namespace, "unrelated") is None
        assert [e for e in events if e[1] in (pod, "unrelated")] == [
            ("ADDED", pod, None, job),
            # A pod that stops matching arrives as DELETED carrying its last matching state.
            ("DELETED", pod, job, job),
            ("ADDED", pod, None, job),
        ]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        kube.delete(Node, name)


async def now(value: object) -> object:
    return value


@pytest.mark.asyncio
async def test_a_cached_object_written_back_keeps_its_managed_fields(
    async_kube: AsyncClient, kube: Client, namespace: str
) -> None:
    """The caches drop managedFields; a write that starts from the cached view must not."""
    created = kube.create(ConfigMap(metadata=ObjectMeta(name="cm", namespace=namespace), data={"a": "1"}))
    before = {m.manager for m in created.metadata.managedFields or ()}  # type: ignore[union-attr]
    runtime = Manager(async_kube)
    informer = runtime.informer(ConfigMap, namespace=namespace)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        view = informer.get(namespace, "cm")
        assert view is not None and "managedFields" not in view["metadata"]

        def mutate(live: Obj) -> Obj:
            live["data"]["b"] = "2"
            return live

        written = await update_with_retry(async_kube, ConfigMap, "cm", namespace, mutate, current=view)
        assert written is not None and written["data"] == {"a": "1", "b": "2"}
        assert resource_version(written) > resource_version(view), "written on top of the view"
        live = kube.get(ConfigMap, "cm", namespace=namespace)
        after = {m.manager for m in live.metadata.managedFields or ()}  # type: ignore[union-attr]
        assert before and before <= after, (before, after)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


HEALTH_EXPRESSIONS = (
    "node.spec.unschedulable == true",  # a cordon alone
    Default.NODE_HEALTH_EXPRESSION,
    f"node.status.conditions.exists(c, c.type == '{faults.HEALTH_CONDITION}' && c.status == 'False')",
    f"node.spec.taints.exists(t, t.key == '{faults.HEALTH_TAINT}' && t.effect == 'NoSchedule')",
    f"'{faults.HEALTH_LABEL}' in node.metadata.labels",
    "node.status.allocatable['nvidia.com/gpu'] != '8'",
)
"""The node-health expressions the docs show (controllers.md, sandbox.md) and a resource one."""


@pytest.mark.asyncio
async def test_a_cached_node_answers_what_discovery_and_the_health_check_read(
    async_kube: AsyncClient, kube: Client
) -> None:
    """The cache decodes nodes as plain JSON and shares their strings: the cached node must still
    be the served one (but for images and managedFields), and discovery, platform and GPU
    detection and every documented health expression must answer on it as on the served node."""
    pool = pool_name()
    healthy, broken = (f"cel-{secrets.token_hex(3)}-{i}" for i in range(2))
    for name in (healthy, broken):  # not kwok's (no annotation): the status stays as written
        body = gpu_node(name, GpuNodeSpec(labels={POOL_LABEL: pool})).to_dict()
        del body["metadata"]["annotations"]
        kube.create(Node.from_dict(body))
    # what a health agent writes on a bad GPU (the sandbox's xid fault): condition, taint, label
    change = faults.node_change(faults.parse_faults([f"{broken}=xid:79"]), broken)
    for name in (healthy, broken):
        node = kube.get(Node, name).to_dict()
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": NOW}
        node["status"]["conditions"] = [ready]
        node["status"]["images"] = [{"names": ["nvcr.io/nvidia/pytorch:25.06-py3"], "sizeBytes": 9}]
        if name == broken:
            node = faults.apply_node_change(node, change, now=NOW)
            node["status"]["allocatable"]["nvidia.com/gpu"] = "7"
            kube.patch(Node, name, {"metadata": {"labels": node["metadata"]["labels"]}, "spec": node["spec"]})
        kube.patch(Node.Status, name, {"status": node["status"]})
    served = {name: kube.get(Node, name).to_dict() for name in (healthy, broken)}
    for node in served.values():
        assert node["status"]["images"] and node["metadata"]["managedFields"]
        del node["status"]["images"], node["metadata"]["managedFields"]

    nodes = indexes.nodes(Manager(async_kube))
    task = asyncio.create_task(nodes.run())
    try:
        await asyncio.wait_for(nodes.synced.wait(), 30)
        cached = {name: nodes.get("", name) for name in (healthy, broken)}
        assert cached == served, "the served node, but for images and managedFields"

        target = workflow("cel", "default", pool, 1)["spec"]["orchestration"]["target"]
        from_cache = discover(nodes.items(), target)
        assert [name_of(n) for n in from_cache.nodes] == sorted((healthy, broken))
        assert from_cache == discover(served.values(), target)
        assert detect_platform(from_cache.nodes) == detect_platform(served.values())
        assert {node_architecture(n) for n in from_cache.nodes} == {"h100"}
        for expression in HEALTH_EXPRESSIONS:
            verdict = unhealthy_nodes(expression, cached.values())  # type: ignore[arg-type]
            assert verdict == unhealthy_nodes(expression, served.values()), expression
            expected = [] if expression == HEALTH_EXPRESSIONS[0] else [broken]
            assert verdict.failing == expected and not verdict.errors, (expression, verdict)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for name in (healthy, broken):
            kube.delete(Node, name)
