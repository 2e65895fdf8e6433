"""The Workflow controller's reconcile on a fake client that can fail any call or stop before
any write: retries survive a kill, events follow the write once, Job-scoped copies get their
owner, and every node ends in exactly one of the two result lists.

The test plays the Job controller (it ends Jobs by writing their status); the real API server
tests of the same behaviours are in tests/integration/test_workflow_results.py.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube.resources.core_v1 import ConfigMap, Node

from nvcre import resources
from nvcre.api.v1alpha1.constants import Finalizer
from nvcre.conditions import condition_true
from nvcre.controllers.workflow import partitioning
from nvcre.controllers.workflow.controller import WorkflowController
from nvcre.controllers.workflow.resolving import ResolveKey
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.objects import ObjectKey
from nvcre.render.workflow import resolve_workflow
from nvcre.testing.builders import override
from nvcre.testing.fakeclient import FakeClient, Stopped, api_error, context
from nvcre.testing.nodes import GpuNodeSpec, gpu_node
from nvcre.testing.workloads import POOL_LABEL, workflow

pytestmark = pytest.mark.asyncio

NS = "team"
KEY = ObjectKey(NS, "wf")


def condition(type_: str, reason: str, message: str) -> dict[str, str]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": type_, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}


class Harness:
    def __init__(
        self,
        nodes: int,
        num_nodes: int,
        *,
        cordoned: int = 0,
        dependencies: list[dict[str, Any]] | None = None,
        **orchestration: Any,
    ) -> None:
        self.client = FakeClient()
        self.controller = WorkflowController(context(self.client, follow=True))
        self.nodes = [f"node-{i}" for i in range(nodes)]
        for i, name in enumerate(self.nodes + [f"cordoned-{i}" for i in range(cordoned)]):
            spec = GpuNodeSpec(labels={POOL_LABEL: "pool"}, unschedulable=i >= nodes)
            self.client.put(gpu_node(name, spec).to_dict())
        self.client.put(
            workflow("wf", NS, "pool", num_nodes, orchestration=orchestration, dependencies=dependencies)
        )
        self.errors: list[Exception] = []

    @property
    def workflow(self) -> dict[str, Any]:
        found = self.client.stored(resources.Workflow, "wf", NS)
        assert found is not None
        return found

    @property
    def groups(self) -> list[dict[str, Any]]:
        return list(((self.workflow.get("status") or {}).get("orchestration") or {}).get("groups") or [])

    def job(self, name: str) -> dict[str, Any] | None:
        return self.client.stored(resources.Job, name, NS)

    def release_deleted_jobs(self) -> None:
        """Stand in for the Job controller (not run here): a Job being deleted loses the finalizer
        its Workflow created it with, and goes."""
        for key, obj in list(self.client.objects.items()):
            if key[1] == "Job" and obj["metadata"].get("deletionTimestamp"):
                finalizers = [f for f in obj["metadata"].get("finalizers") or () if f != Finalizer.JOB]
                if finalizers:
                    obj["metadata"]["finalizers"] = finalizers
                else:
                    del self.client.objects[key]

    async def drive(self, until: Callable[[], object], passes: int = 40) -> None:
        """Reconcile (as the work queue would, errors requeue) until ``until()`` holds."""
        for _ in range(passes):
            self.release_deleted_jobs()
            if until():
                return
            try:
                await self.controller.reconcile(KEY)
            except Exception as error:  # the work queue retries with backoff
                self.errors.append(error)
        assert until(), f"not reached after {passes} passes; errors: {self.errors[-3:]}"

    def terminal(self) -> bool:
        return condition_true(self.workflow, "Succeeded") or condition_true(self.workflow, "Failed")

    def end_job(
        self, name: str, *, failed: bool, failed_nodes: list[str] | None = None, **status: Any
    ) -> None:
        """What the Job controller writes when its workload ends (failedNodes: every group node)."""
        job = self.job(name)
        assert job is not None, name
        group_nodes = job["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"].split(",")
        kind, reason, message = (
            ("Failed", "WorkloadFailed", "rank 0 exited with code 1")
            if failed
            else ("Succeeded", "WorkloadCompleted", "done")
        )
        job["status"] = {
            "conditions": [condition(kind, reason, message)],
            **status,
        }
        if failed:
            named = group_nodes if failed_nodes is None else failed_nodes
            job["status"]["failedNodes"] = [
                {"name": n, "reason": "WorkloadFailed", "message": message} for n in named
            ]
        self.client.put(job)

    def payload(self, name: str, key: str) -> bytes | None:
        config_map = self.client.stored(ConfigMap, name, NS)
        if config_map is None:
            return None
        return gzip.decompress(base64.b64decode(config_map["binaryData"][key]))

    def results(self) -> tuple[list[str], list[dict[str, str]]]:
        uid8 = self.workflow["metadata"]["uid"][:8]
        succeeded = self.payload(f"succeeded-nodes-{uid8}", "succeeded-nodes.csv.gz")
        failed = self.payload(f"failed-nodes-{uid8}", "failed-nodes.json.gz")
        return (
            succeeded.decode().split(",") if succeeded else [],
            json.loads(failed) if failed else [],
        )

    def assert_every_node_in_exactly_one_list(self) -> None:
        succeeded, failed = self.results()
        for entry in failed:  # what a consumer of the record (NVSentinel's monitor) relies on
            assert isinstance(entry["name"], str) and isinstance(entry["message"], str), entry
            assert entry["reason"] in ("HardwareFailureDetected", "ThresholdViolation", "WorkloadFailed"), (
                entry
            )
        failed_names = {e["name"] for e in failed}
        for group in self.groups:
            for node in group["nodes"]:
                assert (node in succeeded) != (node in failed_names), (
                    f"{node} of {group['name']} ({group['phase']}): succeeded={succeeded} failed={failed}"
                )
        status = self.workflow["status"]
        if succeeded:
            assert status["succeededNodesRef"]["name"].startswith("succeeded-nodes-")
        if failed:
            assert status["failedNodesRef"]["name"].startswith("failed-nodes-")


def running(h: Harness, *names: str) -> Callable[[], bool]:
    """The named Jobs exist and the status names each on a Running group."""

    def check() -> bool:
        refs = {g.get("jobRef", {}).get("name") for g in h.groups if g["phase"] == "Running"}
        return all(h.job(n) is not None and n in refs for n in names)

    return check


def replaced(h: Harness, job: dict[str, Any]) -> Callable[[], bool]:
    """A new Job of that name runs (the old one was retried), or the Workflow ended."""

    def check() -> bool:
        live = h.job(job["metadata"]["name"])
        renewed = live is not None and live["metadata"]["uid"] != job["metadata"]["uid"]
        return (renewed and h.groups[0]["phase"] == "Running") or h.terminal()

    return check


async def _retry_with_a_stop_before_write(stop: int) -> bool:
    """One run whose failed group is retried, the controller stopped before the ``stop``-th
    write after the failure and restarted; True when it did stop."""
    h = Harness(1, 1, execution={"retryFailedGroups": 1})
    await h.drive(running(h, "wf-job"))
    first = h.job("wf-job")
    assert first is not None
    h.end_job("wf-job", failed=True)
    h.client.stop_at = h.client.writes + stop
    stopped = False
    try:
        await h.drive(lambda: False, passes=10)
    except Stopped:
        stopped = True
    except AssertionError:
        pass  # never stopped: the retry needed fewer writes
    h.client.stop_at = None
    await h.drive(replaced(h, first))
    assert h.groups[0]["phase"] == "Running" and h.groups[0]["retries"] == 1, (stop, h.groups)
    h.end_job("wf-job", failed=False)
    await h.drive(h.terminal)
    assert condition_true(h.workflow, "Succeeded"), (stop, h.workflow["status"]["conditions"])
    return stopped


async def test_a_kill_before_any_write_never_loses_a_retry() -> None:
    """Fail a group with one retry left and stop the controller before each write in turn:
    the restarted controller always retries it (retries=1, a new Job) and ends Succeeded."""
    stops = [await _retry_with_a_stop_before_write(stop) for stop in range(1, 12)]
    assert sum(stops) >= 3


async def test_the_attempt_that_ends_a_group_decides_where_its_nodes_are_listed() -> None:
    h = Harness(2, 2, execution={"retryFailedGroups": 1})
    await h.drive(running(h, "wf-job"))
    first = h.job("wf-job")
    assert first is not None
    h.end_job("wf-job", failed=True)
    await h.drive(
        lambda: (j := h.job("wf-job")) is not None and j["metadata"]["uid"] != first["metadata"]["uid"]
    )
    h.end_job("wf-job", failed=False)
    await h.drive(h.terminal)
    assert condition_true(h.workflow, "Succeeded")
    assert h.results() == (h.nodes, [])
    h.assert_every_node_in_exactly_one_list()


async def test_partitioning_events_follow_the_status_write_once() -> None:
    h = Harness(2, 1, cordoned=1)
    conflicts = h.client.fail("replace", "Workflow", api_error(409), subresource="status")
    await h.drive(lambda: h.groups)
    assert conflicts, "the first status write conflicted"
    cordoned = [e for e in h.client.events if e["reason"] == "CordonedNodesExcluded"]
    assert len(cordoned) == 1, [e["note"] for e in cordoned]
    reasons = [e["reason"] for e in h.client.events]
    assert reasons.index("GroupsPartitioned") < reasons.index("CordonedNodesExcluded"), (
        "emitted after the write that records the decision"
    )


@pytest.mark.parametrize("code", [409, 500, 429])
async def test_a_job_scoped_copy_always_gets_its_job_as_owner(code: int) -> None:
    """The Job is created first and its copy names it as owner in the copy's one create (no
    patch afterwards), through a failed create of the copy."""
    h = Harness(1, 1)
    failures = h.client.fail("create", "TrainingRuntime", api_error(code))
    await h.drive(running(h, "wf-job"))
    job = h.job("wf-job")
    copies = h.client.all(resources.TrainingRuntime, NS)
    assert failures and job is not None and len(copies) == 1
    assert h.client.count("patch", "TrainingRuntime") == 0
    assert job["metadata"]["uid"] in [o["uid"] for o in copies[0]["metadata"].get("ownerReferences") or ()], (
        "the copy is garbage-collected with its Job"
    )


async def test_result_config_maps_are_written_through_any_number_of_conflicts() -> None:
    h = Harness(2, 1)
    await h.drive(running(h, "wf-group-0-iter-1", "wf-group-1-iter-1"))
    conflicts = h.client.fail(("create", "replace"), "ConfigMap", *[api_error(409)] * 12)
    h.end_job("wf-group-0-iter-1", failed=True)
    h.end_job("wf-group-1-iter-1", failed=False)
    await h.drive(h.terminal)
    assert len(conflicts) == 12
    assert h.results() == (
        ["node-1"],
        [
            {
                "name": "node-0",
                "reason": "WorkloadFailed",
                "cause": "WorkloadFailed",
                "message": "rank 0 exited with code 1",
            }
        ],
    )
    h.assert_every_node_in_exactly_one_list()


def hardware_failed(h: Harness, job_name: str, node: str) -> None:
    """What the Job controller writes when the node-health check fails ``node``."""
    job = h.job(job_name)
    assert job is not None
    job["status"] = {
        "conditions": [
            condition(
                "HardwareFailed", "HardwareFailureDetected", f"Hardware failure detected on node(s): [{node}]"
            )
        ],
        "failedNodes": [
            {
                "name": node,
                "reason": "HardwareFailureDetected",
                "message": "Hardware failure detected by node health check",
            }
        ],
    }
    h.client.put(job)


async def test_every_node_ends_in_exactly_one_result_list() -> None:
    """Five groups: succeeded, failed, Job deleted, hardware failure on one of two nodes,
    timed out (by its Job); plus an overflow-free partition of ten nodes into pairs. Isolation
    off: each group's own entries are the record."""
    h = Harness(10, 2, execution={"timeoutPerJob": "1h"}, isolation="Off")
    names = [f"wf-group-{i}-iter-1" for i in range(5)]
    await h.drive(running(h, *names))
    h.end_job(names[0], failed=False)
    h.end_job(names[1], failed=True)
    h.client.objects.pop(("nvcre.nvidia.com", "Job", NS, names[2]))
    h.controller.caches.created.seen(NS, names[2])  # its watch event (this cache sends none)
    hardware_failed(h, names[3], "node-7")
    job = h.job(names[4])
    assert job is not None
    # what the Job controller writes once its Workflow's timeoutPerJob has passed
    job["status"] = {"conditions": [condition("Failed", "JobTimedOut", "Job exceeded timeoutPerJob")]}
    h.client.put(job)
    await h.drive(h.terminal)
    assert [g["phase"] for g in h.groups] == ["Succeeded", "Failed", "Failed", "Failed", "Failed"]
    h.assert_every_node_in_exactly_one_list()
    succeeded, failed = h.results()
    assert succeeded == ["node-0", "node-1"]
    assert {(e["name"], e["reason"], e["cause"]) for e in failed} == {
        ("node-2", "WorkloadFailed", "WorkloadFailed"),
        ("node-3", "WorkloadFailed", "WorkloadFailed"),
        ("node-4", "WorkloadFailed", "JobDeleted"),
        ("node-5", "WorkloadFailed", "JobDeleted"),
        ("node-6", "WorkloadFailed", "WorkloadFailed"),
        ("node-7", "HardwareFailureDetected", "HardwareFailureDetected"),
        ("node-8", "WorkloadFailed", "JobTimedOut"),
        ("node-9", "WorkloadFailed", "JobTimedOut"),
    }
    deleted = next(e for e in failed if e["name"] == "node-4")
    assert deleted["message"] == f'Job "{names[2]}" was deleted before it finished'
    bystander = next(e for e in failed if e["name"] == "node-6")
    assert bystander["message"] == f'Job "{names[3]}" failed: Hardware failure detected on node(s): [node-7]'


