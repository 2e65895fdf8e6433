"""Each node's NodeRecord on the real API server: written by the manager when a Workflow ends,
with each node's verdict, measured values and run reference; once per node per Workflow, however
often the Workflow is reconciled or the manager restarts; kept after the Workflow is deleted.

The test plays Kubeflow Trainer (it ends TrainJobs) and the measurement controller (it writes the
BandwidthMeasurement status nvcre created); the Workflow, Job and NodeRecord writers are real.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
)

from nvcre import resources
from nvcre.conditions import condition_of
from nvcre.naming import certification_workflow_name
from nvcre.testing.audit import by_manager
from nvcre.testing.builders import category, new_pool
from nvcre.testing.certifications import start_category
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import (
    failed_nodes_record,
    get,
    isolation_retests,
    jobs_of,
    kubectl_get,
    true_condition,
    wait_true,
)
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.measured import BANDWIDTH, complete_bandwidth, complete_retests, finish
from nvcre.testing.records import record, results_of, run_again, wait_results
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import workflow

THRESHOLD = {"busBandwidthGBps": "value > 400"}
MESSAGE = 'Threshold "busBandwidthGBps" violated: measured 198.3000, expression: value > 400'


def run_pairs(
    kube: Client, namespace: str, pool: str, name: str, bus: dict[int, list[str]]
) -> dict[str, Any]:
    """A Workflow of 2-node groups with a bus bandwidth threshold, each group's Job ended with the
    bandwidths ``bus[group]``; the ended Workflow."""
    job_spec = {**BANDWIDTH, "thresholds": THRESHOLD}
    body = workflow(name, namespace, pool, 2, job_spec=job_spec, orchestration={"isolation": "Off"})
    kube.create(resources.Workflow.from_dict(body))
    jobs = [f"{name}-group-{i}-iter-1" for i in sorted(bus)]
    wait_for(lambda: sorted(jobs_of(kube, namespace, name)) == jobs, 60, what=f"the Jobs of {name}")
    for i, job in enumerate(jobs):
        finish(kube, namespace, job)
        complete_bandwidth(kube, namespace, job, bus[i])
    return wait_true(
        kube, resources.Workflow, name, namespace, "Failed" if "198.3" in str(bus) else "Succeeded"
    )


def groups_of(wf: dict[str, Any]) -> dict[str, list[str]]:
    return {g["name"]: g["nodes"] for g in wf["status"]["orchestration"]["groups"]}


def status_writes(control_plane: ControlPlane, nodes: list[str], code: int = 200) -> Counter[str]:
    """The manager's status writes of the nodes' records answered ``code``, by record name."""
    counts: Counter[str] = Counter()
    for event in by_manager(control_plane.audit_events()):
        ref = event.get("objectRef") or {}
        status = ref.get("resource") == "noderecords" and ref.get("subresource") == "status"
        answered = (event.get("responseStatus") or {}).get("code") == code
        if status and answered and ref.get("name") in nodes and event.get("verb") == "update":
            counts[str(ref["name"])] += 1
    return counts


def test_an_ended_workflow_writes_each_nodes_record_once_and_a_second_run_appends(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess, control_plane: ControlPlane
) -> None:
    pool, nodes = new_pool(gpu_nodes, 4)
    wf = run_pairs(kube, namespace, pool, "rec", {0: ["20.61", "487.70"], 1: ["198.30"]})
    assert true_condition(wf)[:2] == ("Failed", "JobValidationFailed")
    groups = groups_of(wf)
    passed = groups["group-0"]
    records = wait_results(kube, nodes, 1)
    jobs = jobs_of(kube, namespace, "rec")
    end = next(c for c in wf["status"]["conditions"] if c["type"] == "Failed")["lastTransitionTime"]
    for node in nodes:
        group = "group-0" if node in passed else "group-1"
        job = jobs[f"rec-{group}-iter-1"]
        rec = records[node]
        assert rec["spec"] == {"nodeName": node}
        assert rec["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "nvcre"}
        assert "ownerReferences" not in rec["metadata"], "no owner: it outlives the run and the Node"
        [history] = rec["status"]["categories"]
        assert history["name"] == "workflow/rec"
        [result] = history["results"]
        expected = {
            "time": end,
            "workflow": {"namespace": namespace, "name": "rec", "uid": wf["metadata"]["uid"]},
            "job": {"namespace": namespace, "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]},
            "group": group,
            "groupSize": 2,
            "partners": [n for n in groups[group] if n != node],
            "thresholds": THRESHOLD,
        }
        if node in passed:
            expected.update(values={"algBandwidthGBps": 260.11, "busBandwidthGBps": 487.7}, verdict="Passed")
        else:
            expected.update(
                values={"algBandwidthGBps": 105.76, "busBandwidthGBps": 198.3},
                verdict="Failed",
                reason="ThresholdViolation",
                cause="ThresholdViolated",
                message=MESSAGE,
            )
        assert result == expected, node
    # What a person sees: kubectl get noderecords.
    table = kubectl_get(kube, resources.NodeRecord)
    for node in nodes:
        ok = node in passed
        assert table[node]["NODE"] == node
        assert (table[node]["LAST"], table[node]["BUSBW"], table[node]["FAILS-30D"]) == (
            ("Passed", 487.7, 0) if ok else ("Failed", 198.3, 1)
        )
        assert (table[node]["LAST-CERTIFIED"] is not None) == ok

    # Reconciled again after a restart (every ended Workflow is), nothing is written again.
    assert status_writes(control_plane, nodes) == dict.fromkeys(nodes, 1)
    versions = {n: record(kube, n)["metadata"]["resourceVersion"] for n in nodes}  # type: ignore[index]
    manager.kill()
    manager.start()

    # A second run of the same name (the first deleted: its records stay) appends its results.
    kube.delete(resources.Workflow, "rec", namespace=namespace)
    wait_for(
        lambda: "rec" not in {w.metadata.name for w in kube.list(resources.Workflow, namespace=namespace)},
        60,
        what="the first Workflow gone",
    )
    assert {n: record(kube, n)["metadata"]["resourceVersion"] for n in nodes} == versions  # type: ignore[index]
    second = run_pairs(kube, namespace, pool, "rec", {0: ["480.00"], 1: ["470.00"]})
    records = wait_results(kube, nodes, 2)
    for node in nodes:
        [history] = records[node]["status"]["categories"]
        first, last = history["results"]
        assert first["workflow"]["uid"] == wf["metadata"]["uid"]
        assert last["workflow"]["uid"] == second["metadata"]["uid"] != wf["metadata"]["uid"]
        assert last["verdict"] == "Passed"
        summary = records[node]["status"]["summary"]
        assert summary["lastVerdict"] == "Passed"
        assert summary["lastPassTime"] == last["time"]
        assert summary["consecutiveFailures"] == 0
        assert summary["failuresLast30Days"] == (0 if node in passed else 1)
    assert status_writes(control_plane, nodes) == dict.fromkeys(nodes, 2)


POLICY = "nvcre-test-deny-noderecord-status"


def deny_status_writes(kube: Client, node: str) -> None:
    """Refuse every status write of ``node``'s record (a write that fails, as a crash would stop it)."""
    kube.create(
        ValidatingAdmissionPolicy.from_dict(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": POLICY},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": ["nvcre.nvidia.com"],
                                "apiVersions": ["*"],
                                "operations": ["UPDATE"],
                                "resources": ["noderecords/status"],
                            }
                        ]
                    },
                    "validations": [
                        {
                            "expression": f"object.metadata.name != '{node}'",
                            "reason": "Invalid",
                            "message": "denied by test",
                        }
                    ],
                },
            }
        )
    )
    kube.create(
        ValidatingAdmissionPolicyBinding.from_dict(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": POLICY},
                "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
            }
        )
    )


