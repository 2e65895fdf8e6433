"""Workflow behaviours a user relies on (spec/controllers.md section 13), on the real API server.

TrainJobs are ended by hand where a test needs groups to end in an exact order (waves, overflow,
iterations) or a status nothing else writes (checkpoints); failures, retries, timeouts with pods,
unschedulable pods, node health and teardown with the garbage collector run on the sandbox
(tests/sandbox/test_behaviours.py).
"""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, Client
from lightkube.models.core_v1 import Taint
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

from nvcre import resources
from nvcre.testing.builders import job_overlay, new_pool, override, pool_nodes, runtime_overlay, runtime_patch
from nvcre.testing.history import Recorder
from nvcre.testing.inspect import (
    events_for,
    finish_job,
    get,
    group_phases,
    jobs_of,
    own_patch,
    trainjob_of,
    true_condition,
    wait_event,
    wait_true,
    workflow_status,
)
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import POOL_LABEL, finish_trainjob, pool_name, replace_status, workflow


def groups(kube: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    return list(
        wait_for(
            lambda: workflow_status(kube, namespace, name).get("orchestration", {}).get("groups"),
            30,
            what="groups",
        )
    )


def wait_phase(kube: Client, namespace: str, wf: str, group: str, phase: str) -> None:
    """Wait until the Workflow's status records ``group`` in ``phase``: the controller took it in."""
    wait_for(
        lambda: group_phases(get(kube, resources.Workflow, wf, namespace)).get(group) == phase,
        30,
        what=f"{wf} to record {group} {phase}",
    )


DONE = ("Succeeded", "Failed")


def test_overflow_group_waits_for_the_group_it_shares_a_node_with(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, history: Recorder
) -> None:
    pool, nodes = new_pool(gpu_nodes, 5)
    recording = history(resources.Workflow, "ovf", namespace)
    kube.create(resources.Workflow.from_dict(workflow("ovf", namespace, pool, 2)))
    found = groups(kube, namespace, "ovf")
    assert [(g["name"], g["nodes"], g.get("overflow", False)) for g in found] == [
        ("group-0", nodes[0:2], False),
        ("group-1", nodes[2:4], False),
        ("group-2-overflow", nodes[3:5], True),
    ]
    wait_for(
        lambda: sorted(jobs_of(kube, namespace, "ovf")) == ["ovf-group-0-iter-1", "ovf-group-1-iter-1"],
        30,
        what="the first wave",
    )
    finish_job(kube, namespace, "ovf-group-0-iter-1")
    wait_phase(kube, namespace, "ovf", "group-0", "Succeeded")
    assert "ovf-group-2-overflow-iter-1" not in jobs_of(kube, namespace, "ovf")
    finish_job(kube, namespace, "ovf-group-1-iter-1")
    wait_for(
        lambda: "ovf-group-2-overflow-iter-1" in jobs_of(kube, namespace, "ovf"),
        30,
        what="the overflow Job",
    )
    finish_job(kube, namespace, "ovf-group-2-overflow-iter-1")
    assert (
        true_condition(wait_true(kube, resources.Workflow, "ovf", namespace, "Succeeded"))[1]
        == "JobCompleted"
    )
    recorded = [group_phases(v) for v in recording.versions]
    assert {"group-0": "Succeeded", "group-1": "Running", "group-2-overflow": "Pending"} in recorded
    assert any(p.get("group-2-overflow") == "Running" for p in recorded)
    assert all(p["group-1"] in DONE for p in recorded if p.get("group-2-overflow", "Pending") != "Pending"), (
        "overflow shares a node with group-1: it never starts before group-1 ends"
    )


def test_max_concurrent_runs_waves(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, history: Recorder
) -> None:
    pool, _ = new_pool(gpu_nodes, 12)
    recording = history(resources.Workflow, "waves", namespace)
    kube.create(
        resources.Workflow.from_dict(
            workflow("waves", namespace, pool, 2, orchestration={"execution": {"maxConcurrent": 2}})
        )
    )
    wait_for(lambda: len(jobs_of(kube, namespace, "waves")) == 2, 30, what="the first wave of 2")
    assert sorted(jobs_of(kube, namespace, "waves")) == ["waves-group-0-iter-1", "waves-group-1-iter-1"]
    finish_job(kube, namespace, "waves-group-0-iter-1")
    wait_phase(kube, namespace, "waves", "group-0", "Succeeded")
    assert len(jobs_of(kube, namespace, "waves")) == 2
    finish_job(kube, namespace, "waves-group-1-iter-1")
    wait_for(lambda: len(jobs_of(kube, namespace, "waves")) == 4, 30, what="the second wave")
    assert {"waves-group-2-iter-1", "waves-group-3-iter-1"} <= set(jobs_of(kube, namespace, "waves"))
    wait_phase(kube, namespace, "waves", "group-3", "Running")
    recorded = [group_phases(v) for v in recording.versions]
    assert any(p.get("group-0") == "Succeeded" and p.get("group-1") == "Running" for p in recorded)
    assert max(list(p.values()).count("Running") for p in recorded) == 2, "at most maxConcurrent at once"
    for p in recorded:
        if any(p.get(g, "Pending") != "Pending" for g in ("group-2", "group-3")):
            assert p["group-0"] in DONE and p["group-1"] in DONE, (
                f"no sliding window: the next wave waits for the whole wave: {p}"
            )


def test_discovery_filters_and_exclusions(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    pool = pool_name()
    kept = pool_nodes(gpu_nodes, 2, pool, labels={"rack": "r1"})
    pool_nodes(gpu_nodes, 1, pool, labels={"rack": "r2"})
    cordoned = pool_nodes(gpu_nodes, 1, pool, labels={"rack": "r1"}, unschedulable=True)
    minority = pool_nodes(gpu_nodes, 1, pool, labels={"rack": "r1"}, product="NVIDIA-A100-SXM4-80GB")
    cpu_only = pool_nodes(gpu_nodes, 1, pool, labels={"rack": "r1", "nvidia.com/gpu.present": "false"})
    target = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
    kube.create(
        resources.Workflow.from_dict(
            workflow(
                "disc",
                namespace,
                pool,
                0,
                orchestration={"target": {"nodeSelector": {POOL_LABEL: pool}, **target}},
            )
        )
    )
    found = groups(kube, namespace, "disc")
    orchestration = workflow_status(kube, namespace, "disc")["orchestration"]
    assert found[0]["nodes"] == kept, f"cpu-only {cpu_only}, cordoned and minority nodes are not run"
    assert orchestration["detectedGPUArchitecture"] == "h100"
    assert orchestration["excludedNodes"] == cordoned + minority
    assert orchestration["exclusionReason"] == (
        f"1 node(s) matched the target but were unschedulable (cordoned): {cordoned[0]}. "
        "target set has more than one GPU architecture; certified h100 only"
    )
    wait_event(
        kube,
        namespace,
        "disc",
        "Workflow",
        (
            "Warning",
            "CordonedNodesExcluded",
            f"Excluded 1 cordoned node(s) from certification: {cordoned[0]}",
        ),
    )
    # The events of one decision go out one after the other once its status is written.
    wait_for(
        lambda: any(
            r == "HeterogeneousGPU" and t == "Warning" and minority[0] in m
            for t, r, m in events_for(kube, namespace, "disc")
        ),
        10,
        what="the HeterogeneousGPU warning naming the minority node",
    )


def test_node_names_intersect_the_selector(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, nodes = new_pool(gpu_nodes, 3)
    target = {"nodeSelector": {POOL_LABEL: pool}, "nodeNames": [nodes[0], nodes[2], "not-in-pool"]}
    kube.create(
        resources.Workflow.from_dict(workflow("names", namespace, pool, 0, orchestration={"target": target}))
    )
    assert groups(kube, namespace, "names")[0]["nodes"] == [nodes[0], nodes[2]]


def test_discovery_failures(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    kube.create(resources.Workflow.from_dict(workflow("none", namespace, pool_name(), 2)))
    assert true_condition(wait_true(kube, resources.Workflow, "none", namespace, "Failed")) == (
        "Failed",
        "NodeDiscoveryError",
        "No target nodes found matching orchestration target",
    )
    pool, _ = new_pool(gpu_nodes, 3)
    kube.create(resources.Workflow.from_dict(workflow("short", namespace, pool, 4)))
    assert true_condition(wait_true(kube, resources.Workflow, "short", namespace, "Failed")) == (
        "Failed",
        "PartitionError",
        "Not enough schedulable nodes: need 4, found 3",
    )
    assert not jobs_of(kube, namespace, "short")


def test_taint_selectors_become_tolerations_and_mpi_tolerates_everything(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 1, taints=[Taint(key="dedicated", value="burn-in", effect="NoSchedule")])
    target = {
        "nodeSelector": {POOL_LABEL: pool},
        "taintSelectors": [{"key": "dedicated", "value": "burn-in", "effect": "NoSchedule"}],
    }
    kube.create(
        resources.Workflow.from_dict(workflow("taint", namespace, pool, 1, orchestration={"target": target}))
    )
    pods = own_patch(trainjob_of(kube, namespace, "taint-job"))
    assert pods["node"]["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "burn-in", "effect": "NoSchedule"}
    ]

    mpi_pool = pool_name()
    pool_nodes(gpu_nodes, 1, mpi_pool)
    patches = [runtime_patch("nvcre.nvidia.com/catalog", {"name": "node"}, {"name": "launcher"})]
    doc = workflow("mpi", namespace, mpi_pool, 1)
    doc["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["runtimePatches"] = patches
    kube.create(resources.Workflow.from_dict(doc))
    pods = own_patch(trainjob_of(kube, namespace, "mpi-job"))
    assert pods["launcher"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert pods["node"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert pods["launcher"]["spec"]["affinity"] == pods["node"]["spec"]["affinity"], (
        "the launcher is pinned like workers"
    )


def test_dependencies_lifecycle(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    pool, _ = new_pool(gpu_nodes, 4)
    script = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "train-script"},
        "data": {"run.sh": "echo"},
    }
    wf = kube.create(
        resources.Workflow.from_dict(workflow("deps", namespace, pool, 2, dependencies=[script]))
    )
    uid = wf.metadata.uid
    wait_for(lambda: len(jobs_of(kube, namespace, "deps")) == 2, 30, what="two Jobs")
    shared = kube.get(ConfigMap, "train-script", namespace=namespace)
    assert [o.uid for o in shared.metadata.ownerReferences] == [uid]
    assert shared.metadata.labels["nvcre.nvidia.com/workflow"] == "deps"
    assert shared.metadata.annotations["nvcre.nvidia.com/workflow-uid"] == uid
    copies = {}
    for job_name, job in jobs_of(kube, namespace, "deps").items():
        runtime = job["spec"]["workload"]["trainJob"]["runtimeRef"]["name"]
        assert runtime.startswith("deps-rt-") and runtime.endswith(
            job["metadata"]["labels"]["nvcre.nvidia.com/group"] + "-iter-1"
        )
        copy = wait_for(
            lambda runtime=runtime: (
                (c := kube.get(resources.TrainingRuntime, runtime, namespace=namespace).to_dict())[
                    "metadata"
                ].get("ownerReferences")
                and c
            ),
            30,
            what=f"{runtime} owned by its Job",
            ignore=(ApiError,),  # created right after its Job: not there yet
        )
        assert copy["metadata"]["labels"]["nvcre.nvidia.com/workflow"] == "deps"
        assert copy["metadata"]["annotations"]["nvcre.nvidia.com/workflow-uid"] == uid
        assert [o["name"] for o in copy["metadata"]["ownerReferences"]] == [job_name]
        copies[job_name] = runtime
    refs = wait_for(
        lambda: len(r := workflow_status(kube, namespace, "deps").get("dependencyRefs") or []) == 3 and r,
        30,
        what="3 refs",
    )
    assert refs[0] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "train-script",
        "namespace": namespace,
        "scope": "workflow",
    }
    assert {r["scope"] for r in refs[1:]} == {"job"}
    finish_job(kube, namespace, "deps-group-0-iter-1")
    wait_for(
        lambda: (
            copies["deps-group-0-iter-1"]
            not in [r.metadata.name for r in kube.list(resources.TrainingRuntime, namespace=namespace)]
        ),
        30,
        what="the finished group's runtime copy to be deleted",
    )
    assert kube.get(ConfigMap, "train-script", namespace=namespace), (
        "workflow-scoped dependencies outlive groups"
    )
    finish_job(kube, namespace, "deps-group-1-iter-1")
    wait_true(kube, resources.Workflow, "deps", namespace, "Succeeded")
    assert kube.get(ConfigMap, "train-script", namespace=namespace), "and the Workflow's completion"


def test_ordered_teardown(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    script = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "data"}, "data": {"a": "b"}}
    kube.create(resources.Workflow.from_dict(workflow("bye", namespace, pool, 2, dependencies=[script])))
    trainjob_of(kube, namespace, "bye-job")
    kube.delete(resources.Workflow, "bye", namespace=namespace)
    wait_for(lambda: not jobs_of(kube, namespace, "bye") or None, 30, what="the Job to be deleted first")
    wait_for(
        lambda: not list(kube.list(resources.TrainJob, namespace=namespace)) or None,
        30,
        what="the TrainJob (Job finalizer)",
    )
    wait_for(
        lambda: (
            not list(kube.list(ConfigMap, namespace=namespace, labels={"nvcre.nvidia.com/workflow": "bye"}))
            or None
        ),
        30,
        what="dependencies",
    )
    wait_for(
        lambda: not list(kube.list(resources.Workflow, namespace=namespace)) or None,
        30,
        what="the Workflow to be released",
    )


def test_timeout_fails_the_job_and_is_never_retried(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    execution = {"timeoutPerJob": "3s", "retryFailedGroups": 2}
    kube.create(
        resources.Workflow.from_dict(
            workflow("slow", namespace, pool, 1, orchestration={"execution": execution})
        )
    )
    job = wait_for(
        lambda: (
            (get(kube, resources.Job, "slow-job", namespace).get("status") or {}).get("workloadStartTime")
            and get(kube, resources.Job, "slow-job", namespace)
        ),
        30,
        what="the workload seen running",
        ignore=(Exception,),
    )
    assert true_condition(job)[1] == "WorkloadRunning"
    job = wait_true(kube, resources.Job, "slow-job", namespace, "Failed", timeout=40)
    assert true_condition(job) == ("Failed", "JobTimedOut", "Job exceeded timeoutPerJob")
    wf = wait_true(kube, resources.Workflow, "slow", namespace, "Failed", timeout=40)
    assert true_condition(wf) == ("Failed", "IterationsFailed", "1 groups failed across 1 iterations")
    group = wf["status"]["orchestration"]["groups"][0]
    assert group["phase"] == "Failed" and not group.get("retries"), "a timed-out group is never retried"
    wait_event(kube, namespace, "slow-job", "Job", ("Warning", "JobTimedOut", "Job exceeded timeoutPerJob"))


def timed_out_beside(kube: Client, namespace: str, wf: str, held: str, running: str) -> dict[str, Any]:
    """Wait until group ``running`` (started after group ``held``) has timed out and the Workflow
    has recorded it; return the Job of ``held``. The pass that timed ``running`` out looked at
    ``held`` too, after any clock started with ``held`` would have run out: a later state that
    proves ``held`` never had one."""
    job = wait_true(kube, resources.Job, f"{wf}-{running}-iter-1", namespace, "Failed", timeout=40)
    assert true_condition(job) == ("Failed", "JobTimedOut", "Job exceeded timeoutPerJob")
    wait_phase(kube, namespace, wf, running, "Failed")
    return get(kube, resources.Job, f"{wf}-{held}-iter-1", namespace)


def test_a_suspended_workload_never_times_out(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 2)
    doc = workflow("queued", namespace, pool, 1, orchestration={"execution": {"timeoutPerJob": "3s"}})
    doc["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["suspend"] = True
    kube.create(resources.Workflow.from_dict(doc))
    held, admitted = "queued-group-0-iter-1", "queued-group-1-iter-1"
    for name in (held, admitted):
        wait_for(
            lambda name=name: (
                (true_condition(get(kube, resources.Job, name, namespace)) or ("", ""))[1]
                == "WorkloadPending"
            ),
            30,
            what=f"{name} WorkloadPending",
            ignore=(Exception,),
        )
    # A queue admits one of the two workloads: its clock starts and runs out.
    kube.patch(
        resources.TrainJob,
        f"{admitted}-workload",
        {"spec": {"suspend": False}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    job = timed_out_beside(kube, namespace, "queued", "group-0", "group-1")
    assert "workloadStartTime" not in job["status"]
    assert true_condition(job)[:2] == ("InProgress", "WorkloadPending"), (
        "a suspended workload never times out"
    )
    wf = get(kube, resources.Workflow, "queued", namespace)
    assert true_condition(wf)[0] == "InProgress" and group_phases(wf)["group-0"] == "Running"


def test_iterations_keep_history(kube: Client, namespace: str, gpu_nodes: Any, manager: Any) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    kube.create(
        resources.Workflow.from_dict(workflow("iter", namespace, pool, 1, orchestration={"iterations": 2}))
    )
    finish_job(kube, namespace, "iter-group-0-iter-1")
    wait_for(lambda: "iter-group-0-iter-2" in jobs_of(kube, namespace, "iter"), 30, what="iteration 2")
    finish_job(kube, namespace, "iter-group-0-iter-2")
    wf = wait_true(kube, resources.Workflow, "iter", namespace, "Succeeded")
    assert true_condition(wf)[2] == "All 2 iterations completed successfully"
    history = wf["status"]["orchestration"]["iterationHistory"]
    assert [(h["iteration"], h["groups"][0]["phase"], h["groups"][0]["jobName"]) for h in history] == [
        (1, "Succeeded", "iter-group-0-iter-1")
    ]
    assert sorted(jobs_of(kube, namespace, "iter")) == ["iter-group-0-iter-2"], (
        "earlier iterations' Jobs are deleted"
    )


def test_platform_override_applies_and_is_recorded(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 1, platform="aws")
    overrides = [
        override(
            {"platform": {"equals": "gcp"}},
            job_template={"spec": {"workload": {"trainJob": {"trainer": {"args": ["gcp"]}}}}},
        ),
        override(
            {"platform": {"equals": "aws"}},
            job_template={"spec": {"workload": {"trainJob": {"trainer": {"args": ["aws"]}}}}},
        ),
        override(
            dependencies=[
                runtime_overlay(
                    "ovr-rt",
                    job_overlay(
                        "node", containers=[{"name": "node", "securityContext": {"privileged": True}}]
                    ),
                )
            ]
        ),
    ]
    kube.create(resources.Workflow.from_dict(workflow("ovr", namespace, pool, 1, overrides=overrides)))
    trainjob = trainjob_of(kube, namespace, "ovr-job")
    assert trainjob["spec"]["trainer"]["args"] == ["aws"]
    applied = workflow_status(kube, namespace, "ovr")["orchestration"]["appliedOverrides"]
    assert [a["index"] for a in applied] == [1, 2]
    runtime = kube.get(
        resources.TrainingRuntime, trainjob["spec"]["runtimeRef"]["name"], namespace=namespace
    ).to_dict()
    container = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]["containers"][0]
    assert container == {"name": "node", "image": "img", "securityContext": {"privileged": True}}, (
        "merged by name, not appended"
    )
    reasons = [(t, r) for t, r, _ in events_for(kube, namespace, "ovr")]
    assert reasons.count(("Normal", "OverrideApplied")) == 2


def test_checkpointed_workload_restarts_until_its_restarts_run_out(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    # Kept here: tests/sandbox/test_goodput.py shows one restart from a real checkpoint; this
    # walks every restart until maxRestarts runs out, writing the checkpoint step and playing Trainer.
    pool, _ = new_pool(gpu_nodes, 1)
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    job_spec = {
        "checkpoint": {"pvcName": "ckpt", "maxRestarts": 1},
        "goodputMeasurement": {"logProfileRef": "megatron-training", "sampleInterval": "5s"},
    }
    kube.create(
        resources.Workflow.from_dict(
            workflow("ckpt", namespace, pool, 1, dependencies=[pvc], job_spec=job_spec)
        )
    )
    first = trainjob_of(kube, namespace, "ckpt-job")
    goodput = wait_for(
        lambda: get(kube, resources.GoodputMeasurement, "ckpt-job-goodput", namespace),
        30,
        what="the GoodputMeasurement",
        ignore=(Exception,),
    )
    assert goodput["spec"]["jobRef"] == {"apiGroup": "nvcre.nvidia.com", "kind": "Job", "name": "ckpt-job"}
    assert goodput["metadata"]["ownerReferences"][0]["kind"] == "Workflow", (
        "measurements outlive iteration Jobs"
    )

    def checkpointed() -> bool:  # its real controller writes too: a 409 means read again
        live = get(kube, resources.GoodputMeasurement, "ckpt-job-goodput", namespace)
        live["status"] = {"lastCheckpointStep": 100, "lastStepTimestamp": "2026-01-01T00:00:00Z"}
        return replace_status(kube, resources.GoodputMeasurement, live)

    wait_for(checkpointed, 30, what="the checkpoint step written")
    finish_trainjob(kube, namespace, "ckpt-job-workload", succeeded=False)
    job = wait_for(
        lambda: (
            (j := get(kube, resources.Job, "ckpt-job", namespace))["status"].get("restartCount") == 1 and j
        ),
        30,
        what="restartCount 1",
    )
    assert job["status"]["restartCount"] == 1
    restarted = ("Normal", "WorkloadRestarting", "Restarting workload from checkpoint (restart 1/1)")
    wait_for(
        lambda: restarted in events_for(kube, namespace, "ckpt-job"), 10, what="the WorkloadRestarting event"
    )
    second = wait_for(
        lambda: (
            (t := get(kube, resources.TrainJob, "ckpt-job-workload", namespace))["metadata"]["uid"]
            != first["metadata"]["uid"]
            and t
        ),
        30,
        what="a fresh workload",
        ignore=(Exception,),
    )
    assert (
        "lastStepTimestamp"
        not in get(kube, resources.GoodputMeasurement, "ckpt-job-goodput", namespace)["status"]
    )
    finish_trainjob(kube, namespace, second["metadata"]["name"], succeeded=False)
    job = wait_true(kube, resources.Job, "ckpt-job", namespace, "Failed")
    assert true_condition(job)[1] == "WorkloadFailed" and job["status"]["restartCount"] == 1


def test_checkpoint_without_its_pvc_fails_before_anything_runs(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    pool, _ = new_pool(gpu_nodes, 1)
    kube.create(
        resources.Workflow.from_dict(
            workflow("nopvc", namespace, pool, 1, job_spec={"checkpoint": {"pvcName": "ckpt"}})
        )
    )
    wf = wait_true(kube, resources.Workflow, "nopvc", namespace, "Failed")
    assert true_condition(wf)[1:] == (
        "CheckpointPVCMissing",
        'Checkpoint requires PVC "ckpt" in dependencies',
    )
    assert not jobs_of(kube, namespace, "nopvc")
