"""NVCRE never modifies a node: checked over the whole session (this module runs last).

The session-wide ``node_guard`` has watched every Node since the first integration test; any
version of a Node whose managedFields name ``nvcre-manager`` is a violation. The probe test
shows the guard catches such a write (a label and a cordon made under that field manager).
"""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Node

from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.nodeguard import MANAGER_FIELD_MANAGER, PROBE_LABEL, NodeGuard
from nvcre.testing.nodes import GpuNodeSpec
from nvcre.testing.waiting import wait_for


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


def test_nvcre_never_modified_a_node(node_guard: NodeGuard) -> None:
    node_guard.sweep()
    assert node_guard.observed > 0, "the guard saw no Node at all"
    assert node_guard.violations == [], "\n".join(node_guard.violations)
