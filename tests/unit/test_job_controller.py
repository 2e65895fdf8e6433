"""The Job controller's reconcile paths on a fake API server whose caches lag as a test says.

The real API server (tests/integration) covers schema, watches and restarts; here the branches
that need a cache miss, a stale view, a failing call or a crash between two writes.
"""

from __future__ import annotations

import contextlib
import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube import ApiError

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation, Finalizer
from nvcre.controllers.job import JobController
from nvcre.decide.job import measurements
from nvcre.objects import ObjectKey
from nvcre.orchestration.placement import node_affinity
from nvcre.runtime.controller import TerminalError
from nvcre.testing.clock import FakeClock
from nvcre.testing.fakeclient import FakeClient, FakeManager, api_error, context
from nvcre.testing.workloads import create_chain, pods_of, training_runtime, workflow
from nvcre.workload.trainjob import RUNTIME_NOT_FOUND, build, place

pytestmark = pytest.mark.asyncio

NS = "team"
KEY = ObjectKey(NS, "j")
WORKLOAD = "j-workload"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_job(*nodes: str, **spec: Any) -> dict[str, Any]:
    """A Job as a Workflow renders it: its TrainJob pinned to ``nodes`` (default one node)."""
    hosts = list(nodes) or ["n0"]
    train_job = {"runtimeRef": {"name": "rt", "kind": "TrainingRuntime"}, "trainer": {"numNodes": 1}}
    placed = place(
        train_job,
        affinity=node_affinity(None, group_nodes=hosts, products=()),
        tolerations=[],
        num_nodes=len(hosts),
    )
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": NS, "uid": "job-uid", "finalizers": [Finalizer.JOB]},
        "spec": {"workload": {"trainJob": placed}, **spec},
    }


RUNNING = ("InProgress", "WorkloadRunning", f"Workload TrainJob/{WORKLOAD} is running")
"""What the write that records a just-created TrainJob says: following it decides Running."""


def make_trainjob(job: dict[str, Any], condition: str | None = None) -> dict[str, Any]:
    """The TrainJob the Job controller renders, with the condition Trainer would set."""
    conditions = [{"type": condition, "status": "True", "message": "jobset failed"}] if condition else []
    return {**build(job), "status": {"conditions": conditions}}


def job_pods(job: dict[str, Any], phases: dict[str, str]) -> list[dict[str, Any]]:
    """The pods JobSet runs for the Job's rendered TrainJob, bound to its nodes, in ``phases``."""
    pods = pods_of(build(job), training_runtime("rt"))
    for pod in pods:
        pod["status"] = {"phase": phases[pod["spec"]["nodeName"]]}
    return pods