async def test_isolation_clears_the_partner_of_a_hardware_failure() -> None:
    """The hardware report names its node at once; the partner is re-tested with a node of the
    passing pair, passes, and is succeeded, not blamed with it."""
    h = Harness(4, 2)
    names = [f"wf-group-{i}-iter-1" for i in range(2)]
    await h.drive(running(h, *names))
    h.end_job(names[0], failed=False)
    hardware_failed(h, names[1], "node-3")
    await h.drive(running(h, "wf-isolate-0-iter-1"))
    assert [(g["name"], g["nodes"], g["suspect"]) for g in h.groups] == [
        ("isolate-0", ["node-2", "node-0"], "node-2")
    ]
    assert [e["name"] for e in h.results()[1]] == ["node-3"], "the hardware report, recorded at once"
    h.end_job("wf-isolate-0-iter-1", failed=False)
    await h.drive(h.terminal)
    assert [g["name"] for g in h.groups] == ["group-0", "group-1"], "the iteration's groups, restored"
    h.assert_every_node_in_exactly_one_list()
    succeeded, failed = h.results()
    assert succeeded == ["node-0", "node-1", "node-2"]
    assert [(e["name"], e["reason"]) for e in failed] == [("node-3", "HardwareFailureDetected")]
    isolation = h.workflow["status"]["orchestration"]["isolation"]
    assert (isolation["stage"], isolation["clearedNodes"], isolation.get("failedNodes")) == (
        "Complete",
        ["node-2"],
        None,
    )


