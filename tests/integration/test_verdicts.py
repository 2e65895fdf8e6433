"""Verdicts on the real API server: thresholds judged by the Job controller, outliers against the
fleet judged by the Workflow controller, and their propagation to the failed-nodes ConfigMap.

The test plays Kubeflow Trainer (it ends TrainJobs) and the measurement controllers (it writes
the BandwidthMeasurement status nvcre created, through the status subresource, as that
controller does when it completes); the Workflow and Job controllers are real.
"""

from __future__ import annotations

from typing import Any

from lightkube import Client

from nvcre import resources
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import category, new_pool, pool_nodes, pool_spec
from nvcre.testing.certifications import start_category
from nvcre.testing.inspect import (
    config_map_payload,
    failed_nodes_record,
    get,
    isolation_retests,
    jobs_of,
    trainjob_of,
    true_condition,
    wait_true,
)
from nvcre.testing.measured import (
    BANDWIDTH,
    complete_bandwidth,
    complete_goodput,
    complete_retests,
    finish,
    made_for,
)
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import finish_trainjob, pool_name, workflow


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == type_), None)


def judged(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    """The Job once it has a ``ValidationFailed`` condition."""

    def check() -> dict[str, Any] | None:
        job = get(kube, resources.Job, name, namespace)
        return job if condition(job, "ValidationFailed") else None

    return dict(wait_for(check, 30, what=f"the verdict of Job {name}"))


def failed_entries(kube: Client, namespace: str, wf: dict[str, Any]) -> list[dict[str, str]]:
    ref = wf["status"]["failedNodesRef"]["name"]
    return failed_nodes_record(kube, namespace, ref)


def test_a_violated_threshold_fails_the_succeeded_job_its_group_and_the_workflow(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Acceptance case 6 with ``value > 487.7``: the Job succeeded, its verdict fails it. The
    Workflow can only end Failed if it kept the group Running until that verdict existed: a
    terminal Workflow never changes again."""
    pool = pool_name()
    [node] = pool_nodes(gpu_nodes, 1, pool)
    job_spec = {**BANDWIDTH, "thresholds": {"busBandwidthGBps": "value > 487.7"}}
    kube.create(resources.Workflow.from_dict(workflow("strict", namespace, pool, 1, job_spec=job_spec)))
    finish(kube, namespace, "strict-job")
    job = wait_true(kube, resources.Job, "strict-job", namespace, "Succeeded")
    assert condition(job, "ValidationFailed") is None, "judged before its measurement was final"
    before = manager.metric("nvcre_validation_verdicts_total", reason="ThresholdViolated", failed="true") or 0
    complete_bandwidth(kube, namespace, "strict-job", ["20.61", "487.70", "456.47"])
    message = 'Threshold "busBandwidthGBps" violated: measured 487.7000, expression: value > 487.7'
    job = judged(kube, namespace, "strict-job")
    verdict = condition(job, "ValidationFailed") or {}
    assert (verdict["status"], verdict["reason"], verdict["message"]) == (
        "True",
        "ThresholdViolated",
        message,
    )
    assert true_condition(job) is not None and true_condition(job)[0] == "Succeeded"
    assert job["status"]["failedNodes"] == [
        {"name": node, "reason": "ThresholdViolation", "cause": "ThresholdViolated", "message": message}
    ]
    wf = wait_true(kube, resources.Workflow, "strict", namespace, "Failed")
    assert true_condition(wf)[:2] == ("Failed", "JobValidationFailed")
    assert (condition(wf, "ValidationFailed") or {}).get("reason") == "JobValidationFailed"
    assert [(e["name"], e["reason"], e["message"]) for e in failed_entries(kube, namespace, wf)] == [
        (node, "ThresholdViolation", message)
    ]
    after = manager.metric("nvcre_validation_verdicts_total", reason="ThresholdViolated", failed="true")
    assert after == before + 1


def test_a_met_threshold_passes_at_its_boundary(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    job_spec = {**BANDWIDTH, "thresholds": {"busBandwidthGBps": "value >= 487.7"}}
    kube.create(resources.Workflow.from_dict(workflow("boundary", namespace, pool, 1, job_spec=job_spec)))
    finish(kube, namespace, "boundary-job")
    wait_true(kube, resources.Job, "boundary-job", namespace, "Succeeded")
    complete_bandwidth(kube, namespace, "boundary-job", ["20.61", "487.70", "456.47"])
    wf = wait_true(kube, resources.Workflow, "boundary", namespace, "Succeeded")
    assert condition(wf, "ValidationFailed") is None
    verdict = condition(get(kube, resources.Job, "boundary-job", namespace), "ValidationFailed") or {}
    assert (verdict["status"], verdict["reason"], verdict["message"]) == (
        "False",
        "ThresholdsMet",
        "All performance thresholds satisfied",
    )


def test_with_no_thresholds_a_slow_group_fails_as_a_bandwidth_outlier(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Three one-node groups; the one at 30% of its peers fails, the others pass."""
    pool, nodes = new_pool(gpu_nodes, 3)
    kube.create(resources.Workflow.from_dict(workflow("fleet", namespace, pool, 1, job_spec=BANDWIDTH)))
    wait_for(lambda: len(jobs_of(kube, namespace, "fleet")) == 3, 30, what="three Jobs")
    jobs = jobs_of(kube, namespace, "fleet")
    by_node = {j["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"]: name for name, j in jobs.items()}
    slow_node = nodes[1]
    for node, bus in zip(nodes, (["480.00"], ["144.00"], ["470.00"]), strict=True):
        finish(kube, namespace, by_node[node])
        complete_bandwidth(kube, namespace, by_node[node], ["1.20", *bus])
    wf = wait_true(kube, resources.Workflow, "fleet", namespace, "Failed")
    assert true_condition(wf) == ("Failed", "JobValidationFailed", "1 groups failed across 1 iterations")
    message = "bus bandwidth 144.00 GB/s is below 0.9 of the median of its 2 peer groups (475.00 GB/s)"
    slow = get(kube, resources.Job, by_node[slow_node], namespace)
    verdict = condition(slow, "ValidationFailed") or {}
    assert (verdict["status"], verdict["reason"], verdict["message"]) == ("True", "BandwidthOutlier", message)
    assert slow["status"]["failedNodes"] == [
        {"name": slow_node, "reason": "ThresholdViolation", "cause": "BandwidthOutlier", "message": message}
    ]
    for node in (nodes[0], nodes[2]):
        healthy = condition(get(kube, resources.Job, by_node[node], namespace), "ValidationFailed") or {}
        assert (healthy["status"], healthy["reason"]) == ("False", "MeasurementsChecked")
    groups = {g["nodes"][0]: g["phase"] for g in wf["status"]["orchestration"]["groups"]}
    assert groups == {nodes[0]: "Succeeded", slow_node: "Failed", nodes[2]: "Succeeded"}
    assert [(e["name"], e["reason"], e["cause"]) for e in failed_entries(kube, namespace, wf)] == [
        (slow_node, "ThresholdViolation", "BandwidthOutlier")
    ]
    succeeded = config_map_payload(
        kube, namespace, wf["status"]["succeededNodesRef"]["name"], "succeeded-nodes.csv.gz"
    )
    assert succeeded.decode().split(",") == [nodes[0], nodes[2]]


def test_an_outlier_pair_is_isolated_and_only_its_slow_node_stays_an_outlier(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Three pairs, one at 30 % of the others: an outlier, so both its members are re-tested with
    a node of a passing pair, and each re-test is judged against the iteration's pairs and the
    other re-test. The slow node's re-test is an outlier again; its partner's is not: it is
    cleared, and the slow node is the only one named, with its re-test's value and partner."""
    pool, nodes = new_pool(gpu_nodes, 6)
    kube.create(resources.Workflow.from_dict(workflow("outl", namespace, pool, 2, job_spec=BANDWIDTH)))
    wait_for(lambda: len(jobs_of(kube, namespace, "outl")) == 3, 60, what="three Jobs")
    groups = get(kube, resources.Workflow, "outl", namespace)["status"]["orchestration"]["groups"]
    job_of = {tuple(g["nodes"]): f"outl-{g['name']}-iter-1" for g in groups}
    slow_pair = tuple(nodes[4:])
    for pair, bus in ((tuple(nodes[:2]), "480.00"), (tuple(nodes[2:4]), "470.00"), (slow_pair, "144.00")):
        finish(kube, namespace, job_of[pair])
        complete_bandwidth(kube, namespace, job_of[pair], ["1.20", bus])

    retests = isolation_retests(kube, namespace, "outl")
    assert sorted(retests) == list(slow_pair), "both members of the outlier pair are suspects"
    slow, partner = slow_pair  # nodes[4] is the slow one
    complete_retests(kube, namespace, "outl", retests, {slow: "150.00", partner: "475.00"})

    wf = wait_true(kube, resources.Workflow, "outl", namespace, "Failed", timeout=60)
    isolation = wf["status"]["orchestration"]["isolation"]
    assert (isolation["failedNodes"], isolation["clearedNodes"]) == ([slow], [partner])
    # its peers: the other re-test (475) and the iteration's three pairs (480, 470, 144)
    again = "bus bandwidth 150.00 GB/s is below 0.9 of the median of its 4 peer groups (472.50 GB/s)"
    retest_job = f"outl-{retests[slow]['name']}-iter-1"
    verdict = condition(get(kube, resources.Job, retest_job, namespace), "ValidationFailed") or {}
    assert (verdict["status"], verdict["reason"], verdict["message"]) == ("True", "BandwidthOutlier", again)
    cleared_job = f"outl-{retests[partner]['name']}-iter-1"
    cleared = condition(get(kube, resources.Job, cleared_job, namespace), "ValidationFailed") or {}
    assert (cleared["status"], cleared["reason"]) == ("False", "MeasurementsChecked")
    (reference,) = [n for n in retests[slow]["nodes"] if n != slow]
    assert [
        (e["name"], e["reason"], e["cause"], e["message"]) for e in failed_entries(kube, namespace, wf)
    ] == [
        (
            slow,
            "ThresholdViolation",
            "BandwidthOutlier",
            f'Job "{retest_job}" failed: {again} (re-tested with healthy partner {reference})',
        )
    ]


def test_outlier_fraction_zero_turns_the_rule_off(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 3)
    spec = workflow("lenient", namespace, pool, 1, job_spec=BANDWIDTH)
    spec["spec"]["validation"] = {"performance": {"outlierFraction": 0}}
    kube.create(resources.Workflow.from_dict(spec))
    wait_for(lambda: len(jobs_of(kube, namespace, "lenient")) == 3, 30, what="three Jobs")
    for name, bus in zip(
        sorted(jobs_of(kube, namespace, "lenient")), ("480.00", "144.00", "470.00"), strict=True
    ):
        finish(kube, namespace, name)
        complete_bandwidth(kube, namespace, name, [bus])
    wait_true(kube, resources.Workflow, "lenient", namespace, "Succeeded")


def test_a_retried_group_is_judged_on_its_own_measurement(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """The retry reuses the Job's name; the first attempt's measurement (same name, owned by the
    Workflow) is replaced by one for the new Job, which its verdict reads."""
    pool, _ = new_pool(gpu_nodes, 1)
    job_spec = {
        **BANDWIDTH,
        "goodputMeasurement": {"logProfileRef": "megatron-training"},
        "thresholds": {"busBandwidthGBps": "value >= 400"},
    }
    spec = workflow(
        "again", namespace, pool, 1, job_spec=job_spec, orchestration={"execution": {"retryFailedGroups": 1}}
    )
    kube.create(resources.Workflow.from_dict(spec))
    first = trainjob_of(kube, namespace, "again-job")
    first_uid = get(kube, resources.Job, "again-job", namespace)["metadata"]["uid"]
    wait_for(
        lambda: get(kube, resources.BandwidthMeasurement, "again-job-bandwidth", namespace),
        30,
        what="the first attempt's measurement",
        ignore=(Exception,),
    )
    finish_trainjob(kube, namespace, first["metadata"]["name"], succeeded=False)

    def second_attempt() -> dict[str, Any] | None:
        job = get(kube, resources.Job, "again-job", namespace)
        return job if job["metadata"]["uid"] != first_uid else None

    wait_for(second_attempt, 60, what="the retried Job", ignore=(Exception,))
    # The measurements are final before the Job ends: the goodput controller would otherwise end
    # its measurement NoDataCollected (no log in this plane) as soon as the Job succeeds.
    complete_goodput(kube, namespace, "again-job", "2.000000")
    complete_bandwidth(kube, namespace, "again-job", ["20.61", "487.70"])
    finish(kube, namespace, "again-job")
    wait_true(kube, resources.Workflow, "again", namespace, "Succeeded")
    verdict = condition(get(kube, resources.Job, "again-job", namespace), "ValidationFailed") or {}
    assert (verdict["status"], verdict["reason"]) == ("False", "ThresholdsMet")


def test_an_aws_category_without_efa_fails_the_certification_as_validation(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """The catalog's AWS EFA entry expects `AWS Libfabric`; a final measurement that names no
    transport fails the Job (before its met threshold is even looked at), its Workflow and the
    Certification, with ValidationFailed at every tier."""
    pool, nodes = new_pool(gpu_nodes, 2, platform="aws", product="NVIDIA-H100-80GB-HBM3")
    all_reduce = category("communication", "nccl-all-reduce", thresholds={"busBandwidthGBps": "value >= 400"})
    job = start_category(kube, namespace, "slowcert", pool, all_reduce)
    wf_name = certification_workflow_name("slowcert", "communication", "nccl-all-reduce")
    job_spec = get(kube, resources.Job, job, namespace)["spec"]
    assert job_spec["bandwidthMeasurement"]["expectedTransport"] == "AWS Libfabric", (
        "the catalog's AWS EFA entry"
    )
    finish(kube, namespace, job)
    bm = made_for(kube, namespace, resources.BandwidthMeasurement, f"{job}-bandwidth", job)
    assert bm["spec"]["expectedTransport"] == "AWS Libfabric", "copied into the measurement's spec"
    complete_bandwidth(kube, namespace, job, ["20.61", "489.40"])
    cert = wait_true(kube, resources.Certification, "slowcert", namespace, "Failed", timeout=120)
    assert true_condition(cert) == (
        "Failed",
        "WorkflowValidationFailed",
        "One or more certification categories failed",
    )
    validation = condition(cert, "ValidationFailed") or {}
    assert (validation["status"], validation["reason"], validation["message"]) == (
        "True",
        "WorkflowValidationFailed",
        "Category communication/nccl-all-reduce: One or more Jobs failed performance threshold validation",
    )
    entries = failed_entries(kube, namespace, get(kube, resources.Workflow, wf_name, namespace))
    message = "NCCL used no network transport (is NCCL_DEBUG=INFO set?), expected [AWS Libfabric]"
    verdict = condition(get(kube, resources.Job, job, namespace), "ValidationFailed") or {}
    assert (verdict["status"], verdict["reason"], verdict["message"]) == (
        "True",
        "UnexpectedTransport",
        message,
    )
    assert [(e["name"], e["reason"], e["message"]) for e in entries] == [
        (n, "ThresholdViolation", message) for n in nodes
    ]


def test_a_slow_training_group_fails_as_a_step_time_outlier(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, nodes = new_pool(gpu_nodes, 3)
    job_spec = {"goodputMeasurement": {"logProfileRef": "megatron-training"}}
    kube.create(resources.Workflow.from_dict(workflow("train", namespace, pool, 1, job_spec=job_spec)))
    wait_for(lambda: len(jobs_of(kube, namespace, "train")) == 3, 30, what="three Jobs")
    jobs = jobs_of(kube, namespace, "train")
    by_node = {j["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"]: name for name, j in jobs.items()}
    for node, seconds in zip(nodes, ("2.000000", "2.100000", "3.000000"), strict=True):
        complete_goodput(kube, namespace, by_node[node], seconds)  # final before the Job ends
        finish(kube, namespace, by_node[node])
    wf = wait_true(kube, resources.Workflow, "train", namespace, "Failed")
    assert true_condition(wf)[:2] == ("Failed", "JobValidationFailed")
    slow = get(kube, resources.Job, by_node[nodes[2]], namespace)
    verdict = condition(slow, "ValidationFailed") or {}
    assert (verdict["status"], verdict["reason"], verdict["message"]) == (
        "True",
        "StepTimeOutlier",
        "step time 3.0000 s is slower than the median of its 2 peer groups (2.0500 s) "
        "by more than the fraction 0.9 allows",
    )
    assert [(e["name"], e["reason"], e["cause"]) for e in failed_entries(kube, namespace, wf)] == [
        (nodes[2], "ThresholdViolation", "StepTimeOutlier")
    ]


def test_a_group_across_two_nvlink_cliques_is_never_an_outlier(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """14 GB200 nodes in NVLink cliques of 4, 4, 4 and 2: groups of 4 pack three groups inside a
    clique and one overflow group across two. Inside a clique all-reduce runs over multi-node
    NVLink; across two it crosses the network and rightly measures half as much. By size alone
    (the rule before) that group was an outlier; compared only with groups that span as many
    domains it is not, and the fleet passes."""
    pool = pool_name()
    for index, size in enumerate((4, 4, 4, 2)):
        gpu_nodes(size, pool_spec(pool, product="NVIDIA-GB200", gpus=4, clique=f"clique-{index}"))
    topology = {"topology": {"topologyKey": "nvidia.com/gpu.clique"}}
    kube.create(
        resources.Workflow.from_dict(
            workflow("cliques", namespace, pool, 4, job_spec=BANDWIDTH, orchestration=topology)
        )
    )
    measured: dict[str, float] = {}

    def play() -> dict[str, Any] | None:
        """End every Job that runs, at 830 GB/s inside a clique and 400 across two."""
        wf = get(kube, resources.Workflow, "cliques", namespace)
        groups = (wf.get("status") or {}).get("orchestration", {}).get("groups") or []
        for group in groups:
            job = (group.get("jobRef") or {}).get("name")
            if job and group["phase"] == "Running" and job not in measured:
                measured[job] = 830.0 if len(group.get("domains") or ()) == 1 else 400.0
                finish(kube, namespace, job)
                complete_bandwidth(kube, namespace, job, ["1.20", f"{measured[job]:.2f}"])
        found = true_condition(wf)
        return wf if found and found[0] in ("Succeeded", "Failed") else None

    wf = wait_for(play, 180, what="the Workflow to end, its Jobs ended as they launch")
    groups = wf["status"]["orchestration"]["groups"]
    assert sorted(len(g["domains"]) for g in groups) == [1, 1, 1, 2], groups
    assert sorted(measured.values()) == [400.0, 830.0, 830.0, 830.0]
    assert true_condition(wf) == ("Succeeded", "JobCompleted", "All 1 iterations completed successfully")
    for name in measured:
        verdict = condition(get(kube, resources.Job, name, namespace), "ValidationFailed") or {}
        assert (verdict.get("status"), verdict.get("reason")) == ("False", "MeasurementsChecked"), (
            name,
            verdict,
        )
    assert "failedNodesRef" not in wf["status"]
