"""Workflow behaviours end to end on the sandbox: the simulated accelerator decides how pods end.

One runner (``python -m nvcre.sandbox.runner``, the sandbox's own) for the module, against the
``full_cluster``. Its faults are fixed when it starts, so each behaviour has nodes of its own (a
pool label per behaviour) with the faults it needs. Every pod is created by Trainer, JobSet and
the Job controller from the TrainJob nvcre renders, bound by kube-scheduler and ended by the
runner with the exit code the simulation decides; the garbage collector removes what nvcre
deletes. Nothing here sets a TrainJob condition or a pod status, or builds a pod.

The workload is a single-node nccl-tests run per pod (``all_reduce_perf -g 8``) in a runtime
shaped as the catalog's DCGM bodies (``backoffLimit: 0``, ``restartPolicy: Never``), so a failed
pod fails its group at once; an MPI launcher under the Job controller's
default back-off takes minutes (that path is the sandbox CLI test's). Checkpoint restarts are not
here: a restart needs the GoodputMeasurement's ``lastCheckpointStep``, which nothing on the
sandbox writes yet (tests/integration/test_workflow_behaviours.py plays it).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import re
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job as BatchJob
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace, Node, Pod

from nvcre import resources
from nvcre.api.v1alpha1.constants import SUCCEEDED_NODES_KEY, Annotation
from nvcre.measure.builtin import builtin_profiles
from nvcre.orchestration.result_configmaps import decode_succeeded
from nvcre.sandbox.faults import HEALTH_CONDITION, parse_faults
from nvcre.sandbox.model import unit
from nvcre.sandbox.runner import initial_nodes
from nvcre.testing.cluster import Cluster, JobSet
from nvcre.testing.history import History, Recorder
from nvcre.testing.inspect import failed_nodes_record, get, jobs_of, true_condition, wait_true
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.nodes import platform_nodes
from nvcre.testing.processes import Process, wait_until
from nvcre.testing.waiting import WaitTimeout, wait_for
from nvcre.testing.workloads import POOL_LABEL

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
SEED = 6  # behaviour-004 (`flaky`) draws 0.20 then 0.98: a probability between fails once
#: A sweep that ends in about 2 s, and one that runs about 30 s (node faults strike half way).
SHORT = ["all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "8"]
LONG = ["all_reduce_perf", "-b", "8", "-e", "32G", "-f", "2", "-g", "8", "-n", "100"]
#: The node-health expression matching what `not-ready` and `xid` write (docs/sandbox.md).
HEALTH_EXPRESSION = (
    "node.status.conditions.exists(c, (c.type == 'Ready' && c.status != 'True')"
    f" || (c.type == '{HEALTH_CONDITION}' && c.status == 'False'))"
)
#: behaviour -> the faults of its nodes, in node order (``""``: healthy).
POOLS: dict[str, list[str]] = {
    "groups": ["", "", "nccl-error", ""],
    "retry": ["flaky"],
    "timeout": ["hang"],
    "blocked": ["missing-gpus:1", "hang", "hang"],
    "health": ["not-ready", "xid:79"],
    "teardown": ["hang"],
    "logs": ["truncate:64M", "no-log", "corrupt:1000", "tcp-fallback"],
    "stall": ["hang@10s"],
}


@dataclass
class Sandbox:
    kube: Client
    namespace: str
    pools: dict[str, list[str]]  #: behaviour -> its node names, in order
    suffix: str

    def pool(self, behaviour: str) -> str:
        return f"{behaviour}-{self.suffix}"


def _flaky_probability(node: str) -> float:
    """A probability that fails the node's first attempt and passes its second (same seed)."""
    first, second = (unit(SEED, "flaky", node, attempt) for attempt in (0, 1))
    assert first < second, f"pick another node name: {node} draws {first} then {second}"
    return (first + second) / 2


def _fault_specs(pools: dict[str, list[str]]) -> list[str]:
    specs = []
    for behaviour, names in pools.items():
        for name, kind in zip(names, POOLS[behaviour], strict=True):
            if kind == "flaky":
                specs.append(f"{name}=flaky:{_flaky_probability(name):.6f}")
            elif kind:
                specs.append(f"{name}={kind}")
    return specs


