"""The retention of NodeRecords on the real API server: a manager started with
``--node-record-retention=1s`` deletes the record of a Node that was deleted (its newest result
is older than a second) and keeps the records of the Nodes that exist, however old; a Node deleted
while no manager runs loses its record at the next start.

The records are the real manager's, written when a Workflow ends (the test plays Kubeflow Trainer
and the measurement controller, as test_node_records does); the Nodes are the test's own pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Node

from nvcre import resources
from nvcre.testing.audit import by_manager
from nvcre.testing.builders import new_pool
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import jobs_of, wait_true
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.measured import BANDWIDTH, complete_bandwidth, finish
from nvcre.testing.records import record
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import workflow


def present(kube: Client, nodes: list[str]) -> list[str]:
    """Which of ``nodes`` have a record (one list of them all: one view of one moment)."""
    names = {r.metadata.name for r in kube.list(resources.NodeRecord) if r.metadata}
    return [n for n in nodes if n in names]


def run_pairs(kube: Client, namespace: str, pool: str, name: str) -> dict[str, Any]:
    """A Workflow of two 2-node groups on ``pool``, both passing; the ended Workflow."""
    body = workflow(name, namespace, pool, 2, job_spec=BANDWIDTH, orchestration={"isolation": "Off"})
    kube.create(resources.Workflow.from_dict(body))
    jobs = [f"{name}-group-0-iter-1", f"{name}-group-1-iter-1"]
    wait_for(lambda: sorted(jobs_of(kube, namespace, name)) == jobs, 60, what=f"the Jobs of {name}")
    for job, bus in zip(jobs, (["480.00"], ["470.00"]), strict=True):
        finish(kube, namespace, job)
        complete_bandwidth(kube, namespace, job, bus)
    return wait_true(kube, resources.Workflow, name, namespace, "Succeeded")


def record_deletes(control_plane: ControlPlane, nodes: list[str]) -> list[tuple[str, int]]:
    """The manager's deletes of the nodes' records: (name, response code), in order."""
    out = []
    for event in by_manager(control_plane.audit_events()):
        ref = event.get("objectRef") or {}
        if (
            event.get("verb") == "delete"
            and ref.get("resource") == "noderecords"
            and ref.get("name") in nodes
        ):
            out.append((str(ref["name"]), int((event.get("responseStatus") or {}).get("code") or 0)))
    return out


def audited_with(
    control_plane: ControlPlane, nodes: list[str], delete: tuple[str, int]
) -> list[tuple[str, int]] | None:
    """The manager's deletes of the nodes' records once ``delete`` is among them (then compared
    whole, so that a failure shows every one)."""
    found = record_deletes(control_plane, nodes)
    return found if delete in found else None


def decided(deletes: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The deletes that took effect. A 409 is a record written after the pass decided (its delete
    carries the version decided on as a precondition), kept and decided again; only a gone
    node's record may be decided on at all, which the caller's comparison of the rest checks."""
    conflicted = {name for name, code in deletes if code == 409}
    effective = [(name, code) for name, code in deletes if code != 409]
    assert conflicted <= {name for name, _ in effective}, deletes  # never a live node's
    return effective


def test_the_record_of_a_deleted_node_goes_after_the_retention_and_a_live_nodes_stays(
    kube: Client, namespace: str, gpu_nodes: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    pool, nodes = new_pool(gpu_nodes, 4)
    manager = ManagerProcess(
        control_plane, tmp_path, name="retention-manager", extra_args=("--node-record-retention=1s",)
    ).start()
    try:
        wf = run_pairs(kube, namespace, pool, "ret")
        wait_for(
            lambda: all((record(kube, n) or {}).get("status", {}).get("categories") for n in nodes),
            60,
            what=f"the records of {nodes}",
        )
        end = next(c for c in wf["status"]["conditions"] if c["type"] == "Succeeded")["lastTransitionTime"]
        first, second, *live = nodes
        # The records outlive their Workflow. (While an ended Workflow exists, the manager writes
        # a missing record of its nodes again whenever it reconciles it, e.g. at a start, and a
        # pass deletes it again: a churn that would blur the counts below.)
        kube.delete(resources.Workflow, "ret", namespace=namespace)
        wait_for(lambda: not list(kube.list(resources.Workflow, namespace=namespace)), 60, what="ret gone")
        assert present(kube, nodes) == nodes

        # Deleting a Node wakes the pass: its record (newest result at the Workflow's end, more
        # than a second ago) goes. The same pass, one decision over every record, kept the
        # others: their Nodes exist, and their results are as old.
        kube.delete(Node, first)
        wait_for(lambda: present(kube, nodes) == [second, *live], 60, what=f"{first}'s record gone alone")
        deletes = [(first, 200)]
        audited = wait_for(
            lambda: audited_with(control_plane, nodes, deletes[-1]), 60, what="the delete audited"
        )
        assert decided(audited) == deletes, audited
        # The whole log, not its tail: a manager of all namespaces also logs other tests' objects.
        [logged] = wait_for(
            lambda: manager.log_lines(f"Deleted the NodeRecord of node {first}:"),
            60,
            what="the deletion logged",
        )
        assert (
            f"Deleted the NodeRecord of node {first}: Node {first} is gone and its newest result was "
            f"{end}, at least the retention (1s) ago"
        ) in logged

        # A Node deleted while no manager runs: the first pass after the start deletes its record,
        # and again only its.
        manager.stop()
        kube.delete(Node, second)
        manager.start()
        wait_for(lambda: present(kube, nodes) == live, 60, what=f"{second}'s record gone at the start")
        deletes.append((second, 200))
        audited = wait_for(
            lambda: audited_with(control_plane, nodes, deletes[-1]), 60, what="its delete audited"
        )
        assert decided(audited) == deletes, audited

        # The live nodes' records are whole, untouched by the passes.
        for node in live:
            kept = record(kube, node) or {}
            [history] = kept["status"]["categories"]
            assert [r["workflow"]["uid"] for r in history["results"]] == [wf["metadata"]["uid"]]
        assert decided(record_deletes(control_plane, nodes)) == deletes  # never a live node's
    finally:
        manager.stop()
