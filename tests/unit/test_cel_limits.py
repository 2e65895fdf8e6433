"""Bounded CEL: too long, too many or too deeply nested macros and too deep expressions are
refused when compiled; every evaluation stops after a fixed number of steps.

Before these limits, each adversarial expression here ran for seconds to hours on the manager's
event loop (docs/benchmarks.md, ``cel_budget``); they are asserted by the error they end in,
never by time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nvcre import cel
from nvcre.api.v1alpha1.limits import (
    EXPRESSION_MAX_LENGTH,
    EXPRESSION_MAX_STEPS,
    HEALTH_EXPRESSION_MAX_STEPS,
    THRESHOLD_EXPRESSION_MAX_LENGTH,
)
from nvcre.health.nodes import unhealthy_nodes
from nvcre.measure.thresholds import Verdict, evaluate

TEN = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"


def nested_all(depth: int, items: str = TEN) -> str:
    """``items.all(x0, items.all(x1, ... value > 0.0))``, ``depth`` comprehensions deep."""
    expression = "value > 0.0"
    for level in range(depth):
        expression = f"{items}.all(x{level}, {expression})"
    return expression


def ones(count: int) -> str:
    return "[" + ",".join(["1"] * count) + "]"


OVER_BUDGET_THRESHOLD = f"{ones(20)}.all(a, {ones(20)}.all(b, a == b && value > 0.0))"
"""Within every compile-time limit of a threshold, and 400 evaluations of its body."""

OVER_BUDGET_HEALTH = f"{ones(300)}.all(a, {ones(300)}.all(b, a == b))"
"""90,000 evaluations of its body (about 2.5 million steps) unbounded."""


def error_of(
    expression: str, variables: dict[str, Any] | None = None, steps: int = EXPRESSION_MAX_STEPS
) -> cel.CELError:
    with pytest.raises(cel.CELError) as raised:
        program = cel.compile_expression(expression)
        program.evaluate_bool(variables if variables is not None else {"value": 1.0}, steps=steps)
    return raised.value


def test_the_reported_expression_is_refused_before_it_runs() -> None:
    """The 256-character threshold expression of six nested ``.all()`` that held the loop for 18 s."""
    expression = nested_all(6, "[1,2,3,4,5,6,7,8,9]")
    assert len(expression) <= THRESHOLD_EXPRESSION_MAX_LENGTH
    error = error_of(expression)
    assert (error.kind, error.error) == ("compile", "comprehension macros nested 6 deep, at most 2")
    verdict = evaluate({"busBandwidthGBps": expression}, {"busBandwidthGBps": 480.0})
    assert verdict == Verdict(
        True,
        "InvalidThresholdExpression",
        'Threshold "busBandwidthGBps": comprehension macros nested 6 deep, at most 2',
    )


def test_two_levels_of_comprehension_are_allowed() -> None:
    assert cel.evaluate_bool(nested_all(2, "[0, 1, 2, 3]"), {"value": 1.0}) is True


def test_a_threshold_over_budget_fails_its_verdict_with_the_budget_named() -> None:
    assert len(OVER_BUDGET_THRESHOLD) <= THRESHOLD_EXPRESSION_MAX_LENGTH
    error = error_of(OVER_BUDGET_THRESHOLD)
    assert (error.kind, error.error) == (
        "budget",
        f"exceeded the evaluation budget of {EXPRESSION_MAX_STEPS} steps",
    )
    assert str(error) == (
        f"evaluating CEL expression {OVER_BUDGET_THRESHOLD!r}: exceeded the evaluation budget of 2000 steps"
    )
    verdict = evaluate(
        {"avgStepTimeSec": "value < 3.0", "busBandwidthGBps": OVER_BUDGET_THRESHOLD},
        {
            "avgStepTimeSec": 2.0,
            "busBandwidthGBps": 480.0,
        },
    )
    assert verdict == Verdict(
        True,
        "InvalidThresholdExpression",
        'Threshold "busBandwidthGBps": exceeded the evaluation budget of 2000 steps',
    )


def test_the_budget_stops_an_evaluation_of_millions_of_steps() -> None:
    assert len(OVER_BUDGET_HEALTH) <= EXPRESSION_MAX_LENGTH
    assert error_of(OVER_BUDGET_HEALTH, {}, HEALTH_EXPRESSION_MAX_STEPS).kind == "budget"


def test_the_budget_is_counted_in_steps_so_an_expression_passes_or_fails_alike_everywhere() -> None:
    node = {"status": {"conditions": [{"type": f"Condition{i}", "status": "True"} for i in range(20)]}}
    eight = " || ".join(
        f"node.status.conditions.exists(c, c.type == 'Check{i}' && c.status == 'False')" for i in range(8)
    )
    program = cel.compile_expression(eight)
    for _ in range(3):
        assert program.evaluate_bool({"node": node}, steps=HEALTH_EXPRESSION_MAX_STEPS) is False
    twenty_more = {"status": {"conditions": node["status"]["conditions"] * 2}}
    for _ in range(3):
        assert error_of(eight, {"node": twenty_more}, HEALTH_EXPRESSION_MAX_STEPS).kind == "budget"


def test_a_node_health_expression_over_budget_stops_the_check_at_the_first_node() -> None:
    pulled: list[str] = []

    def nodes() -> Iterator[dict[str, Any]]:
        for name in ("a", "b", "c"):
            pulled.append(name)
            yield {"metadata": {"name": name}}

    with pytest.raises(cel.CELError) as raised:
        unhealthy_nodes(OVER_BUDGET_HEALTH, nodes())
    assert raised.value.kind == "budget"
    assert pulled == ["a"], "an expression over budget on one node is not tried on the others"


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        pytest.param(
            "true || " * 256 + "true",
            f"{len('true || ' * 256 + 'true')} characters long, at most {EXPRESSION_MAX_LENGTH}",
            id="too-long",
        ),
        pytest.param(
            " && ".join(["[1].exists(x, x == 1)"] * 9),
            "calls 9 comprehension macros (all, exists, exists_one, map, filter), at most 8",
            id="nine-macros",
        ),
        pytest.param(
            "[1].map (x, x) . filter\n(y, y > 0) == [1] && [1].exists_one(z, z == 1) && "
            + " && ".join(["[1].all(x, true)"] * 6),
            "calls 9 comprehension macros (all, exists, exists_one, map, filter), at most 8",
            id="macros-counted-through-spaces",
        ),
        pytest.param(
            "(" * 100 + "true" + ")" * 100, "nested too deeply: 1010 levels, at most 200", id="parens"
        ),
        pytest.param(
            " + ".join(["1"] * 300) + " > 0", "nested too deeply: 610 levels, at most 200", id="chain"
        ),
        pytest.param(
            "[1, 2].reduce(r, i, 'a', r + r) == ''",
            "reduce() is not a CEL macro",
            id="reduce-doubles-strings",
        ),
        pytest.param(
            f"{TEN}.map(a, {TEN}.filter(b, {TEN}.exists(c, a == c))).size() > 0",
            "comprehension macros nested 3 deep, at most 2",
            id="three-deep",
        ),
    ],
)
def test_refused_when_compiled(expression: str, error: str) -> None:
    with pytest.raises(cel.CELError) as raised:
        cel.compile_expression(expression)
    assert (raised.value.kind, raised.value.error) == ("compile", error)


def test_a_chain_of_comprehensions_is_not_nesting() -> None:
    chained = f"{TEN}.map(a, a * 2).filter(b, b > 4).exists(c, c == 18)"
    assert cel.evaluate_bool(chained) is True


def test_a_refused_expression_is_not_parsed_again() -> None:
    expression = nested_all(3)
    errors = []
    for _ in range(2):
        with pytest.raises(cel.CELError) as raised:
            cel.compile_expression(expression)
        errors.append(raised.value)
    hits = cel._compile.cache_info().hits
    with pytest.raises(cel.CELError):
        cel.compile_expression(expression)
    assert cel._compile.cache_info().hits == hits + 1
    assert errors[0] is not errors[1] and str(errors[0]) == str(errors[1])


def test_an_operator_without_overload_is_said_in_cel_words() -> None:
    assert error_of("value < '3'").error == "no matching overload for '<' applied to (double, string)"


BIG_NODE = {"metadata": {"name": "n", "annotations": {"big": "x" * 1_000_000}}}


def test_big_values_cost_steps_by_their_size() -> None:
    """Copying a 1 MB annotation ten times costs what it costs to copy, not ten steps."""
    doubled = f"{TEN}.map(i, node.metadata.annotations.big + node.metadata.annotations.big).size() > 0"
    assert error_of(doubled, {"node": BIG_NODE}).kind == "budget"
    assert cel.evaluate_bool("node.metadata.annotations.big.startsWith('x')", {"node": BIG_NODE}) is True


def test_a_wall_clock_backstop_stops_what_the_steps_do_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "EXPRESSION_MAX_SECONDS", -1.0)
    error = error_of(nested_all(2, "[0, 1, 2, 3]"))
    assert (error.kind, error.error) == ("budget", "exceeded the evaluation time limit of 1 s")