@pytest.fixture(scope="module")
def sandbox(
    full_cluster: Cluster, kube: Client, manager: ManagerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """The module's nodes (aws H100, a pool per behaviour, faults applied from creation) and the
    runner feeding their pods to the simulated accelerator."""
    suffix = secrets.token_hex(2)
    prefix = "behaviour"  # fixed names: the faults' draws (``flaky``) are the same on every run
    count = sum(len(kinds) for kinds in POOLS.values())
    nodes = platform_nodes(count, "aws", PRODUCT, prefix=prefix)
    names = iter(str(n.metadata.name) for n in nodes if n.metadata)
    pools = {behaviour: [next(names) for _ in kinds] for behaviour, kinds in POOLS.items()}
    faults = _fault_specs(pools)
    pool_of = {name: f"{b}-{suffix}" for b, members in pools.items() for name in members}
    for node in initial_nodes(nodes, parse_faults(faults)):
        assert node.metadata is not None and node.metadata.labels is not None
        node.metadata.labels[POOL_LABEL] = pool_of[str(node.metadata.name)]
        kube.create(node)
    workdir: Path = tmp_path_factory.mktemp("runner")
    cp = full_cluster.control_plane
    runner = Process(
        "runner",
        [
            sys.executable,
            "-m",
            "nvcre.sandbox.runner",
            f"--kubeconfig={cp.kubeconfig_path}",
            f"--logs-dir={full_cluster.kwok.logs_dir}",
            f"--ready-file={workdir / 'ready'}",
            f"--seed={SEED}",
            *(f"--fault={f}" for f in faults),
        ],
        workdir / "runner.log",
    ).start()
    namespace = f"behaviours-{suffix}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    try:
        wait_until((workdir / "ready").exists, timeout=60, what="the runner watching pods", process=runner)
        yield Sandbox(kube, namespace, pools, suffix)
    finally:
        runner.stop()
        with contextlib.suppress(ApiError):
            kube.delete(Namespace, namespace)
        for name in pool_of:
            with contextlib.suppress(ApiError):
                kube.delete(Node, name)


# ---------------------------------------------------------------------------------------------
# what a user writes


def runtime(name: str) -> dict[str, Any]:
    """A single-node nccl-tests runtime shaped as the catalog's DCGM bodies: any failure is final.
    It tolerates no taint: a new node's ``not-ready`` taint must have been lifted, as on a cluster."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": 1}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "nvcr.io/nvidia/pytorch:26.01-py3",
                                                    "resources": {
                                                        "requests": {"nvidia.com/gpu": "8"},
                                                        "limits": {"nvidia.com/gpu": "8"},
                                                    },
                                                }
                                            ],
                                        }
                                    },
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def workflow(
    box: Sandbox,
    name: str,
    behaviour: str,
    command: list[str],
    *,
    num_nodes: int = 1,
    execution: dict[str, Any] | None = None,
    job_spec: dict[str, Any] | None = None,
    nodes: list[str] | None = None,
    dependencies: list[dict[str, Any]] | None = None,
) -> str:
    """Create a Workflow running ``command`` in groups of ``num_nodes`` on ``behaviour``'s nodes
    (those of ``nodes`` only, if given)."""
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": box.namespace},
        "spec": {
            "jobTemplate": {
                "spec": {
                    "workload": {
                        "trainJob": {
                            "runtimeRef": {
                                "apiGroup": "trainer.kubeflow.org",
                                "kind": "TrainingRuntime",
                                "name": f"{name}-rt",
                            },
                            "trainer": {"command": command, "numNodes": num_nodes},
                        }
                    },
                    **(job_spec or {}),
                }
            },
            "orchestration": {
                "target": {
                    "nodeSelector": {POOL_LABEL: box.pool(behaviour)},
                    **({"nodeNames": nodes} if nodes else {}),
                },
                **({"execution": execution} if execution else {}),
            },
            "dependencies": [runtime(f"{name}-rt"), *(dependencies or ())],
        },
    }
    box.kube.create(resources.Workflow.from_dict(document))
    return name


# ---------------------------------------------------------------------------------------------
# what a user reads


def group_nodes(job: dict[str, Any]) -> list[str]:
    return str(job["metadata"]["annotations"][Annotation.GROUP_NODES]).split(",")


def node_lists(box: Sandbox, wf: dict[str, Any]) -> tuple[list[str], list[dict[str, str]]]:
    """The succeeded-nodes and failed-nodes ConfigMaps the Workflow's status points at."""
    status = wf["status"]

    def payload(ref: str, key: str) -> bytes | None:
        name = (status.get(ref) or {}).get("name")
        if not name:
            return None
        data = box.kube.get(ConfigMap, name, namespace=box.namespace).binaryData or {}
        return base64.b64decode(data[key])

    return (
        decode_succeeded(payload("succeededNodesRef", SUCCEEDED_NODES_KEY)),
        failed_nodes_record(box.kube, box.namespace, status["failedNodesRef"]["name"])
        if status.get("failedNodesRef")
        else [],
    )


def pods_of(box: Sandbox, trainjob: str) -> list[dict[str, Any]]:
    found = box.kube.list(Pod, namespace=box.namespace, labels={JOBSET_NAME: trainjob})
    return [p.to_dict() for p in found]


def running_pods(box: Sandbox, trainjob: str, count: int) -> list[dict[str, Any]]:
    def running() -> list[dict[str, Any]] | None:
        pods = pods_of(box, trainjob)
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        return pods if len(pods) == count and phases == ["Running"] * count else None

    return wait_for(running, 90, what=f"{count} pods of {trainjob} Running")


def gone(box: Sandbox, resource: Any, **labels: str) -> bool:
    return not list(box.kube.list(resource, namespace=box.namespace, labels=labels or None))


# ---------------------------------------------------------------------------------------------
# behaviours


def test_a_failing_node_fails_its_group_and_isolation_names_it_alone(sandbox: Sandbox) -> None:
    """The pair with the faulty node fails as a whole; each member is then re-tested with a node
    of the passing pair, and only the faulty node, failing again, is named."""
    box = sandbox
    healthy_pair, faulty_pair = box.pools["groups"][:2], box.pools["groups"][2:]
    faulty, partner = faulty_pair
    workflow(box, "pairs", "groups", SHORT, num_nodes=2)
    wf = wait_true(box.kube, resources.Workflow, "pairs", box.namespace, "Failed", timeout=300)
    outcome = "Isolation complete: 1 nodes failed again with healthy partners, 1 cleared"
    verdict = f"1 groups failed across 1 iterations; {outcome}"
    assert true_condition(wf) == ("Failed", "IterationsFailed", verdict)
    every = jobs_of(box.kube, box.namespace, "pairs")
    jobs = {tuple(sorted(group_nodes(j))): j for name, j in every.items() if "-group-" in name}
    assert sorted(jobs) == [tuple(healthy_pair), tuple(faulty_pair)], "pinned pairs of pool nodes"

    ok = jobs[tuple(healthy_pair)]
    ok_trainjob = f"{ok['metadata']['name']}-workload"
    assert true_condition(ok) == (
        "Succeeded",
        "WorkloadCompleted",
        f"Workload TrainJob/{ok_trainjob} completed: jobset completed successfully",
    ), "Trainer's verdict on the JobSet the pods completed"

    bad = jobs[tuple(faulty_pair)]
    trainjob = f"{bad['metadata']['name']}-workload"
    message = (
        f"Workload TrainJob/{trainjob} failed: jobset failed due to one or more job failures "
        f"(first failed job: {trainjob}-node-0)"
    )
    assert true_condition(bad) == ("Failed", "WorkloadFailed", message)
    assert bad["status"]["failedNodes"] == [
        {"name": n, "reason": "WorkloadFailed", "cause": "WorkloadFailed", "message": message}
        for n in faulty_pair
    ], "the group's own Job says what it saw: both of its nodes"
    log = bad["status"]["failureLog"]
    assert (log["nodeName"] in faulty_pair, log["exitCode"], log["reason"]) == (True, 3, "Error"), log
    tail = log["tail"]
    assert "# Collective test starting: all_reduce_perf" in tail, "the pod's nccl-tests log, read by nvcre"
    (host,) = re.findall(r"^(\S+): Test NCCL failure common\.cu:1204 'remote process exited", tail, re.M)
    assert host.startswith(trainjob) and host in hosts_on(box)[faulty], (
        "the NCCL error names the host of the faulty node's pod"
    )

    # The re-tests: each suspect with a node of the passing pair, run by the real chain.
    retests = {name: j for name, j in every.items() if "-isolate-" in name}
    seen: dict[str, str] = {}
    for job in retests.values():
        suspects = set(group_nodes(job)) & set(faulty_pair)
        assert len(suspects) == 1 and len(set(group_nodes(job)) & set(healthy_pair)) == 1, group_nodes(job)
        seen[suspects.pop()] = true_condition(job)[0]  # type: ignore[index]
    assert seen == {faulty: "Failed", partner: "Succeeded"}, "re-tested by the real chain"
    isolation = wf["status"]["orchestration"]["isolation"]
    assert (isolation["failedNodes"], isolation["clearedNodes"], isolation["message"]) == (
        [faulty],
        [partner],
        outcome,
    )
    succeeded, failed = node_lists(box, wf)
    assert sorted(succeeded) == sorted([*healthy_pair, partner]), "the partner passed with a healthy node"
    (entry,) = failed
    assert (entry["name"], entry["reason"], entry["cause"]) == (faulty, "WorkloadFailed", "WorkloadFailed")
    assert re.fullmatch(
        r'Job "pairs-isolate-\d-iter-1" failed: Workload TrainJob/pairs-isolate-\d-iter-1-workload failed: '
        r"jobset failed due to one or more job failures \(first failed job: \S+\) "
        rf"\(re-tested with healthy partner ({'|'.join(healthy_pair)})\)",
        entry["message"],
    ), entry["message"]
    wait_for(lambda: gone(box, Pod, **{JOBSET_NAME: trainjob}), 60, what="the failed group's pods collected")
    assert _gone_named(box, resources.TrainJob, trainjob), "nvcre deleted the failed TrainJob"
    assert get(box.kube, resources.Job, bad["metadata"]["name"], box.namespace), (
        "the Job stays for the report"
    )
    for event in (("Warning", "IsolationCompleted", outcome), ("Warning", "IterationsFailed", verdict)):
        wait_for(lambda e=event: e in events_for(box, "pairs", "Workflow"), 30, what=f"the event {event}")


def test_a_failed_group_is_retried_under_the_same_name_and_the_retry_decides(sandbox: Sandbox) -> None:
    box = sandbox
    (node,) = box.pools["retry"]
    workflow(box, "again", "retry", SHORT, execution={"retryFailedGroups": 1})
    wf = wait_true(box.kube, resources.Workflow, "again", box.namespace, "Succeeded", timeout=180)
    assert true_condition(wf) == ("Succeeded", "JobCompleted", "All 1 iterations completed successfully")
    (group,) = wf["status"]["orchestration"]["groups"]
    assert (group["phase"], group["retries"], group["nodes"]) == ("Succeeded", 1, [node])
    reasons = [r for _, r, _ in events_for(box, "again-job", "Job")]
    assert reasons.count("WorkloadFailed") == 1, f"the first attempt failed on its pod: {reasons}"
    job = get(box.kube, resources.Job, "again-job", box.namespace)
    assert true_condition(job)[:2] == ("Succeeded", "WorkloadCompleted")  # type: ignore[index]
    assert node_lists(box, wf) == ([node], []), "the attempt that ends the group decides"
    attempts = [p for p, n in scheduled(box).items() if n == node and p.startswith("again-job-workload-")]
    assert len(attempts) == 2, f"two attempts, each its own pod: {attempts}"


def test_a_workload_past_its_timeout_is_stopped_and_never_retried(sandbox: Sandbox) -> None:
    box = sandbox
    workflow(box, "slow", "timeout", SHORT, execution={"timeoutPerJob": "10s", "retryFailedGroups": 2})
    (pod,) = running_pods(box, "slow-job-workload", 1)
    job = get(box.kube, resources.Job, "slow-job", box.namespace)
    assert true_condition(job)[:2] == ("InProgress", "WorkloadRunning")  # type: ignore[index]
    assert job["status"]["workloadStartTime"]
    wf = wait_true(box.kube, resources.Workflow, "slow", box.namespace, "Failed", timeout=120)
    assert true_condition(wf) == ("Failed", "IterationsFailed", "1 groups failed across 1 iterations")
    (group,) = wf["status"]["orchestration"]["groups"]
    assert group["phase"] == "Failed" and not group.get("retries"), "a timed-out group is never retried"
    job = get(box.kube, resources.Job, "slow-job", box.namespace)
    assert true_condition(job) == ("Failed", "JobTimedOut", "Job exceeded timeoutPerJob")
    timed_out = ("Warning", "JobTimedOut", "Job exceeded timeoutPerJob")
    wait_for(lambda: timed_out in events_for(box, "slow-job"), 30, what="the JobTimedOut event")
    # How far the hung run got: the launcher's log, read before its workload was deleted.
    log = job["status"]["failureLog"]
    assert (log["podName"], log["nodeName"], log["exitCode"], log["reason"]) == (
        pod["metadata"]["name"],
        box.pools["timeout"][0],
        0,
        "Timeout",
    )
    assert "# Collective test starting: all_reduce_perf" in log["tail"], log
    # The group ends only once its pods have stopped: the hung pod was killed, not left running.
    assert not_active(box, pod["metadata"]["name"])
    wait_for(lambda: gone(box, Pod, **{JOBSET_NAME: "slow-job-workload"}), 60, what="the pod collected")


def test_a_sweep_that_stops_printing_rows_fails_stalled_long_before_its_timeout(sandbox: Sandbox) -> None:
    """A run hung mid-sweep (no ``timeoutPerJob`` set: a day by default) fails ``WorkloadStalled``
    once it has printed no row for 10 times the time its next row should take (at least 120 s),
    with the launcher's log as the failure log."""
    box = sandbox
    (node,) = box.pools["stall"]
    profile = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-loopback")
    with contextlib.suppress(ApiError):  # another test or module may have created it
        box.kube.create(resources.LogProfile.from_dict(copy.deepcopy(profile)))
    measurement = {"logProfileRef": "nccl-loopback", "testType": "all_reduce", "sampleInterval": "5s"}
    workflow(box, "stall", "stall", LONG, job_spec={"bandwidthMeasurement": measurement})
    wf = wait_true(box.kube, resources.Workflow, "stall", box.namespace, "Failed", timeout=300)
    assert true_condition(wf) == ("Failed", "IterationsFailed", "1 groups failed across 1 iterations")
    job = _group_job(box, "stall", node)
    assert job is not None
    reason, message = true_condition(job)[1:]  # type: ignore[index]
    progress = (_bandwidth_of(box, "stall", node) or {})["status"]["progress"]
    assert reason == "WorkloadStalled"
    assert (
        message.startswith("Workload stalled: no nccl-tests result row for ")
        and f"after the {progress['lastRowBytes']}-byte row at " in message
    ), message
    assert progress["rows"] >= 20 and float(progress["expectedRowSec"]) > 0, progress
    assert job["status"]["failedNodes"] == [
        {"name": node, "reason": "WorkloadFailed", "cause": "WorkloadStalled", "message": message}
    ]
    log = job["status"]["failureLog"]
    assert (log["nodeName"], log["exitCode"], log["reason"]) == (node, 0, "Stalled")
    last_row = re.compile(rf"^\s*{progress['lastRowBytes']}\s+\d+\s+float\s+sum", re.M)
    assert last_row.search(log["tail"]), "the launcher's log ends at the row the run stopped after"


def test_an_unschedulable_pod_blocks_its_group_with_the_schedulers_reason_and_starts_no_clock(
    sandbox: Sandbox,
) -> None:
    box = sandbox
    short, busy, free = box.pools["blocked"]
    # Another workload holds every GPU of one node; a node advertising 7 GPUs is never picked.
    workflow(box, "busy", "blocked", SHORT, nodes=[busy])
    running_pods(box, "busy-job-workload", 1)
    workflow(
        box,
        "blocked",
        "blocked",
        SHORT,
        execution={"timeoutPerJob": "10s"},
        job_spec={"schedulingStallGraceSeconds": 1},
    )
    excluded = (
        "Warning",
        "InsufficientGPUCapacity",
        f"Excluded 1 node(s) with fewer than 8 allocatable nvidia.com/gpu: {short} has 7",
    )
    jobs = wait_for(
        lambda: len(j := jobs_of(box.kube, box.namespace, "blocked")) == 2 and j, 60, what="2 Jobs"
    )
    by_node = {group_nodes(j)[0]: name for name, j in jobs.items()}
    assert sorted(by_node) == [busy, free], f"{short} has no group"
    orchestration = get(box.kube, resources.Workflow, "blocked", box.namespace)["status"]["orchestration"]
    assert orchestration["excludedNodes"] == [short]
    assert orchestration["exclusionReason"] == (
        "1 node(s) matched the target but have insufficient GPU capacity, the workload requests "
        f"8 nvidia.com/gpu per node: {short} has 7"
    )
    wait_for(lambda: excluded in events_for(box, "blocked", "Workflow"), 30, what="the exclusion event")
    held, sibling = by_node[busy], by_node[free]
    trainjob = f"{held}-workload"
    (pod,) = wait_for(lambda: pods_of(box, trainjob) or None, 60, what=f"the pod of {trainjob}")
    name = pod["metadata"]["name"]

    def blocked() -> tuple[str, str, str] | None:
        found = true_condition(get(box.kube, resources.Job, held, box.namespace))
        return found if found and found[1] == "WorkloadSchedulingBlocked" else None

    condition = wait_for(blocked, 60, what=f"{held} WorkloadSchedulingBlocked")
    scheduled_condition = next(
        c
        for c in box.kube.get(Pod, name, namespace=box.namespace).status.conditions
        if c.type == "PodScheduled"
    )
    assert (scheduled_condition.status, scheduled_condition.reason) == ("False", "Unschedulable")
    why = scheduled_condition.message
    assert "1 Insufficient nvidia.com/gpu" in why, why
    assert condition == (
        "InProgress",
        "WorkloadSchedulingBlocked",
        f"Workload TrainJob/{trainjob} cannot be scheduled: pod {name}: {why}",
    ), "kube-scheduler's own reason reaches the user"

    # The Workflow says so too, naming the group (a Certification or WorkloadRun passes it on).
    def workflow_blocked() -> tuple[str, str, str] | None:
        found = true_condition(get(box.kube, resources.Workflow, "blocked", box.namespace))
        return found if found and found[1] == "WorkloadSchedulingBlocked" else None

    groups = get(box.kube, resources.Workflow, "blocked", box.namespace)["status"]["orchestration"]["groups"]
    (group,) = [g["name"] for g in groups if (g.get("jobRef") or {}).get("name") == held]
    reason_of_workflow = wait_for(workflow_blocked, 60, what="the Workflow WorkloadSchedulingBlocked")
    assert reason_of_workflow[0] == "InProgress"
    assert re.fullmatch(
        rf"Iteration 1/1: \d groups running; {group}: {re.escape(condition[2])}", reason_of_workflow[2]
    )

    # The sibling group started with it: once its clock has run out, the held one still has none.
    wait_true(box.kube, resources.Job, sibling, box.namespace, "Failed", timeout=90)
    wait_for(
        lambda: phase_of(box, "blocked", sibling) == "Failed", 60, what="the Workflow recording the sibling"
    )
    job = get(box.kube, resources.Job, held, box.namespace)
    assert true_condition(job)[1] == "WorkloadSchedulingBlocked"  # type: ignore[index]
    assert "workloadStartTime" not in job["status"] and job["status"]["schedulingBlockedSince"]

    # The GPUs come free: the pod is bound, runs, and only now the clock starts.
    box.kube.delete(resources.Workflow, "busy", namespace=box.namespace)
    running_pods(box, trainjob, 1)
    job = wait_for(
        lambda: (
            (j := get(box.kube, resources.Job, held, box.namespace))["status"].get("workloadStartTime") and j
        ),
        60,
        what=f"{held}'s clock",
    )
    assert true_condition(job)[1] == "WorkloadRunning"  # type: ignore[index]
    assert "schedulingBlockedSince" not in job["status"]
    wait_for(
        lambda: (
            workflow_blocked() is None
            and true_condition(get(box.kube, resources.Workflow, "blocked", box.namespace))
        ),
        60,
        what="the Workflow no longer blocked",
    )


def test_a_node_going_bad_mid_run_is_a_hardware_failure_named_by_the_health_expression(
    sandbox: Sandbox,
) -> None:
    box = sandbox
    not_ready, xid = box.pools["health"]
    before = {n: box.kube.get(Node, n).metadata.resourceVersion for n in (not_ready, xid)}
    monitor = {"nodeHealthMonitor": {"cel": {"expression": HEALTH_EXPRESSION}}}
    workflow(box, "health", "health", LONG, job_spec=monitor)
    wf = wait_true(box.kube, resources.Workflow, "health", box.namespace, "Failed", timeout=180)
    assert true_condition(wf) == (
        "Failed",
        "JobHardwareFailed",
        "2 groups failed across 1 iterations; hardware failures occurred on one or more nodes",
    )
    for name, job in jobs_of(box.kube, box.namespace, "health").items():
        (node,) = group_nodes(job)
        assert job["status"]["workloadStartTime"], f"{name} ran before {node} went bad"
        hardware = next(c for c in job["status"]["conditions"] if c["type"] == "HardwareFailed")
        assert (hardware["status"], hardware["reason"], hardware["message"]) == (
            "True",
            "HardwareFailureDetected",
            f"Hardware failure detected on node(s): [{node}]",
        )
        assert job["status"]["failedNodes"] == [
            {
                "name": node,
                "reason": "HardwareFailureDetected",
                "cause": "HardwareFailureDetected",
                "message": "Hardware failure detected by node health check",
            }
        ]
        assert gone(box, Pod, **{JOBSET_NAME: f"{name}-workload"}), "the group ended after its pods"
    ready = _condition(box.kube.get(Node, not_ready), "Ready")
    assert (ready.status, ready.reason) == ("Unknown", "NodeStatusUnknown"), "what the fault wrote holds"
    health = _condition(box.kube.get(Node, xid), HEALTH_CONDITION)
    assert (health.status, health.reason, health.message) == (
        "False",
        "XID79",
        "GPU 0: XID 79 (GPU has fallen off the bus)",
    )
    for node in (not_ready, xid):
        obj = box.kube.get(Node, node)
        managers = {entry.manager for entry in obj.metadata.managedFields or ()}
        assert "nvcre-manager" not in managers, f"nvcre never writes a node; {node}: {managers}"
        assert int(obj.metadata.resourceVersion) > int(before[node] or 0)


def test_deleting_a_running_workflow_tears_down_in_order_through_the_garbage_collector(
    sandbox: Sandbox, history: Recorder
) -> None:
    box = sandbox
    data = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bye-data"}, "data": {"a": "b"}}
    workflow(box, "bye", "teardown", SHORT, dependencies=[data])
    (pod,) = running_pods(box, "bye-job-workload", 1)
    (batch,) = box.kube.list(BatchJob, namespace=box.namespace, labels={JOBSET_NAME: "bye-job-workload"})
    trainjob = get(box.kube, resources.TrainJob, "bye-job-workload", box.namespace)
    runtime_copy = trainjob["spec"]["runtimeRef"]["name"]  # the Job's own copy of the runtime
    watched = {
        "Workflow": history(resources.Workflow, "bye", box.namespace),
        "Job": history(resources.Job, "bye-job", box.namespace),
        "TrainJob": history(resources.TrainJob, "bye-job-workload", box.namespace),
        "JobSet": history(JobSet, "bye-job-workload", box.namespace),
        "batch Job": history(BatchJob, str(batch.metadata.name), box.namespace),
        "Pod": history(Pod, pod["metadata"]["name"], box.namespace),
        "runtime copy": history(resources.TrainingRuntime, runtime_copy, box.namespace),
        "ConfigMap": history(ConfigMap, "bye-data", box.namespace),
    }
    box.kube.delete(resources.Workflow, "bye", namespace=box.namespace)

    def all_gone() -> bool:
        return all(_gone(box, h) for h in watched.values())

    wait_for(all_gone, 120, what="the Workflow and everything under it deleted")
    # Every write has its place in etcd's one revision sequence: a deletion's resourceVersion
    # orders it against every other write of this control plane.
    deleted = {what: _revision(h.versions[-1]) for what, h in watched.items()}
    job_deleting = next(
        _revision(v) for v in watched["Job"].versions if v["metadata"].get("deletionTimestamp")
    )
    pod_ended = next(
        _revision(v)
        for v in watched["Pod"].versions
        if (v.get("status") or {}).get("phase") in ("Succeeded", "Failed") or v is watched["Pod"].versions[-1]
    )
    assert job_deleting < deleted["TrainJob"] < deleted["Job"], (
        "nvcre deletes the TrainJob, then lets the Job go"
    )
    assert deleted["TrainJob"] < deleted["JobSet"] and deleted["TrainJob"] < deleted["batch Job"], (
        "the garbage collector removes Trainer's and JobSet's children"
    )
    assert pod_ended < deleted["Job"], "the Job waits for its pod to stop"
    assert deleted["TrainJob"] < deleted["runtime copy"] < deleted["Workflow"], (
        "the TrainJob's runtime outlives it"
    )
    assert deleted["Job"] < deleted["ConfigMap"] < deleted["Workflow"], (
        "workflow dependencies go after the Jobs, the Workflow last"
    )


def test_a_log_cut_short_lost_corrupted_or_over_sockets_is_what_the_measurement_reads(
    sandbox: Sandbox,
) -> None:
    """One single-node group per fault of the ``logs`` pool, each measured as nvcre measures a
    catalog category. What the BandwidthMeasurement says of each is today's verdict input: a log
    lost mid-table reads as a short table, an unserved log as unavailable once the grace is over."""
    box = sandbox
    truncated, unserved, corrupted, sockets = box.pools["logs"]
    # the catalog's single-node profile: it reads the ``node`` pod (there is no MPI launcher)
    profile = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-loopback")
    with contextlib.suppress(ApiError):  # another module may have created it
        box.kube.create(resources.LogProfile.from_dict(copy.deepcopy(profile)))
    measurement = {"logProfileRef": "nccl-loopback", "testType": "all_reduce", "sampleInterval": "5s"}
    workflow(
        box,
        "logs",
        "logs",
        ["env", "NCCL_DEBUG=INFO", *SHORT],
        # the shortest grace an unreadable log gets (2 minutes) before it is called unavailable
        job_spec={"bandwidthMeasurement": measurement, "measurementTimeout": "1m"},
    )

    def measured(node: str, reason: str) -> dict[str, Any]:
        def complete() -> dict[str, Any] | None:
            bm = _bandwidth_of(box, "logs", node)
            done = [
                c for c in ((bm or {}).get("status") or {}).get("conditions") or () if c["type"] == "Complete"
            ]
            if bm is None or not done or done[0]["status"] != "True":
                return None
            assert done[0]["reason"] == reason, (node, done[0])
            return bm

        try:
            return wait_for(complete, 240, what=f"the measurement of {node}'s group Complete ({reason})")
        except WaitTimeout:
            raise AssertionError(f"{node}: {_measurement_state(box, 'logs', node)}") from None

    short = measured(truncated, "JobSucceeded")["status"]
    assert max(r["sizeBytes"] for r in short["results"]) == 64 << 20, "the table stops at the cut"
    assert len(short["results"]) == 24, "8 B to 64 MiB of the 8 B to 1 GiB sweep"
    over_sockets = measured(sockets, "JobSucceeded")["status"]
    assert over_sockets["transport"] == ["Socket"] and over_sockets["wrongValues"] == 0
    bad = measured(corrupted, "JobFailed")["status"]
    assert bad["wrongValues"] > 0, "the #wrong columns nccl-tests printed"
    failed = _group_job(box, "logs", corrupted) or {}
    assert failed["status"]["failureLog"]["exitCode"] == 7, "nccl-tests' testNumResults"
    assert "# Out of bounds values : " in failed["status"]["failureLog"]["tail"]
    unread = measured(unserved, "LogsUnavailable")["status"]
    assert not unread.get("results"), "nothing of the run was read"


# ---------------------------------------------------------------------------------------------
# reading what happened


def _group_job(box: Sandbox, wf: str, node: str) -> dict[str, Any] | None:
    """The Job of the Workflow's single-node group on ``node``."""
    return next((j for j in jobs_of(box.kube, box.namespace, wf).values() if group_nodes(j) == [node]), None)


def _bandwidth_of(box: Sandbox, wf: str, node: str) -> dict[str, Any] | None:
    """The BandwidthMeasurement of the Workflow's group on ``node``, once it exists."""
    job = _group_job(box, wf, node)
    if job is None:
        return None
    try:
        return get(
            box.kube, resources.BandwidthMeasurement, f"{job['metadata']['name']}-bandwidth", box.namespace
        )
    except ApiError:
        return None


def _measurement_state(box: Sandbox, wf: str, node: str) -> str:
    """The Workflow, the node's Job and its BandwidthMeasurement as they stand, for a failure."""
    job = _group_job(box, wf, node) or {}
    bm = _bandwidth_of(box, wf, node) or {}
    workflow = get(box.kube, resources.Workflow, wf, box.namespace)
    return repr(
        [
            (workflow.get("status") or {}).get("conditions"),
            (job.get("status") or {}).get("conditions"),
            bm.get("status"),
        ]
    )


def scheduled(box: Sandbox) -> dict[str, str]:
    """Pod -> node, from kube-scheduler's ``Scheduled`` events (they outlive the pods)."""
    bound = re.compile(rf"^Successfully assigned {re.escape(box.namespace)}/(\S+) to (\S+)$")
    found = {}
    for event in box.kube.list(Event, namespace=box.namespace):
        match = bound.match(event.message or "") if event.reason == "Scheduled" else None
        if match:
            found[match.group(1)] = match.group(2)
    return found


def events_for(box: Sandbox, name: str, kind: str | None = None) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the events about ``name``, read through core/v1: the upstream
    controllers' events have no ``eventTime``, which the events.k8s.io model cannot decode."""
    return [
        (e.type or "", e.reason or "", e.message or "")
        for e in box.kube.list(Event, namespace=box.namespace)
        if e.involvedObject.name == name and (kind is None or e.involvedObject.kind == kind)
    ]


def hosts_on(box: Sandbox) -> dict[str, set[str]]:
    """Node -> the host names of the pods bound to it (JobSet names a pod's host after the pod,
    less the random suffix the Job controller adds)."""
    hosts: dict[str, set[str]] = {}
    for pod, node in scheduled(box).items():
        hosts.setdefault(node, set()).add(pod.rsplit("-", 1)[0])
    return hosts


def not_active(box: Sandbox, pod: str) -> bool:
    try:
        phase = box.kube.get(Pod, pod, namespace=box.namespace).status.phase
    except ApiError as error:
        return error.status.code == 404
    return phase in ("Succeeded", "Failed")


def phase_of(box: Sandbox, wf: str, job: str) -> str | None:
    groups = (
        (get(box.kube, resources.Workflow, wf, box.namespace).get("status") or {}).get("orchestration") or {}
    ).get("groups") or ()
    return next((g.get("phase") for g in groups if (g.get("jobRef") or {}).get("name") == job), None)


def _condition(node: Node, kind: str) -> Any:
    return next(c for c in (node.status.conditions if node.status else None) or () if c.type == kind)


def _gone(box: Sandbox, recorded: History) -> bool:
    return _gone_named(box, recorded.resource, recorded.name)


def _gone_named(box: Sandbox, resource: Any, name: str) -> bool:
    try:
        box.kube.get(resource, name, namespace=box.namespace)
    except ApiError as error:
        return error.status.code == 404
    return False


def _revision(version: dict[str, Any]) -> int:
    return int(version["metadata"]["resourceVersion"])