def with_workload(job: dict[str, Any], trainjob: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(job)
    out["status"] = {
        "workloadRef": {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": WORKLOAD,
            "namespace": NS,
        },
        "conditions": [
            {
                "type": "InProgress",
                "status": "True",
                "reason": "WorkloadRunning",
                "message": f"Workload TrainJob/{WORKLOAD} is running",
                "lastTransitionTime": _now(),
            }
        ],
    }
    return out


def setup() -> tuple[FakeClient, FakeManager, JobController]:
    client = FakeClient()
    ctx = context(client)
    controller = JobController(ctx)
    assert isinstance(ctx.manager, FakeManager)
    return client, ctx.manager, controller


def true_condition(job: dict[str, Any] | None) -> tuple[str, str, str] | None:
    assert job is not None
    for c in job.get("status", {}).get("conditions") or ():
        if c["type"] in ("InProgress", "Succeeded", "Failed") and c["status"] == "True":
            return c["type"], c["reason"], c["message"]
    return None


CHECKPOINTED = {
    "checkpoint": {"pvcName": "ckpt", "maxRestarts": 2},
    "goodputMeasurement": {"logProfileRef": "megatron-training", "sampleInterval": "5s"},
}


def goodput(step: str = "100") -> dict[str, Any]:
    """The GoodputMeasurement the Job controller renders, with a checkpoint recorded."""
    (wanted,) = [w for w in measurements.wanted(make_job(**CHECKPOINTED)) if w.kind == "GoodputMeasurement"]
    return {
        **wanted.body,
        "status": {"lastCheckpointStep": step, "lastStepTimestamp": "2026-01-01T00:00:00Z"},
    }


# -- item 4: a cache miss is no deletion ------------------------------------------------------------


async def test_a_workload_missing_from_the_cache_is_read_live_not_declared_deleted() -> None:
    client, manager, controller = setup()
    trainjob = client.put(make_trainjob(make_job()))
    manager.cache(client.put(with_workload(make_job(), trainjob)))  # the TrainJob's ADDED not yet seen
    await controller.reconcile(KEY)
    job = client.stored(resources.Job, "j", NS)
    assert true_condition(job) == RUNNING


async def test_a_cache_miss_never_restarts_a_running_workload() -> None:
    client, manager, controller = setup()
    trainjob = client.put(make_trainjob(make_job(**CHECKPOINTED)))
    manager.cache(client.put(with_workload(make_job(**CHECKPOINTED), trainjob)))
    manager.cache(client.put(goodput()))
    await controller.reconcile(KEY)
    assert client.count("delete", "TrainJob") == 0
    live = client.stored(resources.TrainJob, WORKLOAD, NS)
    assert live is not None and live["metadata"]["uid"] == trainjob["metadata"]["uid"]
    assert not (client.stored(resources.Job, "j", NS) or {})["status"].get("restartCount")


async def test_the_job_reads_itself_live_and_creates_nothing_it_already_recorded() -> None:
    """A cached Job from before its workloadRef was written must not POST the TrainJob again."""
    client, manager, controller = setup()
    job = make_job()
    manager.cache(client.put(job))  # the cache still has the Job without status
    trainjob = client.put(make_trainjob(job))
    manager.cache(trainjob)
    client.objects[("nvcre.nvidia.com", "Job", NS, "j")]["status"] = with_workload(job, trainjob)["status"]
    await controller.reconcile(KEY)
    assert client.count("create", "TrainJob") == 0


# -- item 5: the server's verdict on a create --------------------------------------------------------


async def test_a_workload_the_server_refuses_fails_the_job_with_the_servers_message() -> None:
    client, manager, controller = setup()
    manager.cache(client.put(make_job()))
    refusal = 'TrainJob.trainer.kubeflow.org "j-workload" is invalid: spec.trainer.numNodes: Invalid value: 0'
    client.fail("create", "TrainJob", api_error(422, refusal))
    with pytest.raises(TerminalError):
        await controller.reconcile(KEY)
    assert true_condition(client.stored(resources.Job, "j", NS)) == (
        "Failed",
        "WorkloadCreationError",
        f"Failed to create TrainJob/{WORKLOAD}: {refusal}",
    )
    assert [(e["type"], e["reason"], e["note"]) for e in client.events] == [
        ("Warning", "WorkloadCreationError", f"Failed to create TrainJob/{WORKLOAD}: {refusal}")
    ], "one event, after the write it describes"


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_a_transient_create_error_is_retried_and_never_fails_the_job(code: int) -> None:
    client, manager, controller = setup()
    manager.cache(client.put(make_job()))
    client.fail("create", "TrainJob", api_error(code, "try again later", retry_after=1))
    with pytest.raises(ApiError):
        await controller.reconcile(KEY)
    assert true_condition(client.stored(resources.Job, "j", NS)) is None
    await controller.reconcile(KEY)  # the retry
    assert true_condition(client.stored(resources.Job, "j", NS)) == RUNNING


async def test_a_foreign_workload_the_cache_holds_that_is_being_deleted_is_waited_for() -> None:
    """Spec §1.7: a foreign holder on its way out is a retry, not a name collision."""
    client, manager, controller = setup()
    manager.cache(client.put(make_job()))
    foreign = make_trainjob(make_job())
    foreign["metadata"] |= {
        "ownerReferences": [],
        "finalizers": ["example.com/hold"],
        "deletionTimestamp": "2026-01-01T00:00:00Z",
    }
    manager.cache(client.put(foreign))
    await controller.reconcile(KEY)
    assert true_condition(client.stored(resources.Job, "j", NS)) is None
    client.objects.pop(("trainer.kubeflow.org", "TrainJob", NS, WORKLOAD))  # its finalizer is released
    await controller.reconcile(KEY)
    assert true_condition(client.stored(resources.Job, "j", NS)) == RUNNING


# -- item 6: a restart counts once --------------------------------------------------------------------


async def test_a_restart_counts_once_when_the_caches_lag_behind_it() -> None:
    client, manager, controller = setup()
    failed = client.put(make_trainjob(make_job(**CHECKPOINTED), "Failed"))
    manager.cache(failed)
    manager.cache(client.put(with_workload(make_job(**CHECKPOINTED), failed)))
    manager.cache(client.put(goodput()))
    for _ in range(3):  # every watch event of the restart wakes the Job; the caches have seen none
        await controller.reconcile(KEY)
    job = client.stored(resources.Job, "j", NS)
    assert job is not None and job["status"]["restartCount"] == 1
    fresh = client.stored(resources.TrainJob, WORKLOAD, NS)
    assert fresh is not None and fresh["metadata"]["uid"] != failed["metadata"]["uid"], "a new workload runs"
    assert job["status"]["workloadRef"]["uid"] == fresh["metadata"]["uid"]
    assert client.count("delete", "TrainJob") == 1


@pytest.mark.parametrize(
    ("verb", "kind", "subresource", "code"),
    [
        ("delete", "TrainJob", "", 500),  # killed after the intent write, before the delete
        ("replace", "Job", "status", 409),  # the intent write conflicts and is applied again
        ("create", "TrainJob", "", 503),  # killed between the delete and the new workload
        ("replace", "GoodputMeasurement", "status", 500),
    ],
)
async def test_a_restart_interrupted_anywhere_counts_once(
    verb: str, kind: str, subresource: str, code: int
) -> None:
    client, manager, controller = setup()
    failed = client.put(make_trainjob(make_job(**CHECKPOINTED), "Failed"))
    manager.cache(failed)
    job = client.put(with_workload(make_job(**CHECKPOINTED), failed))
    manager.cache(job)
    manager.cache(client.put(goodput()))
    client.fail(verb, kind, api_error(code, "interrupted"), subresource=subresource)
    for _ in range(3):
        with contextlib.suppress(ApiError):  # the controller retries with backoff
            await controller.reconcile(KEY)
    live = client.stored(resources.Job, "j", NS)
    assert live is not None and live["status"]["restartCount"] == 1
    fresh = client.stored(resources.TrainJob, WORKLOAD, NS)
    assert fresh is not None and fresh["metadata"]["uid"] != failed["metadata"]["uid"]
    assert live["status"]["workloadRef"]["uid"] == fresh["metadata"]["uid"], "and is followed"
    events = [e["reason"] for e in client.events]
    assert events.count("WorkloadRestarting") == 1, events
    reset = client.stored(resources.GoodputMeasurement, "j-goodput", NS)
    assert reset is not None and "lastStepTimestamp" not in reset["status"]


# -- item 9: no POST that can only fail, no wake-up per heartbeat ------------------------------------


async def test_a_measurement_the_cache_holds_is_not_created_again() -> None:
    client, manager, controller = setup()
    spec = {
        "goodputMeasurement": {"logProfileRef": "megatron-training"},
        "bandwidthMeasurement": {"logProfileRef": "nccl"},
    }
    trainjob = client.put(make_trainjob(make_job(**spec)))
    manager.cache(trainjob)
    manager.cache(client.put(with_workload(make_job(**spec), trainjob)))
    await controller.reconcile(KEY)
    created = {
        "GoodputMeasurement": resources.GoodputMeasurement,
        "BandwidthMeasurement": resources.BandwidthMeasurement,
    }
    assert [client.count("create", kind) for kind in created] == [1, 1]
    # once its informer sees it, no POST (which could only fail) is made
    for kind, resource in created.items():
        manager.cache(client.all(resource)[0])
        before = client.count("create", kind)
        await controller.reconcile(KEY)
        assert client.count("create", kind) == before, f"{kind} is not POSTed into a 409 again"


def node(name: str, *, heartbeat: str, ready: str = "True", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        },
    }