async def test_a_node_that_failed_in_an_earlier_iteration_is_not_reported_succeeded() -> None:
    h = Harness(1, 1, iterations=2)
    await h.drive(running(h, "wf-group-0-iter-1"))
    h.end_job("wf-group-0-iter-1", failed=True)
    await h.drive(running(h, "wf-group-0-iter-2"))
    assert h.job("wf-group-0-iter-1") is None, "an earlier iteration's Job is deleted"
    h.end_job("wf-group-0-iter-2", failed=False)
    await h.drive(h.terminal)
    assert condition_true(h.workflow, "Failed")
    assert h.results()[0] == [] and [e["name"] for e in h.results()[1]] == ["node-0"]
    h.assert_every_node_in_exactly_one_list()


async def test_a_dependency_whose_name_is_held_by_an_object_being_deleted_waits_for_it() -> None:
    """Spec §1.7: a foreign holder on its way out is a retry, not a name collision."""
    dependency = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}
    h = Harness(1, 1, dependencies=[dependency])
    holder = h.client.put(
        {
            **dependency,
            "metadata": {
                "name": "cfg",
                "namespace": NS,
                "finalizers": ["example.com/hold"],
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            },
        }
    )
    await h.drive(lambda: h.groups)
    await h.drive(lambda: h.client.count("create", "ConfigMap") >= 2)  # tried again, not failed
    assert not h.terminal()
    h.client.objects.pop(("", "ConfigMap", NS, "cfg"))  # its finalizer is released
    await h.drive(running(h, "wf-job"))
    live = h.client.stored(ConfigMap, "cfg", NS)
    assert live is not None and live["metadata"]["uid"] != holder["metadata"]["uid"]
    assert live["metadata"]["annotations"]["nvcre.nvidia.com/workflow-uid"] == h.workflow["metadata"]["uid"]


