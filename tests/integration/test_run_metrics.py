"""nvcre_job_status and nvcre_workflow_domain_nodes on the real manager's /metrics: a Workflow of
two groups, one per NVLink clique, whose first Job passes and second fails its threshold; each Job
reports its status, each clique its nodes by group phase, and both leave /metrics with the
Workflow. The test plays Kubeflow Trainer and the measurement controller."""

from __future__ import annotations

from typing import Any

from lightkube import Client
from prometheus_client.parser import text_string_to_metric_families

from nvcre import resources
from nvcre.testing.builders import pool_name, pool_spec
from nvcre.testing.inspect import jobs_of, wait_true
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.measured import BANDWIDTH, complete_bandwidth, finish
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import workflow

RUN_FAMILIES = ("nvcre_job_status", "nvcre_workflow_domain_nodes")


def series(manager: ManagerProcess, namespace: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The run gauges of ``namespace``: (metric, labels but namespace) -> value."""
    found = {}
    for family in text_string_to_metric_families(manager.metrics()):
        for sample in family.samples:
            if sample.name in RUN_FAMILIES and sample.labels.get("namespace") == namespace:
                labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "namespace"))
                found[(sample.name, labels)] = float(sample.value)
    return found


def test_job_status_and_domain_nodes(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess
) -> None:
    pool = pool_name()
    for clique in ("clique-a", "clique-b"):
        gpu_nodes(2, pool_spec(pool, product="NVIDIA-GB200", gpus=4, clique=clique))
    job_spec = {**BANDWIDTH, "thresholds": {"busBandwidthGBps": "value > 400"}}
    orchestration = {"isolation": "Off", "topology": {"topologyKey": "nvidia.com/gpu.clique"}}
    body = workflow("domains", namespace, pool, 2, job_spec=job_spec, orchestration=orchestration)
    kube.create(resources.Workflow.from_dict(body))
    jobs = ["domains-group-0-iter-1", "domains-group-1-iter-1"]
    wait_for(lambda: sorted(jobs_of(kube, namespace, "domains")) == jobs, 60, what="the Jobs of domains")
    for job, bus in zip(jobs, (["20.61", "487.70"], ["198.30"]), strict=True):
        finish(kube, namespace, job)
        complete_bandwidth(kube, namespace, job, bus)
    wf = wait_true(kube, resources.Workflow, "domains", namespace, "Failed")
    clique = {g["name"]: g["domains"] for g in wf["status"]["orchestration"]["groups"]}
    assert clique == {"group-0": ["clique-a"], "group-1": ["clique-b"]}

    def ones() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        found = {k: v for k, v in series(manager, namespace).items() if v}
        return found if len(found) == 4 else None

    assert wait_for(ones, 30, what="the run gauges") == {
        ("nvcre_job_status", (("job", jobs[0]), ("status", "succeeded"), ("workflow", "domains"))): 1.0,
        ("nvcre_job_status", (("job", jobs[1]), ("status", "failed"), ("workflow", "domains"))): 1.0,
        (
            "nvcre_workflow_domain_nodes",
            (("domain", "clique-a"), ("phase", "Succeeded"), ("workflow", "domains")),
        ): 2.0,
        (
            "nvcre_workflow_domain_nodes",
            (("domain", "clique-b"), ("phase", "Failed"), ("workflow", "domains")),
        ): 2.0,
    }
    assert len(series(manager, namespace)) == 2 * 4 + 2 * 4  # every status and phase, the rest 0

    kube.delete(resources.Workflow, "domains", namespace=namespace)
    wait_for(lambda: series(manager, namespace) == {}, 60, what="the run gauges to leave with the Workflow")