async def test_a_node_heartbeat_wakes_no_job_but_a_condition_change_does() -> None:
    _, manager, controller = setup()
    controller.controller.start_watching()
    (running,) = job_pods(make_job("n1"), {"n1": "Running"})
    manager.cache(running)
    manager.cache(node("n1", heartbeat="2026-01-01T00:00:00Z"))
    queue = controller.controller.queue
    while len(queue):
        queue.done(await queue.get())
    manager.cache(node("n1", heartbeat="2026-01-01T00:00:10Z"), "MODIFIED")
    assert len(queue) == 0, "a heartbeat changes nothing the Job judges"
    manager.cache(node("n1", heartbeat="2026-01-01T00:00:20Z", ready="False"), "MODIFIED")
    assert len(queue) == 1 and await queue.get() == KEY


# -- item 10: node health as spec/measurements.md 5.1 defines it ------------------------------------


async def test_node_health_fills_in_defaults_and_looks_only_at_running_and_pending_pods() -> None:
    client, manager, controller = setup()
    # spec.unschedulable is absent on a node that was never cordoned: the default makes it false.
    expression = "node.spec.unschedulable == false && node.status.allocatable['nvidia.com/gpu'] == '0'"
    spec = {"nodeHealthMonitor": {"cel": {"expression": expression}}}
    phases = {"broken": "Running", "queued": "Pending", "finished": "Succeeded"}
    job = make_job(*phases, **spec)
    trainjob = client.put(make_trainjob(job))
    manager.cache(trainjob)
    manager.cache(client.put(with_workload(job, trainjob)))
    for name in phases:
        lost = node(name, heartbeat="2026-01-01T00:00:00Z")
        lost["status"]["allocatable"] = {"nvidia.com/gpu": "0"}
        manager.cache(lost)
    for pod in job_pods(job, phases):
        manager.cache(pod)
    await controller.reconcile(KEY)
    job = client.stored(resources.Job, "j", NS)
    assert job is not None
    assert [(e["name"], e["reason"]) for e in job["status"].get("failedNodes") or ()] == [
        ("broken", "HardwareFailureDetected"),
        ("queued", "HardwareFailureDetected"),
    ], "the node of a pod that already ended is not the Job's any more"
    hardware = next(c for c in job["status"]["conditions"] if c["type"] == "HardwareFailed")
    assert hardware["message"] == "Hardware failure detected on node(s): [broken queued]"