def allow_status_writes(kube: Client) -> None:
    for resource in (ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicy):
        with contextlib.suppress(ApiError):
            kube.delete(resource, POLICY)


def test_a_writer_stopped_between_two_nodes_records_each_result_once_after_restart(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess, control_plane: ControlPlane
) -> None:
    """The second node's status write fails (refused at admission) after the first node's
    succeeded; the manager is killed there and started again once writes are allowed: each node's
    record holds the Workflow's result exactly once, and the first node's is not written again."""
    pool, nodes = new_pool(gpu_nodes, 2)
    first, second = sorted(nodes)
    deny_status_writes(kube, second)
    try:
        # The policy takes effect once the API server has loaded it: a probe write must fail.
        probe = f"{second}"
        kube.create(
            resources.NodeRecord.from_dict({"metadata": {"name": probe}, "spec": {"nodeName": probe}})
        )

        def refused() -> bool:
            live = kube.get(resources.NodeRecord, probe).to_dict()
            live["status"] = {}
            try:
                kube.replace(resources.NodeRecord.Status.from_dict(live), probe)
            except ApiError as error:
                return error.status.code == 422
            return False

        wait_for(refused, 30, what="the admission policy in force")
        job_spec = {**BANDWIDTH, "thresholds": THRESHOLD}
        kube.create(resources.Workflow.from_dict(workflow("crash", namespace, pool, 2, job_spec=job_spec)))
        wait_for(lambda: "crash-job" in jobs_of(kube, namespace, "crash"), 60, what="the Job")
        finish(kube, namespace, "crash-job")
        complete_bandwidth(kube, namespace, "crash-job", ["450.00"])
        wait_true(kube, resources.Workflow, "crash", namespace, "Succeeded")
        wait_for(lambda: len(results_of(kube, first)) == 1, 60, what="the first node's record")
        wait_for(
            lambda: status_writes(control_plane, [second], 422)[second] > 0,
            30,
            what="the second node's status write refused",
        )
        assert results_of(kube, second) == []
        written = record(kube, first)["metadata"]["resourceVersion"]  # type: ignore[index]
        manager.kill()
    finally:
        allow_status_writes(kube)
    manager.start()
    records = wait_results(kube, nodes, 1)
    wf = get(kube, resources.Workflow, "crash", namespace)
    for node in nodes:
        [result] = results_of(kube, node)
        assert (result["workflow"]["uid"], result["verdict"], result["values"]["busBandwidthGBps"]) == (
            wf["metadata"]["uid"],
            "Passed",
            450.0,
        )
    assert records[first]["metadata"]["resourceVersion"] == written
    writes = status_writes(control_plane, nodes)
    assert writes[first] == 1, writes


