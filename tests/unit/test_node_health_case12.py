"""spec/measurements.md section 6, acceptance case 12(a): the CEL node-health expression.

cel-python has no static types, so a non-boolean expression is found when it is evaluated, not
compiled; the outcome is the spec's for an expression that does not compile to bool: no node is
failed, and the whole check raises the error for the Job controller to report.
"""

from __future__ import annotations

import pytest

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