async def test_a_hardware_failure_goes_out_in_the_same_write_as_the_state_its_pass_decides() -> None:
    """WorkloadCreated -> WorkloadRunning and HardwareFailed on the pod's node: one status write,
    and the warning after it; then the Job deletes its workload."""
    client, manager, controller = setup()
    job = make_job("broken", nodeHealthMonitor={"cel": {"expression": "node.spec.unschedulable == true"}})
    trainjob = client.put(make_trainjob(job))
    manager.cache(trainjob)
    created = with_workload(job, trainjob)
    created["status"]["conditions"][0].update(
        reason="WorkloadCreated", message=f"Workload TrainJob/{WORKLOAD} created and is starting"
    )
    manager.cache(client.put(created))
    manager.cache(node("broken", heartbeat="2026-01-01T00:00:00Z", unschedulable=True))
    for pod in job_pods(job, {"broken": "Running"}):
        manager.cache(pod)
    await controller.reconcile(KEY)
    stored = client.stored(resources.Job, "j", NS)
    assert true_condition(stored) == RUNNING
    assert stored is not None
    hardware = next(c for c in stored["status"]["conditions"] if c["type"] == "HardwareFailed")
    assert (hardware["status"], hardware["message"]) == (
        "True",
        "Hardware failure detected on node(s): [broken]",
    )
    assert client.count("replace", "Job", "status") == 1
    assert [(e["reason"], e["note"]) for e in client.events] == [
        ("HardwareFailureDetected", "Hardware failure detected on node(s): [broken]")
    ]
    # A hardware failure ends the group: the Job's own watch event brings it back, and its
    # workload goes (the Workflow waits for its pods to end).
    manager.cache(stored, "MODIFIED")
    await controller.reconcile(KEY)
    assert client.stored(resources.TrainJob, WORKLOAD, NS) is None


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("node.metadata.name", "must evaluate to bool, got string"),
        ("node.spec.unschedulable ==", "syntax error at line 1, column 25"),
        (
            "[" + ",".join(["1"] * 300) + "].all(a, [" + ",".join(["1"] * 300) + "].all(b, a == b))",
            "exceeded the evaluation budget of 10000 steps",
        ),
    ],
    ids=["not-boolean", "syntax", "over-budget"],
)
async def test_an_unusable_health_expression_is_reported_once_and_fails_no_node(
    expression: str, why: str
) -> None:
    client, manager, controller = setup()
    job = make_job("n0", nodeHealthMonitor={"cel": {"expression": expression}})
    trainjob = client.put(make_trainjob(job))
    manager.cache(trainjob)
    manager.cache(client.put(with_workload(job, trainjob)))
    manager.cache(node("n0", heartbeat="2026-01-01T00:00:00Z", unschedulable=True))
    for pod in job_pods(job, {"n0": "Running"}):
        manager.cache(pod)
    await controller.reconcile(KEY)
    await controller.reconcile(KEY)
    assert [(e["type"], e["reason"], e["note"]) for e in client.events] == [
        (
            "Warning",
            "InvalidNodeHealthExpression",
            f"nodeHealthMonitor.cel.expression: {why}; node health is not monitored",
        )
    ]
    stored = client.stored(resources.Job, "j", NS)
    assert stored is not None
    assert not stored["status"].get("failedNodes")
    assert all(c["type"] != "HardwareFailed" for c in stored["status"]["conditions"])


