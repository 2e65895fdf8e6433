"""NVCRE never modifies a node: checked over the whole session (this module runs last).

The session-wide ``node_guard`` has watched every Node since the first integration test; any
version of a Node whose managedFields name ``nvcre-manager`` is a violation. The probe test
shows the guard catches such a write (a label and a cordon made under that field manager). So
that the check means something when this module runs alone too, it runs a Workflow of its own
on nodes one of which is cordoned meanwhile.
"""

from __future__ import annotations

from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Node

from nvcre import resources
from nvcre.testing.builders import pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_workflow_jobs, wait_true
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.nodeguard import MANAGER_FIELD_MANAGER, PROBE_LABEL, NodeGuard
from nvcre.testing.nodes import GpuNodeSpec
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name, workflow


def test_the_guard_sees_a_write_by_the_manager(
    control_plane: ControlPlane, node_guard: NodeGuard, gpu_nodes: Any
) -> None:
    (node,) = gpu_nodes(1, GpuNodeSpec(labels={PROBE_LABEL: "true"}))
    name = node.metadata.name
    probe = NodeGuard(control_plane.client, ignore_probes=False).start()
    try:
        with control_plane.client(field_manager=MANAGER_FIELD_MANAGER) as as_manager:
            as_manager.patch(
                Node, name, {"metadata": {"labels": {"bad": "label"}}, "spec": {"unschedulable": True}}
            )
        wait_for(lambda: probe.violations, 10, what="the probe guard to see the write")
    finally:
        probe.stop()
    assert any(name in v for v in probe.violations)
    assert any(name in c for c in probe.changes)
    wait_for(lambda: node_guard.observed, 10, what="the session guard to be watching")
    assert not any(name in v for v in node_guard.violations), "the probe node is not a violation"


def test_a_workflow_reads_its_nodes_and_never_writes_them(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess, node_guard: NodeGuard
) -> None:
    pool = pool_name()
    nodes = sorted(n.metadata.name for n in gpu_nodes(3, pool_spec(pool)))
    kube.patch(Node, nodes[2], {"spec": {"unschedulable": True}})  # someone else cordons one
    kube.create(resources.Workflow.from_dict(workflow("reads", namespace, pool, 1)))
    finish_workflow_jobs(kube, namespace, "reads", 2)
    wf = wait_true(kube, resources.Workflow, "reads", namespace, "Succeeded")
    assert wf["status"]["orchestration"]["excludedNodes"] == [nodes[2]]
    node_guard.sweep()
    assert {n for n in nodes if any(n in c for c in node_guard.changes)} == {nodes[2]}, node_guard.changes


def test_nvcre_never_modified_a_node(node_guard: NodeGuard) -> None:
    node_guard.sweep()
    assert node_guard.observed > 0, "the guard saw no Node at all"
    assert node_guard.violations == [], "\n".join(node_guard.violations)