async def test_a_job_just_created_is_not_read_while_the_cache_lags_behind_its_create() -> None:
    """The Job cache has not seen the Jobs of the launch yet: the next pass reads none of them
    (their watch events bring the Workflow back); once one's event has come, a miss is read."""
    h = Harness(2, 1)
    await h.drive(running(h, "wf-group-0-iter-1", "wf-group-1-iter-1"))
    lagging = {key: h.client.objects.pop(key) for key in list(h.client.objects) if key[1] == "Job"}
    await h.controller.reconcile(KEY)
    assert h.client.count("get", "Job") == 0
    assert [g["phase"] for g in h.groups] == ["Running", "Running"]
    h.client.objects.update(lagging)
    h.client.objects.pop(("nvcre.nvidia.com", "Job", NS, "wf-group-0-iter-1"))
    h.controller.caches.created.seen(NS, "wf-group-0-iter-1")  # its watch event came: ADDED, DELETED
    await h.controller.reconcile(KEY)
    assert h.client.count("get", "Job") == 1
    assert h.groups[0]["phase"] == "Failed"


BLOCK = "example.com/block"
SPREAD = override(
    {"topology": {"domainCount": {"greaterThan": 1}}},
    job_template={"metadata": {"labels": {"example.com/spread": "blocks"}}},
)