# -- reads the cache answers --------------------------------------------------------------------------


async def test_a_job_is_followed_from_the_cache_and_its_own_writes_without_reading_it() -> None:
    """The TrainJob is created and then followed while the Job cache still holds the Job as it
    was created: the second pass works on the Job as the first pass's write returned it. The
    first write records the workload and the state following it decides (Running), the second
    pass has nothing to write; the first InProgress emits no event (the Workflow announces its
    Jobs)."""
    client, manager, controller = setup()
    manager.cache(client.put(make_job()))
    await controller.reconcile(KEY)  # creates the workload, records it
    created = client.stored(resources.TrainJob, WORKLOAD, NS)
    assert created is not None
    assert true_condition(client.stored(resources.Job, "j", NS)) == RUNNING
    manager.cache(created)  # the TrainJob's watch event wakes the Job; the Job's has not come yet
    await controller.reconcile(KEY)
    assert true_condition(client.stored(resources.Job, "j", NS)) == RUNNING
    assert client.count("get", "Job") == 0
    assert client.count("create", "TrainJob") == 1 and client.count("replace", "Job", "status") == 1
    assert client.events == []


async def test_a_suspended_workload_is_recorded_as_created_not_running() -> None:
    """Following a just-created TrainJob that Kueue holds (suspended) decides Pending: the
    first write keeps the spec's WorkloadCreated, and the next pass follows it as usual."""
    client, manager, controller = setup()
    job = make_job()
    job["spec"]["workload"]["trainJob"]["suspend"] = True
    manager.cache(client.put(job))
    await controller.reconcile(KEY)
    assert true_condition(client.stored(resources.Job, "j", NS)) == (
        "InProgress",
        "WorkloadCreated",
        f"Workload TrainJob/{WORKLOAD} created and is starting",
    )


