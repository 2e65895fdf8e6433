"""The test builders: each one's object is one nvcre's own validation accepts, and each setter
writes the field it names."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.api.trainer.v1alpha1 import TrainingRuntime as TrainingRuntimeModel
from nvcre.api.trainer.v1alpha1 import TrainJob as TrainJobModel
from nvcre.api.v1alpha1.constants import API_VERSION, TRAINER_API_VERSION, NodeLabel, ReplicatedJob
from nvcre.testing.builders import (
    DELETE,
    BandwidthMeasurement,
    Certification,
    GoodputMeasurement,
    GpuNode,
    Job,
    LogProfile,
    TrainingRuntime,
    TrainJob,
    Workflow,
    WorkloadRun,
    at,
    category,
    pool_spec,
)
from nvcre.testing.nodes import POOL_LABEL
from nvcre.validation.manifests import check_object


def accepted(document: dict[str, Any]) -> None:
    report = check_object(document, "built.yaml", 0)
    assert report.ok, [str(f) for f in report.findings]


BUILT = [
    ("workloadrun", WorkloadRun()),
    (
        "workloadrun-chained",
        WorkloadRun("x")
        .namespace("ns")
        .pool("p")
        .nodes(4)
        .gpus(8)
        .threshold("busBandwidthGBps", "value >= 400")
        .bandwidth(sample_interval="5s")
        .override({"metadata": {"labels": {"team": "a"}}}, when={"expression": "platform == 'aws'"}),
    ),
    ("workloadrun-torch", WorkloadRun().torch("train.py", args=["--x"])),
    ("workloadrun-exec", WorkloadRun().exec("sleep", "1")),
    ("certification", Certification()),
    (
        "certification-chained",
        Certification("c")
        .pool("p")
        .allow_missing_data()
        .categories(category(), category("training", "nemo-llama3-8b"))
        .threshold("busBandwidthGBps", "value >= 100"),
    ),
    ("job", Job()),
    (
        "job-chained",
        Job("j")
        .train_job("my-rt", 4)
        .threshold("goodputRatio", "value > 0.9")
        .goodput("megatron-training", "1m"),
    ),
    ("job-health", Job().health("node.spec.taints.exists(t, t.key == 'x')")),
    ("workflow", Workflow()),
    (
        "workflow-chained",
        Workflow("wf")
        .namespace("ns")
        .pool("p")
        .nodes(2)
        .with_runtime(launcher=True)
        .orchestration(iterations=2)
        .bandwidth()
        .threshold("busBandwidthGBps", "value >= 1"),
    ),
    ("logprofile", LogProfile()),
    (
        "logprofile-pattern",
        LogProfile("mine").pattern(
            "bandwidthResult", r"size=(?P<size>\d+) alg=(?P<algBW>[\d.]+) bus=(?P<busBW>[\d.]+)"
        ),
    ),
    ("bandwidth", BandwidthMeasurement()),
    ("bandwidth-interval", BandwidthMeasurement("b").sample_interval("10s")),
    ("goodput", GoodputMeasurement()),
    ("goodput-profile", GoodputMeasurement("g").profile("megatron-training")),
]


@pytest.mark.parametrize(("id_", "builder"), BUILT, ids=[b[0] for b in BUILT])
def test_built_objects_pass_offline_validation(id_: str, builder: Any) -> None:
    document = builder.obj()
    assert document["apiVersion"] == API_VERSION
    accepted(document)


def test_obj_is_a_fresh_copy_each_time() -> None:
    run = WorkloadRun("x")
    first = run.obj()
    first["spec"]["numNodes"] = 99
    assert run.obj()["spec"]["numNodes"] == 2
    assert run.nodes(3).obj()["spec"]["numNodes"] == 3


def test_setters_write_the_fields_they_name() -> None:
    run = (
        WorkloadRun("x").namespace("ns").pool("p").nodes(4).threshold("busBandwidthGBps", "value >= 1").obj()
    )
    assert run["metadata"] == {"name": "x", "namespace": "ns"}
    assert run["spec"]["target"] == {"nodeSelector": {POOL_LABEL: "p"}}
    assert run["spec"]["numNodes"] == 4
    assert run["spec"]["thresholds"] == {"busBandwidthGBps": "value >= 1"}
    wf = Workflow("wf").threshold("goodputRatio", "value > 0").goodput(sample_interval="5s").obj()
    assert wf["spec"]["jobTemplate"]["spec"]["thresholds"] == {"goodputRatio": "value > 0"}
    assert wf["spec"]["jobTemplate"]["spec"]["goodputMeasurement"] == {
        "logProfileRef": "nemo-training",
        "sampleInterval": "5s",
    }


def test_set_and_delete_any_field() -> None:
    assert "image" not in WorkloadRun().set("spec.image", DELETE).obj()["spec"]
    assert WorkloadRun().spec(image=DELETE).obj()["spec"].keys() == {"framework", "numNodes"}
    assert WorkloadRun().spec(image=None).obj()["spec"]["image"] is None
    assert at(WorkloadRun().obj(), "spec.image", DELETE) == WorkloadRun().set("spec.image", DELETE).obj()


def test_training_runtime_jobs_and_model() -> None:
    plain = TrainingRuntime("rt").obj()
    assert plain["apiVersion"] == TRAINER_API_VERSION
    assert [j["name"] for j in plain["spec"]["template"]["spec"]["replicatedJobs"]] == [ReplicatedJob.NODE]
    mpi = TrainingRuntime("rt").launcher().ml_policy(mpi={"numProcPerNode": 8}).obj()
    jobs = mpi["spec"]["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == [ReplicatedJob.LAUNCHER, ReplicatedJob.NODE]
    assert jobs[0]["template"]["spec"]["template"]["spec"]["containers"] == [
        {"name": "launcher", "image": "img"}
    ]
    for document in (plain, mpi):
        TrainingRuntimeModel.model_validate(document)
    assert TrainingRuntime("rt").launcher().launcher(False).obj() == plain


def test_workflow_runtime_is_its_first_dependency() -> None:
    wf = Workflow("wf").nodes(3).with_runtime(launcher=True).dependencies({"kind": "ConfigMap"}).obj()
    runtime, config_map = wf["spec"]["dependencies"]
    assert runtime == TrainingRuntime("wf-rt").launcher().obj()
    assert config_map == {"kind": "ConfigMap"}
    train_job = wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]
    assert train_job["runtimeRef"] == {"name": "wf-rt", "kind": "TrainingRuntime"}
    assert train_job["trainer"]["numNodes"] == 3
    assert [
        j["name"]
        for j in train_job["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    ] == [
        ReplicatedJob.NODE,
        ReplicatedJob.LAUNCHER,
    ]


def test_train_job_model() -> None:
    document = TrainJob("tj", runtime="rt", nodes=2).namespace("ns").obj()
    model = TrainJobModel.model_validate(document)
    assert model.to_dict()["spec"]["trainer"]["numNodes"] == 2


def test_gpu_node_builds_on_the_node_helper() -> None:
    node = GpuNode("n-0").product("NVIDIA-H200").gpus(4).pool("p").taint("t").unschedulable().obj()
    assert node.metadata is not None and node.metadata.labels is not None
    assert node.metadata.name == "n-0"
    assert node.metadata.labels[NodeLabel.GPU_PRODUCT] == "NVIDIA-H200"
    assert node.metadata.labels[POOL_LABEL] == "p"
    assert node.spec is not None and node.spec.unschedulable and node.spec.taints
    assert node.status is not None and node.status.allocatable is not None
    assert node.status.allocatable["nvidia.com/gpu"] == "4"


def test_pool_spec_merges_labels() -> None:
    spec = pool_spec("p", gpus=4, labels={"a": "b"})
    assert spec.labels == {POOL_LABEL: "p", "a": "b"}
    assert spec.gpus == 4