def _relabel(h: Harness, name: str, **changes: Any) -> None:
    """Change node ``name`` as its kubelet or an operator would (``labels`` merged, ``status`` set)."""
    node = h.client.stored(Node, name)
    assert node is not None
    node["metadata"]["labels"].update(changes.get("labels") or {})
    if "status" in changes:
        node["status"] = {**node.get("status", {}), **changes["status"]}
    h.client.put(node)


async def test_the_overrides_are_resolved_once_per_change_of_what_they_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The passes of a running Workflow (each Job, pod and status event brings one) resolve its
    overrides once; a node's status changing (a heartbeat) costs no resolution, a label an
    override reads does, and the next Job sees it: here the second iteration's Job, once the
    group's nodes span two topology blocks."""
    resolutions: list[str | None] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        resolutions.append(kwargs.get("platform"))
        return resolve_workflow(*args, **kwargs)

    monkeypatch.setattr(partitioning, "resolve_workflow", counting)
    h = Harness(2, 2, iterations=2, topology={"topologyKey": BLOCK})
    for name in h.nodes:
        _relabel(h, name, labels={BLOCK: "a"})
    stored = h.workflow
    stored["spec"]["overrides"] = [SPREAD]
    h.client.put(stored)

    await h.drive(running(h, "wf-group-0-iter-1"))
    partitioned = len(resolutions)
    for _ in range(5):
        await h.controller.reconcile(KEY)
    _relabel(h, h.nodes[0], status={"conditions": [{"type": "Ready", "status": "True"}]})
    await h.controller.reconcile(KEY)
    first = h.job("wf-group-0-iter-1")
    assert first is not None and "example.com/spread" not in first["metadata"]["labels"]
    assert len(resolutions) == partitioned, "passes that change nothing the overrides read resolve nothing"

    _relabel(h, h.nodes[1], labels={BLOCK: "b"})
    h.end_job("wf-group-0-iter-1", failed=False)
    await h.drive(running(h, "wf-group-0-iter-2"))
    second = h.job("wf-group-0-iter-2")
    assert second is not None and second["metadata"]["labels"].get("example.com/spread") == "blocks"
    assert len(resolutions) == partitioned + 1, "a label the overrides read changed: resolved once more"

    h.end_job("wf-group-0-iter-2", failed=False)
    await h.drive(h.terminal)
    assert len(h.controller.resolved) == 0, "an ended Workflow's resolution is dropped"