async def test_the_workload_waits_for_the_runtime_copy_its_workflow_creates_after_the_job() -> None:
    """A Workflow's Job is created before its Job-scoped TrainingRuntime copy (so the copy can
    name it as owner in its create): no TrainJob, and no write, until the copy's watch event."""
    client, manager, controller = setup()
    job = make_job()
    job["metadata"]["annotations"] = {Annotation.RUNTIME_COPY: "rt"}
    manager.cache(client.put(job))
    await controller.reconcile(KEY)
    assert client.count("create", "TrainJob") == 0 and client.count("replace", "Job", "status") == 0
    copy_of = {**training_runtime("rt"), "metadata": {"name": "rt", "namespace": NS}}
    earlier = {"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Job", "name": "j", "uid": "earlier-uid"}
    copy_of["metadata"]["ownerReferences"] = [earlier]  # a retried group's earlier copy, going
    manager.cache(client.put(copy.deepcopy(copy_of)))
    await controller.reconcile(KEY)
    assert client.count("create", "TrainJob") == 0
    copy_of["metadata"]["ownerReferences"] = [{**earlier, "uid": "job-uid"}]  # this Job's
    manager.cache(client.put(copy_of), "MODIFIED")
    await controller.reconcile(KEY)
    assert client.count("create", "TrainJob") == 1
    assert true_condition(client.stored(resources.Job, "j", NS)) == RUNNING


async def test_trainers_webhook_not_yet_seeing_the_runtime_copy_is_retried_not_a_failure() -> None:
    """nvcre's cache holds the copy: Trainer's refusal says only that its own informer lags."""
    client, manager, controller = setup()
    job = make_job()
    job["metadata"]["annotations"] = {Annotation.RUNTIME_COPY: "rt"}
    manager.cache(client.put(job))
    copy_of = {**training_runtime("rt"), "metadata": {"name": "rt", "namespace": NS}}
    owner = {"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Job", "name": "j", "uid": "job-uid"}
    copy_of["metadata"]["ownerReferences"] = [owner]
    manager.cache(client.put(copy_of))
    refusal = (
        f'admission webhook "validate.trainjob.trainer.kubeflow.org" denied the request: {RUNTIME_NOT_FOUND}'
    )
    client.fail("create", "TrainJob", api_error(403, refusal))
    result = await controller.reconcile(KEY)
    assert result is not None and result.requeue_after == 1.0
    assert true_condition(client.stored(resources.Job, "j", NS)) is None, "not failed"
    await controller.reconcile(KEY)  # Trainer has seen it now
    assert true_condition(client.stored(resources.Job, "j", NS)) == RUNNING


async def test_a_running_job_that_has_not_changed_costs_no_request() -> None:
    """Woken again (a pod, a node, a requeue) with nothing new: no write, and no read to check."""
    client, manager, controller = setup()
    manager.cache(client.put(make_job()))
    await controller.reconcile(KEY)
    created = client.stored(resources.TrainJob, WORKLOAD, NS)
    assert created is not None
    manager.cache(created)
    await controller.reconcile(KEY)  # WorkloadRunning
    running = client.stored(resources.Job, "j", NS)
    assert running is not None
    manager.cache(running, "MODIFIED")  # the cache has caught up
    calls = len(client.calls)
    await controller.reconcile(KEY)
    assert client.calls[calls:] == []
    assert client.stored(resources.Job, "j", NS) == running


# -- the failure log: the pod the Job's own TrainJob ran ---------------------------------------------