def test_a_certifications_category_records_its_run_and_category(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess
) -> None:
    """A Certification's result is filed under the catalog's domain/variant, with the
    Certification as its run; the failed-nodes reason and nvcre's cause come along."""
    pool, nodes = new_pool(gpu_nodes, 2, platform="aws", product="NVIDIA-H100-80GB-HBM3")
    all_reduce = category("communication", "nccl-all-reduce", thresholds={"busBandwidthGBps": "value >= 400"})
    job = start_category(kube, namespace, "reccert", pool, all_reduce)
    wf_name = certification_workflow_name("reccert", "communication", "nccl-all-reduce")
    finish(kube, namespace, job)
    complete_bandwidth(kube, namespace, job, ["20.61", "489.40"])  # no transport named: it fails
    cert_obj = wait_true(kube, resources.Certification, "reccert", namespace, "Failed", timeout=120)
    records = wait_results(kube, nodes, 1)
    for node in nodes:
        [history] = records[node]["status"]["categories"]
        assert history["name"] == "communication/nccl-all-reduce"
        [result] = history["results"]
        assert result["run"] == {
            "kind": "Certification",
            "namespace": namespace,
            "name": "reccert",
            "uid": cert_obj["metadata"]["uid"],
        }
        assert result["workflow"]["name"] == wf_name
        assert (result["verdict"], result["reason"], result["cause"]) == (
            "Failed",
            "ThresholdViolation",
            "UnexpectedTransport",
        )
        assert result["values"]["busBandwidthGBps"] == 489.4
        assert result["thresholds"] == {"busBandwidthGBps": "value >= 400"}
        assert records[node]["status"]["summary"]["lastCategory"] == "communication/nccl-all-reduce"