async def test_the_resolution_key_holds_what_the_resolution_reads_and_nothing_else() -> None:
    h = Harness(2, 2)
    node = h.client.stored(Node, h.nodes[0])
    assert node is not None

    def key(workflow: dict[str, Any], nodes: list[dict[str, Any]], **detected: str) -> ResolveKey:
        state = WorkflowState.of(h.controller.ctx, h.controller.caches, workflow)
        state.orchestration.update(
            {"detectedPlatform": "aws", "detectedGPUArchitecture": "hopper", **detected}
        )
        return ResolveKey.of(state, nodes)

    before = key(h.workflow, [node])
    heartbeat = copy.deepcopy(node)
    heartbeat["metadata"]["resourceVersion"] = "999"
    heartbeat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    heartbeat["status"]["allocatable"] = {"nvidia.com/gpu": "4"}
    assert key(h.workflow, [heartbeat]) == before

    relabelled = copy.deepcopy(node)
    relabelled["metadata"]["labels"][BLOCK] = "b"
    moved = copy.deepcopy(node)
    moved["spec"]["providerID"] = "gce://p/z/n"
    edited = h.workflow
    edited["metadata"]["generation"] = int(edited["metadata"].get("generation") or 1) + 1
    assert key(h.workflow, [relabelled]) != before
    assert key(h.workflow, [moved]) != before
    assert key(h.workflow, []) != before, "a node gone from the cache"
    assert key(edited, [node]) != before, "the spec changed"
    assert key(h.workflow, [node], detectedPlatform="gcp") != before
    assert key(h.workflow, [node], detectedGPUArchitecture="blackwell") != before
    node["metadata"]["labels"][BLOCK] = "c"  # an informer that updates its dict in place
    assert key(h.workflow, [node]) != before


async def _delete_after_a_stop_before_write(stop: int) -> tuple[bool, list[str]]:
    """A Workflow with two dependencies, the controller stopped before its ``stop``-th write
    (a create of a dependency, or the status write that records one), the Workflow then deleted
    and the controller started again: (whether it stopped, the dependencies left)."""
    dependencies = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}}
        for name in ("first", "second")
    ]
    h = Harness(1, 1, dependencies=dependencies)
    h.client.stop_at = h.client.writes + stop
    stopped = False
    try:
        await h.drive(lambda: h.job("wf-job") is not None, passes=10)
    except Stopped:
        stopped = True
    h.client.stop_at = None
    await h.client.delete(resources.Workflow, "wf", namespace=NS)
    await h.drive(lambda: h.client.stored(resources.Workflow, "wf", NS) is None)
    left = [name for name in ("first", "second") if h.client.stored(ConfigMap, name, NS) is not None]
    return stopped, left


async def test_a_workflow_deleted_after_a_stop_between_a_create_and_its_record_leaves_nothing() -> None:
    """Each dependency is created, then recorded in the status: a Workflow deleted after a stop
    between the two (a 409 from the deletion itself, a kill) still deletes every dependency it
    made, recorded or not (stops 4 and 6 left one behind before; a loaded CI run met it)."""
    runs = [await _delete_after_a_stop_before_write(stop) for stop in range(1, 10)]
    assert all(stopped for stopped, _ in runs)
    assert [left for _, left in runs] == [[]] * len(runs)