async def test_the_failure_log_is_of_a_pod_the_jobs_trainjob_ran_never_of_a_labelled_stranger() -> None:
    """A failed pod with the workload's labels, sorting first, outside the owner chain: the
    failure log names and quotes the real one (fails on main, where pods were chosen by label)."""
    read: list[str] = []

    async def tail(
        client: Any, pod: str, namespace: str, container: str | None, **_: int
    ) -> tuple[str, bool]:
        read.append(pod)
        return f"log of {pod}\n", False

    client = FakeClient()
    ctx = context(client)
    controller = JobController(ctx, tail_reader=tail)
    assert isinstance(ctx.manager, FakeManager)
    failed = client.put(make_trainjob(make_job(), "Failed"))
    job = with_workload(make_job(), failed)
    job["status"]["workloadRef"]["uid"] = failed["metadata"]["uid"]
    ctx.manager.cache(failed)
    ctx.manager.cache(client.put(job))
    terminated = {
        "containerStatuses": [{"name": "node", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
    }
    (real,) = create_chain(client.put, failed, training_runtime("rt"))
    real = client.put({**real, "status": {"phase": "Failed", **terminated}})
    stranger = {**copy.deepcopy(real), "status": {"phase": "Failed", **terminated}}
    stranger["metadata"] = {"name": "a-stranger", "namespace": NS, "labels": real["metadata"]["labels"]}
    for pod in (client.put(stranger), real):
        ctx.manager.cache(pod)
    await controller.reconcile(KEY)
    stored = client.stored(resources.Job, "j", NS)
    assert stored is not None
    log = stored["status"]["failureLog"]
    assert (log["podName"], log["tail"]) == (real["metadata"]["name"], f"log of {real['metadata']['name']}\n")
    assert read == [real["metadata"]["name"]]


# -- one write: Succeeded and the verdict the measurements already allow -----------------------------


async def test_a_verdict_the_final_measurement_allows_is_written_with_succeeded() -> None:
    """The workload completed and the bandwidth measurement is final with corrupted data: the
    Job's Succeeded, its ValidationFailed verdict and the failedNodes it implies are one write."""
    client, manager, controller = setup()
    spec = {"bandwidthMeasurement": {"logProfileRef": "nccl-bandwidth"}}
    job = make_job("n0", **spec)
    job["metadata"]["annotations"] = {Annotation.GROUP_NODES: "n0"}  # as the Workflow renders it
    completed = make_trainjob(job, "Complete")
    completed["status"]["conditions"][0]["message"] = "jobset completed"
    trainjob = client.put(completed)
    manager.cache(trainjob)
    manager.cache(client.put(with_workload(job, trainjob)))
    (wanted,) = [w for w in measurements.wanted(job) if w.kind == "BandwidthMeasurement"]
    complete = {"type": "Complete", "status": "True", "reason": "JobSucceeded", "message": "read"}
    final = {
        **wanted.body,
        "status": {"wrongValues": 3, "conditions": [{**complete, "lastTransitionTime": _now()}]},
    }
    manager.cache(client.put(final))
    await controller.reconcile(KEY)
    stored = client.stored(resources.Job, "j", NS)
    assert true_condition(stored) == (
        "Succeeded",
        "WorkloadCompleted",
        f"Workload TrainJob/{WORKLOAD} completed: jobset completed",
    )
    assert stored is not None
    message = (
        "nccl-tests found 3 wrong values (#wrong columns): the results are corrupted, whatever the bandwidth"
    )
    verdict = next(c for c in stored["status"]["conditions"] if c["type"] == "ValidationFailed")
    assert (verdict["status"], verdict["reason"], verdict["message"]) == ("True", "DataCorruption", message)
    assert [(e["name"], e["reason"], e["cause"]) for e in stored["status"]["failedNodes"]] == [
        ("n0", "WorkloadFailed", "DataCorruption")
    ]
    assert client.count("replace", "Job", "status") == 1
    assert [(e["type"], e["reason"]) for e in client.events] == [
        ("Normal", "WorkloadCompleted"),
        ("Warning", "DataCorruption"),
    ]


# -- timeoutPerJob: the Job times itself out and releases its workload ------------------------------


async def test_a_job_past_its_workflows_timeout_fails_itself_and_then_deletes_its_workload() -> None:
    """The Workflow's ``timeoutPerJob`` has passed since the workload started: the Job fails
    ``JobTimedOut`` with the launcher's log tail (read while the pod still exists), then deletes
    its workload, once."""

    async def tail(
        client: Any, pod: str, namespace: str, container: str | None, **_: int
    ) -> tuple[str, bool]:
        return "step 40\n", False

    client = FakeClient()
    clock = FakeClock(datetime(2026, 1, 1, 0, 0, 50, tzinfo=UTC))
    ctx = context(client, clock=clock)
    controller = JobController(ctx, tail_reader=tail)
    manager = ctx.manager
    assert isinstance(manager, FakeManager)
    flow = workflow("wf", NS, "pool", 1, orchestration={"execution": {"timeoutPerJob": "1m"}})
    flow["metadata"]["uid"] = "wf-uid"
    manager.cache(client.put(flow))
    job = make_job()
    job["metadata"]["ownerReferences"] = [
        {
            "apiVersion": flow["apiVersion"],
            "kind": "Workflow",
            "name": "wf",
            "uid": "wf-uid",
            "controller": True,
        }
    ]
    trainjob = client.put(make_trainjob(job))
    manager.cache(trainjob)
    running = with_workload(job, trainjob)
    running["status"]["workloadRef"]["uid"] = trainjob["metadata"]["uid"]
    running["status"]["workloadStartTime"] = "2026-01-01T00:00:00Z"
    manager.cache(client.put(running))
    (pod,) = create_chain(client.put, trainjob, training_runtime("rt"))
    manager.cache(client.put({**pod, "status": {"phase": "Running"}}))
    result = await controller.reconcile(KEY)  # 50 s of the minute have run
    assert true_condition(client.stored(resources.Job, "j", NS)) == RUNNING
    assert result is not None and result.requeue_after == pytest.approx(10.1), "woken just after its deadline"
    clock.step(10)
    await controller.reconcile(KEY)
    stored = client.stored(resources.Job, "j", NS)
    assert true_condition(stored) == ("Failed", "JobTimedOut", "Job exceeded timeoutPerJob")
    assert stored is not None
    log = stored["status"]["failureLog"]
    assert (log["reason"], log["podName"], log["tail"]) == ("Timeout", pod["metadata"]["name"], "step 40\n")
    assert [(e["type"], e["reason"], e["note"]) for e in client.events] == [
        ("Warning", "JobTimedOut", "Job exceeded timeoutPerJob")
    ]
    assert client.stored(resources.TrainJob, WORKLOAD, NS) is None, "a failed Job's workload goes"
    manager.cache(trainjob, "DELETED")
    manager.cache(stored, "MODIFIED")  # its own watch event brings the failed Job back
    await controller.reconcile(KEY)
    assert client.count("delete", "TrainJob") == 1, "deleted once"


async def test_a_pass_that_rereads_the_job_live_creates_its_measurements_once() -> None:
    """The cached Job's workload completed: the pass goes on with the live Job, and does not
    POST the measurement it has just created again."""
    client, manager, controller = setup()
    job = make_job(bandwidthMeasurement={"logProfileRef": "nccl-bandwidth"})
    trainjob = client.put(make_trainjob(job, "Complete"))
    manager.cache(trainjob)
    manager.cache(client.put(with_workload(job, trainjob)))
    await controller.reconcile(KEY)
    assert true_condition(client.stored(resources.Job, "j", NS))[0] == "Succeeded"
    assert client.count("get", "Job") == 1
    assert client.count("create", "BandwidthMeasurement") == 1
