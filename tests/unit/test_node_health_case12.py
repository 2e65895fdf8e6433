"""spec/measurements.md section 6, acceptance case 12(a): the CEL node-health expression.

cel-python has no static types, so a non-boolean expression is found when it is evaluated, not
compiled; the outcome is the spec's for an expression that does not compile to bool: no node is
failed, and the whole check raises the error for the Job controller to report.
"""

from __future__ import annotations

import pytest

from nvcre import yamlio
from nvcre.api.v1alpha1.constants import Default
from nvcre.catalog.loader import ENTRIES_DIR
from nvcre.catalog.templating import LIB_DIR, Templates
from nvcre.cel import CELError
from nvcre.health.nodes import unhealthy_nodes

NOT_READY = {
    "metadata": {"name": "node-not-ready"},
    "status": {"conditions": [{"type": "Ready", "status": "False"}]},
}
BARE = {"metadata": {"name": "bare"}}


def test_a_not_ready_node_fails_the_documented_expression() -> None:
    expression = "node.status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')"
    assert unhealthy_nodes(expression, [NOT_READY, BARE]).failing == ["node-not-ready"]


def test_a_node_without_labels_is_healthy_for_a_label_expression_without_an_error() -> None:
    verdict = unhealthy_nodes("'gpud.nvidia.com/unhealthy' in node.metadata.labels", [BARE])
    assert (verdict.failing, verdict.errors) == ([], {})


def test_an_expression_that_is_not_a_boolean_fails_no_node_and_says_why() -> None:
    with pytest.raises(CELError) as raised:
        unhealthy_nodes("node.metadata.name", [NOT_READY])
    assert (raised.value.kind, raised.value.error) == ("type", "must evaluate to bool, got string")


READY = {"type": "Ready", "status": "True", "reason": "KubeletReady"}


def _node(name: str, **parts: object) -> dict[str, object]:
    spec = parts.get("spec", {})
    conditions = [READY, *parts.get("conditions", [])]  # type: ignore[list-item]
    return {
        "metadata": {"name": name, "labels": parts.get("labels", {})},
        "spec": spec,
        "status": {"conditions": conditions},
    }


def test_the_default_expression_sees_what_gpu_health_agents_write() -> None:
    """A cordon, NotReady (False or the node controller's Unknown), NVSentinel's condition, gpud's
    label and a GPU-health taint are each a hardware failure; a healthy node with the usual
    taints and conditions is not."""
    nodes = [
        _node("cordoned", spec={"unschedulable": True}),
        _node("not-ready", conditions=[{"type": "Ready", "status": "False"}]),
        {**_node("unreachable"), "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
        _node("nvsentinel", conditions=[{"type": "NVSentinelGPUHealthy", "status": "False"}]),
        _node("gpud", labels={"gpud.nvidia.com/unhealthy": "true"}),
        _node(
            "tainted",
            spec={"taints": [{"key": "gpu.health/error", "value": "xid-79", "effect": "NoSchedule"}]},
        ),
        _node("evicting", spec={"taints": [{"key": "nvidia.com/gpu-health", "effect": "NoExecute"}]}),
        _node(
            "healthy",
            labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            conditions=[
                {"type": "NVSentinelGPUHealthy", "status": "True"},
                {"type": "MemoryPressure", "status": "False"},
            ],
            spec={
                "taints": [
                    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {"key": "gpu.health/error", "effect": "PreferNoSchedule"},
                ]
            },
        ),
    ]
    verdict = unhealthy_nodes(Default.NODE_HEALTH_EXPRESSION, nodes)
    assert verdict.errors == {}
    assert verdict.failing == sorted(str(n["metadata"]["name"]) for n in nodes[:-1])  # type: ignore[index]


def test_the_catalog_renders_the_default_expression() -> None:
    """Catalog templates take the expression from the one default, never a copy."""
    rendered = Templates(ENTRIES_DIR).render(f"{LIB_DIR}/common/node-health.yaml", {})
    assert yamlio.load(rendered) == {
        "nodeHealthMonitor": {"cel": {"expression": Default.NODE_HEALTH_EXPRESSION}}
    }
