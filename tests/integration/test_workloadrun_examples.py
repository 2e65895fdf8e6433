"""Every seed example in examples/workloadrun/ runs on simulated nodes and delivers what it promises.

Each example is created as written (in the test's namespace, its target narrowed to the test's
node pool) against kwok nodes of a matching platform and GPU. The test then reads what reached
the cluster: the Workflow, the Job, the TrainJob and the job-scoped TrainingRuntime copy the
TrainJob runs (``<runtime>-<hash>-job``), and checks the seed's promises there: scheduler name
on launcher and workers, queue labels on the TrainJob and the runtime templates, ``mpirun -x``
forwarding, volumes only where they belong, NIC requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap

from nvcre import resources
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import get, jobs_of, own_patch, trainjob_of, true_condition, wait_true
from nvcre.testing.nodes import GpuNodeSpec
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import COMPUTE_DOMAIN_CRD, POOL_LABEL, pool_name

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workloadrun"


@dataclass
class Seen:
    """What one example put on the cluster."""

    run: dict[str, Any]
    workflow: dict[str, Any]
    job: dict[str, Any]
    trainjob: dict[str, Any]
    runtime: dict[str, Any]
    kube: Client
    namespace: str

    def pod(self, replicated_job: str) -> dict[str, Any]:
        """The pod template of a replicated job in the runtime copy the TrainJob runs."""
        for rj in self.runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            if rj["name"] == replicated_job:
                return dict(rj["template"]["spec"]["template"])
        raise AssertionError(f"no replicated job {replicated_job} in {self.runtime['metadata']['name']}")

    def job_template_labels(self, replicated_job: str) -> dict[str, str]:
        for rj in self.runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            if rj["name"] == replicated_job:
                return dict((rj["template"].get("metadata") or {}).get("labels") or {})
        raise AssertionError(replicated_job)

    def container(self, replicated_job: str) -> dict[str, Any]:
        return dict(self.pod(replicated_job)["spec"]["containers"][0])

    def volumes(self, replicated_job: str) -> set[str]:
        return {v["name"] for v in self.pod(replicated_job)["spec"].get("volumes") or ()}

    def config_map(self, replicated_job: str, volume: str) -> dict[str, Any]:
        """The ConfigMap a volume of the runtime copy mounts (itself a job-scoped copy)."""
        (source,) = [v for v in self.pod(replicated_job)["spec"]["volumes"] if v["name"] == volume]
        return dict(self.kube.get(ConfigMap, source["configMap"]["name"], namespace=self.namespace).to_dict())

    def mounts(self, replicated_job: str) -> dict[str, str]:
        return {m["name"]: m["mountPath"] for m in self.container(replicated_job).get("volumeMounts") or ()}

    @property
    def args(self) -> list[str]:
        return list(self.trainjob["spec"]["trainer"].get("args") or ())

    def forwarded(self) -> dict[str, str]:
        """``mpirun -x NAME=value`` pairs of the trainer's arguments."""
        args = self.args
        pairs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-x"]
        return dict(p.split("=", 1) if "=" in p else (p, "") for p in pairs)

    def affinity_keys(self, replicated_job: str) -> set[str]:
        pod = own_patch(self.trainjob).get(replicated_job) or {}
        terms = (
            (pod.get("spec") or {})
            .get("affinity", {})
            .get("nodeAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {})
            .get("nodeSelectorTerms", [])
        )
        return {e["key"] for t in terms for e in t.get("matchExpressions") or ()}


@dataclass
class Example:
    file: str
    nodes: int
    spec: GpuNodeSpec = field(default_factory=GpuNodeSpec)
    check: Callable[[Seen], None] = lambda seen: None
    extra_nodes: tuple[int, GpuNodeSpec] | None = None


def gang(scheduler: str, key: str, queue: str) -> Callable[[Seen], None]:
    def check(seen: Seen) -> None:
        for rj in ("launcher", "node"):
            assert seen.pod(rj)["spec"]["schedulerName"] == scheduler, rj
            assert seen.pod(rj)["metadata"]["labels"][key] == queue, f"{rj} pod template"
            assert seen.job_template_labels(rj)[key] == queue, f"{rj} Job template"
            assert "dependsOn" not in next(
                r for r in seen.runtime["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == rj
            ), "a gang is admitted whole: the launcher waits for nothing"
        assert seen.trainjob["metadata"]["labels"][key] == queue, "the TrainJob carries the queue"
        assert seen.workflow["spec"]["gangScheduler"] == {
            "schedulerName": scheduler,
            "queue": queue,
            "queueLabelKey": key,
        }

    return check


def nccl_forwarded(seen: Seen, debug: str = "INFO") -> None:
    forwarded = seen.forwarded()
    assert forwarded["NCCL_DEBUG"] == debug
    assert "NCCL_MNNVL_ENABLE" in forwarded
    for name in ("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"):
        assert name in forwarded, f"the AWS H100 EFA env reaches the ranks: {name}"
    env = {e["name"]: e.get("value") for e in seen.container("launcher")["env"]}
    assert env["NCCL_DEBUG"] == debug


def check_nccl_all_reduce(seen: Seen) -> None:
    gang("kai-scheduler", "kai.scheduler/queue", "high-priority")(seen)
    nccl_forwarded(seen)
    job_spec = seen.job["spec"]
    assert job_spec["bandwidthMeasurement"] == {"logProfileRef": "nccl-bandwidth", "testType": "all_reduce"}
    assert job_spec["goodputMeasurement"] == {"logProfileRef": "megatron-training", "allowMissingData": True}


def check_basic(seen: Seen) -> None:
    nccl_forwarded(seen)
    assert "schedulerName" not in seen.pod("node")["spec"]
    assert seen.trainjob["spec"]["trainer"]["numNodes"] == 4
    assert seen.trainjob["spec"]["trainer"]["numProcPerNode"] == 8
    assert seen.container("node")["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "vpc.amazonaws.com/efa" in seen.container("node")["resources"]["limits"], "EFA requested on aws"


def check_env(seen: Seen) -> None:
    nccl_forwarded(seen, debug="TRACE")
    assert "NCCL_DEBUG=INFO" not in seen.args, "spec.env wins over the default"
    for rj in ("launcher", "node"):
        env = {e["name"]: e.get("value") for e in seen.container(rj)["env"]}
        assert env["NCCL_DEBUG"] == "TRACE", rj


def check_unpinned(seen: Seen) -> None:
    gang("kai-scheduler", "kai.scheduler/queue", "default-queue")(seen)
    assert seen.trainjob["spec"]["trainer"]["numNodes"] == 8
    for rj in ("launcher", "node"):
        assert "kubernetes.io/hostname" not in seen.affinity_keys(rj), f"{rj} is not pinned"


def check_clique(seen: Seen) -> None:
    assert seen.trainjob["spec"]["trainer"]["numNodes"] == 8
    keys = seen.affinity_keys("node")
    assert "nvidia.com/gpu.clique" in keys, "the target's domain label reaches the pods"
    assert "kubernetes.io/hostname" not in keys


def check_from_pvc(seen: Seen) -> None:
    assert {"datasets", "config-volume", "dshm"} <= seen.volumes("node")
    assert seen.mounts("node")["datasets"] == "/data"
    assert [c["name"] for c in seen.pod("node")["spec"]["initContainers"]] == ["list-data"]
    assert "datasets" not in seen.volumes("launcher"), "user volumes go to the workers only"
    assert seen.mounts("launcher")["config-volume"] == "/config", "the launcher reads /config"
    for rj in ("node", "launcher"):
        config = seen.config_map(rj, "config-volume")
        assert config["metadata"]["name"].startswith("nccl-from-pvc-config")
        assert "run_nccl.sh" in config["data"]
    assert seen.trainjob["spec"]["trainer"]["command"][-1] == "/usr/local/mpi/bin/mpirun"
    assert "/config/run_nccl.sh" in seen.args


def check_hostpath_rdma(seen: Seen) -> None:
    node = seen.container("node")
    assert node["securityContext"]["privileged"] is True, "the runtime override applied"
    assert seen.mounts("node")["ib-dev"] == "/dev/infiniband"
    assert "ib-dev" in seen.volumes("node")
    assert "ib-dev" not in seen.volumes("launcher")
    assert node["resources"]["limits"]["rdma/ib"] == "8", "the detected RDMA NIC resource is requested"
    assert "rdma/ib" not in (seen.container("launcher").get("resources") or {}).get("limits", {})


def check_kueue(seen: Seen) -> None:
    labels = seen.trainjob["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "gpu-team-a"
    assert labels["kai.scheduler/queue"] == "team-a"
    assert seen.pod("node")["spec"]["schedulerName"] == "kai-scheduler"
    assert seen.pod("node")["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    assert "kueue.x-k8s.io/queue-name" not in seen.pod("node")["metadata"]["labels"], "not a pod label"
    assert seen.trainjob["spec"]["trainer"]["command"] == ["torchrun"]
    assert "dist.init_process_group" in seen.config_map("node", "config-volume")["data"]["train.py"]


def check_measurements(seen: Seen) -> None:
    assert seen.job["spec"]["bandwidthMeasurement"]["logProfileRef"] == "nccl-bandwidth"
    assert seen.job["spec"]["goodputMeasurement"] == {
        "logProfileRef": "megatron-training",
        "allowMissingData": True,
    }
    assert seen.workflow["spec"]["validation"]["performance"]["thresholds"]["thresholds"] == {
        "busBandwidthGBps": "value >= 300"
    }


AWS_H100 = GpuNodeSpec(
    platform="aws", product="NVIDIA-H100-80GB-HBM3", extra_resources={"vpc.amazonaws.com/efa": "32"}
)

EXAMPLES_SEEN = [
    Example("nccl-all-reduce", 4, AWS_H100, check_nccl_all_reduce),
    Example("gang-scheduled", 4, AWS_H100, gang("kai-scheduler", "kai.scheduler/queue", "high-priority")),
    Example("runai", 4, AWS_H100, gang("runai-scheduler", "runai/queue", "team-a")),
    Example("unpinned-single-job", 8, AWS_H100, check_unpinned),
    Example(
        "clique-confined",
        8,
        GpuNodeSpec(platform="aws", product="NVIDIA-H100-80GB-HBM3", clique="clique-0"),
        check_clique,
        extra_nodes=(2, GpuNodeSpec(platform="aws", product="NVIDIA-H100-80GB-HBM3", clique="clique-1")),
    ),
    Example("nccl-from-pvc", 4, AWS_H100, check_from_pvc),
    Example(
        "hostpath-rdma",
        2,
        GpuNodeSpec(platform="onprem", product="NVIDIA-GB200", gpus=4, rdma_ib=8),
        check_hostpath_rdma,
    ),
    Example("env", 4, AWS_H100, check_env),
    Example("measurements", 4, AWS_H100, check_measurements),
    Example("basic", 4, AWS_H100, check_basic),
    Example("kueue-queue", 2, AWS_H100, check_kueue),
]


def test_every_example_is_covered() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.yaml")) == sorted(e.file for e in EXAMPLES_SEEN)


@pytest.fixture(scope="module")
def compute_domains(control_plane: ControlPlane) -> Iterator[None]:
    """GB200 runs create a ComputeDomain dependency: serve its kind (its driver does not run here)."""
    control_plane.install_crds([COMPUTE_DOMAIN_CRD])
    yield


def narrowed(run: dict[str, Any], namespace: str, pool: str) -> dict[str, Any]:
    run["metadata"]["namespace"] = namespace
    target = run["spec"].setdefault("target", {})
    target.setdefault("nodeSelector", {})[POOL_LABEL] = pool
    return run


@pytest.mark.parametrize("example", EXAMPLES_SEEN, ids=[e.file for e in EXAMPLES_SEEN])
def test_example(
    example: Example,
    kube: Client,
    namespace: str,
    gpu_nodes: Any,
    manager: Any,
    compute_domains: None,
) -> None:
    pool = pool_name()
    spec = example.spec
    gpu_nodes(example.nodes, GpuNodeSpec(**{**spec.__dict__, "labels": {POOL_LABEL: pool}}))
    if example.extra_nodes:
        count, extra = example.extra_nodes
        gpu_nodes(count, GpuNodeSpec(**{**extra.__dict__, "labels": {POOL_LABEL: pool}}))
    run = narrowed(yaml.safe_load((EXAMPLES / f"{example.file}.yaml").read_text()), namespace, pool)
    name = run["metadata"]["name"]
    kube.create(resources.WorkloadRun.from_dict(run))

    created = wait_true(kube, resources.WorkloadRun, name, namespace, "InProgress")
    assert true_condition(created) == ("InProgress", "WorkflowCreated", f"Workflow {name} created")
    jobs = wait_for(lambda: jobs_of(kube, namespace, name) or None, 60, what=f"the Job of {name}")
    assert list(jobs) == [f"{name}-job"], "one group: the run's nodes make exactly one Job"
    trainjob = trainjob_of(kube, namespace, f"{name}-job")
    runtime_name = trainjob["spec"]["runtimeRef"]["name"]
    assert runtime_name.startswith(f"{name}-runtime-") and runtime_name.endswith("-job"), runtime_name
    runtime = get(kube, resources.TrainingRuntime, runtime_name, namespace)
    workflow = get(kube, resources.Workflow, name, namespace)
    assert workflow["metadata"]["labels"]["nvcre.nvidia.com/workload-run"] == name
    seen = Seen(created, workflow, jobs[f"{name}-job"], trainjob, runtime, kube, namespace)
    example.check(seen)