def test_a_node_below_its_own_baseline_regresses_and_isolation_names_it_alone(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess
) -> None:
    """Two passing runs make each node's baseline (``baselineResults: 2``); in the third, one pair
    measures 400 GB/s, above any floor but 18 % below its members' baseline of 486 GB/s: both
    members regressed, and their re-tests with healthy partners name the slow one alone. Its
    record's third result says so; its partner's is a pass."""
    pool, nodes = new_pool(gpu_nodes, 4)
    validation = {"performance": {"enabled": True, "baselineResults": 2}}
    body = workflow("reg", namespace, pool, 2, job_spec=BANDWIDTH, validation=validation)
    for run, bus in enumerate(([480.0, 487.0], [478.0, 485.0])):
        run_again(kube, namespace, body)
        wait_for(lambda: len(jobs_of(kube, namespace, "reg")) == 2, 60, what="two Jobs")
        for i, value in enumerate(bus):
            finish(kube, namespace, f"reg-group-{i}-iter-1")
            complete_bandwidth(kube, namespace, f"reg-group-{i}-iter-1", ["1.20", f"{value:.2f}"])
        wait_true(kube, resources.Workflow, "reg", namespace, "Succeeded", timeout=60)
        wait_results(kube, nodes, run + 1)

    run_again(kube, namespace, body)
    wait_for(lambda: len(jobs_of(kube, namespace, "reg")) == 2, 60, what="two Jobs")
    groups = groups_of(get(kube, resources.Workflow, "reg", namespace))
    for i, value in enumerate((480.0, 400.0)):
        finish(kube, namespace, f"reg-group-{i}-iter-1")
        complete_bandwidth(kube, namespace, f"reg-group-{i}-iter-1", ["1.20", f"{value:.2f}"])

    def regressed_job() -> dict[str, Any] | None:
        found = condition_of(get(kube, resources.Job, "reg-group-1-iter-1", namespace), "ValidationFailed")
        return found if found and found["reason"] == "Regression" else None

    regressed = wait_for(regressed_job, 60, what="the slow pair's regression")
    why = "busbw 400 GB/s, 18 % below this node's baseline 486 GB/s (2 runs)"
    slow, partner = groups["group-1"]
    assert (regressed["status"], regressed["reason"], regressed["message"]) == (
        "True",
        "Regression",
        f"{slow}: {why}; {partner}: {why}",
    )

    retests = isolation_retests(kube, namespace, "reg")
    assert sorted(retests) == sorted(groups["group-1"]), "both members regressed: both are suspects"
    complete_retests(kube, namespace, "reg", retests, {slow: "401.00", partner: "484.00"})
    wf = wait_true(kube, resources.Workflow, "reg", namespace, "Failed", timeout=60)
    retest_job = f"reg-{retests[slow]['name']}-iter-1"
    (reference,) = [n for n in retests[slow]["nodes"] if n != slow]
    again = "busbw 401 GB/s, 17 % below this node's baseline 486 GB/s (2 runs)"
    [entry] = failed_nodes_record(kube, namespace, wf["status"]["failedNodesRef"]["name"])
    assert entry == {
        "name": slow,
        "reason": "ThresholdViolation",
        "cause": "Regression",
        "message": f'Job "{retest_job}" failed: {again} (re-tested with healthy partner {reference})',
    }

    records = wait_results(kube, nodes, 3)
    third = {n: records[n]["status"]["categories"][0]["results"][-1] for n in nodes}
    assert (third[slow]["verdict"], third[slow]["cause"], third[slow]["values"]["busBandwidthGBps"]) == (
        "Failed",
        "Regression",
        401.0,
    )
    assert [n for n in nodes if third[n]["verdict"] == "Passed"] == sorted(set(nodes) - {slow})
    summary = records[slow]["status"]["summary"]
    assert summary["busBandwidthVsBaseline"] == -17.5  # 401 / 486 - 1
    assert {"category": "workflow/reg", "key": "busBandwidthGBps", "value": 486.0, "results": 2}.items() <= {
        **summary["baselines"][0]
    }.items()
    table = kubectl_get(kube, resources.NodeRecord)
    assert (table[slow]["LAST"], table[slow]["VS-BASELINE"]) == ("Failed", -17.5)
