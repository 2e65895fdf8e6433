"""examples/workloadrun/basic.yaml goes the whole real way on kwok GPU nodes.

nvcre renders the TrainJob; Trainer makes its JobSet, JobSet its batch Jobs, the Job controller
the pods (from the templates nvcre rendered), kube-scheduler binds them, kwok runs them. Ending
the launcher through kwok's stage (``nvcre.test/phase: Succeeded``, as mpirun exiting 0) lets
Trainer mark the TrainJob Complete and nvcre the WorkloadRun Succeeded; deleting the WorkloadRun
removes everything through the real garbage collector. Nothing here sets a TrainJob condition or
builds a pod.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job as BatchJob
from lightkube.resources.core_v1 import Namespace, Node, Pod

from nvcre import resources
from nvcre.api.v1alpha1.constants import Label
from nvcre.conditions import condition_of
from nvcre.testing.cluster import JobSet
from nvcre.testing.inspect import get, pinned_hosts, true_condition, wait_true
from nvcre.testing.kwok import PHASE_ANNOTATION
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.nodes import GpuNodeSpec, create_gpu_nodes
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import POOL_LABEL, pool_name

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workloadrun" / "basic.yaml"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
NODES = 4  # basic.yaml: numNodes 4, one group
#: A p5.48xlarge as nvcre's render for aws H100 expects it (EFA interfaces included).
AWS_H100 = GpuNodeSpec(
    platform="aws", product="NVIDIA-H100-80GB-HBM3", extra_resources={"vpc.amazonaws.com/efa": "32"}
)


@dataclass
class Run:
    kube: Client
    namespace: str
    name: str
    nodes: list[str]
    trainjob: dict[str, Any]
    jobset: dict[str, Any]
    jobs: dict[str, dict[str, Any]]
    pods: dict[str, dict[str, Any]]

    def pods_of(self, replicated_job: str) -> list[dict[str, Any]]:
        return [
            p for p in self.pods.values() if p["metadata"]["labels"].get(REPLICATED_JOB) == replicated_job
        ]


def _owner(obj: dict[str, Any]) -> tuple[str, str]:
    (ref,) = [r for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")]
    return ref["kind"], ref["name"]


def _listed(kube: Client, resource: Any, namespace: str, **labels: str) -> dict[str, dict[str, Any]]:
    found = kube.list(resource, namespace=namespace, labels=labels or None)
    return {str(o.metadata.name if o.metadata else ""): dict(o.to_dict()) for o in found}


@pytest.fixture(scope="module")
def run(kube: Client, manager: ManagerProcess) -> Iterator[Run]:
    """basic.yaml applied on four aws H100 nodes, followed until every pod is Running."""
    namespace = f"full-chain-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    pool = pool_name()
    spec = GpuNodeSpec(**{**AWS_H100.__dict__, "labels": {POOL_LABEL: pool}})
    nodes = create_gpu_nodes(kube, NODES, spec, prefix=pool)
    names = [n.metadata.name for n in nodes if n.metadata and n.metadata.name]
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"]["namespace"] = namespace
    document["spec"].setdefault("target", {}).setdefault("nodeSelector", {})[POOL_LABEL] = pool
    name = document["metadata"]["name"]
    kube.create(resources.WorkloadRun.from_dict(document))
    try:
        yield _follow(kube, namespace, name, names)
    finally:
        with contextlib.suppress(ApiError):
            kube.delete(resources.WorkloadRun, name, namespace=namespace)
        for node in names:
            with contextlib.suppress(ApiError):
                kube.delete(Node, node)
        with contextlib.suppress(ApiError):
            kube.delete(Namespace, namespace)


def _follow(kube: Client, namespace: str, name: str, nodes: list[str]) -> Run:
    job = f"{name}-job"
    trainjob_name = f"{job}-workload"
    trainjob = wait_for(
        lambda: get(kube, resources.TrainJob, trainjob_name, namespace),
        60,
        what=f"nvcre's TrainJob {trainjob_name}",
        ignore=(ApiError,),
    )
    jobset = wait_for(
        lambda: get(kube, JobSet, trainjob_name, namespace),
        60,
        what=f"Trainer's JobSet {trainjob_name}",
        ignore=(ApiError,),
    )
    replicated = [rj["name"] for rj in jobset["spec"]["replicatedJobs"]]

    def every_job() -> dict[str, dict[str, Any]] | None:
        jobs = _listed(kube, BatchJob, namespace, **{JOBSET_NAME: trainjob_name})
        seen = {j["metadata"]["labels"].get(REPLICATED_JOB) for j in jobs.values()}
        return jobs if seen == set(replicated) else None

    jobs = wait_for(
        every_job, 120, what=f"a batch Job per replicated job {replicated} of JobSet {trainjob_name}"
    )
    expected = sum(int(j["spec"].get("parallelism") or 1) for j in jobs.values())

    def all_running() -> dict[str, dict[str, Any]] | None:
        pods = _listed(kube, Pod, namespace, **{JOBSET_NAME: trainjob_name})
        running = [p for p in pods.values() if (p.get("status") or {}).get("phase") == "Running"]
        return pods if len(pods) == expected and len(running) == expected else None

    pods = wait_for(all_running, 120, what=f"{expected} pods of JobSet {trainjob_name} Running")
    return Run(kube, namespace, name, nodes, trainjob, jobset, jobs, pods)


def test_every_object_is_made_by_its_upstream_controller(run: Run) -> None:
    assert _owner(run.trainjob) == ("Job", f"{run.name}-job"), "nvcre's Job owns the TrainJob"
    assert _owner(run.jobset) == ("TrainJob", run.trainjob["metadata"]["name"]), "Trainer made the JobSet"
    assert sorted(j["metadata"]["labels"][REPLICATED_JOB] for j in run.jobs.values()) == ["launcher", "node"]
    for job in run.jobs.values():
        assert _owner(job) == ("JobSet", run.jobset["metadata"]["name"]), "JobSet made the batch Jobs"
    for pod in run.pods.values():
        assert _owner(pod)[0] == "Job" and _owner(pod)[1] in run.jobs, "the Job controller made the pods"
    assert len(run.pods_of("node")) == NODES
    assert len(run.pods_of("launcher")) == 1


def test_pods_are_bound_by_the_scheduler_to_nodes_of_their_group(run: Run) -> None:
    hosts = set(run.nodes)
    for pod in run.pods.values():
        assert pinned_hosts(pod) == hosts, "nvcre's Pinned hostname affinity reached the pod"
        assert pod["spec"]["nodeName"] in hosts, pod["metadata"]["name"]
        scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert scheduled["status"] == "True"
    workers = {p["spec"]["nodeName"] for p in run.pods_of("node")}
    assert workers == hosts, "one 8-GPU worker per node"


def test_pods_run_the_templates_nvcre_rendered(run: Run) -> None:
    runtime_name = run.trainjob["spec"]["runtimeRef"]["name"]
    runtime = get(run.kube, resources.TrainingRuntime, runtime_name, run.namespace)
    rendered = {
        rj["name"]: rj["template"]["spec"]["template"]["spec"]["containers"][0]
        for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]
    }
    for pod in run.pods_of("node"):
        (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
        assert container["args"] == rendered["node"]["args"], "the worker runs nvcre's sshd script"
        limits = {name: str(quantity) for name, quantity in rendered["node"]["resources"]["limits"].items()}
        assert container["resources"]["limits"] == limits, "GPUs and EFA interfaces as nvcre requested"
    (launcher,) = run.pods_of("launcher")
    (container,) = [c for c in launcher["spec"]["containers"] if c["name"] == "node"]
    trainer = run.trainjob["spec"]["trainer"]
    assert container["command"] == trainer["command"], "Trainer put nvcre's mpirun on the launcher"
    assert container["args"] == trainer["args"]


def test_worker_pods_carry_nvcre_labels(run: Run) -> None:
    for pod in run.pods_of("node"):
        assert pod["metadata"]["labels"][Label.JOB] == f"{run.name}-job"


def test_launcher_pods_carry_nvcre_labels(run: Run) -> None:
    for pod in run.pods_of("launcher"):
        assert pod["metadata"]["labels"].get(Label.JOB) == f"{run.name}-job"


def test_finishing_the_launcher_succeeds_the_run_and_deleting_it_collects_everything(run: Run) -> None:
    kube, namespace = run.kube, run.namespace
    (launcher,) = run.pods_of("launcher")
    kube.patch(
        Pod,
        launcher["metadata"]["name"],
        {"metadata": {"annotations": {PHASE_ANNOTATION: "Succeeded"}}},
        namespace=namespace,
    )
    trainjob_name = run.trainjob["metadata"]["name"]

    # The run ends once Trainer marks the TrainJob Complete; nvcre then deletes the TrainJob at
    # once (below), so the proof that Trainer did is the condition nvcre copied onto its Job.
    finished = wait_true(kube, resources.WorkloadRun, run.name, namespace, "Succeeded", timeout=120)
    job = get(kube, resources.Job, f"{run.name}-job", namespace)
    succeeded = condition_of(job, "Succeeded") or {}
    assert succeeded.get("status") == "True", job.get("status")
    assert succeeded["message"].startswith(f"Workload TrainJob/{trainjob_name} completed"), succeeded
    assert true_condition(finished) is not None

    # The ended run releases its workload: nvcre deletes the TrainJob, the garbage collector its
    # JobSet, batch Jobs and pods; the run says so once none is left, and its Jobs stay.
    def released() -> dict[str, Any] | None:
        found = condition_of(get(kube, resources.WorkloadRun, run.name, namespace), "ResourcesReleased")
        return found if found and found["status"] == "True" else None

    assert wait_for(released, 90, what="ResourcesReleased")["reason"] == "Released"
    left = {
        "TrainJob": _listed(kube, resources.TrainJob, namespace),
        "JobSet": _listed(kube, JobSet, namespace),
        "Pod": _listed(kube, Pod, namespace),
    }
    assert left == {"TrainJob": {}, "JobSet": {}, "Pod": {}}
    assert list(_listed(kube, resources.Job, namespace)) == [f"{run.name}-job"], "kept for the report"

    kube.delete(resources.WorkloadRun, run.name, namespace=namespace)

    def collected() -> bool:
        left = {
            "TrainJob": _listed(kube, resources.TrainJob, namespace),
            "JobSet": _listed(kube, JobSet, namespace),
            "batch Job": _listed(kube, BatchJob, namespace),
            "Pod": _listed(kube, Pod, namespace),
            "Workflow": _listed(kube, resources.Workflow, namespace),
        }
        return not any(left.values())

    wait_for(
        collected, 90, what="the garbage collector to remove the run's Workflow, TrainJob, JobSet, Jobs, pods"
    )
