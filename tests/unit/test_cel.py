"""The CEL wrapper: string functions, variables, typed results, one error type with the expression."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre import cel


@pytest.mark.parametrize(
    ("expression", "variables", "expected"),
    [
        ('platform.startsWith("a")', {"platform": "aws"}, True),
        ('platform.endsWith("s")', {"platform": "aws"}, True),
        ('platform.contains("w")', {"platform": "aws"}, True),
        ('gpuArchitecture.matches("^gb[0-9]{3}$")', {"gpuArchitecture": "gb300"}, True),
        ('gpuArchitecture in ["gb200", "gb300"]', {"gpuArchitecture": "h100"}, False),
        ("size(platform) == 3", {"platform": "aws"}, True),
        ('"a,b".split(",") == ["a", "b"]', {}, True),
        ('"AbC".lowerAscii() == "abc" && "abc".upperAscii() == "ABC"', {}, True),
        ('" x ".trim() == "x"', {}, True),
        ("value >= 900", {"value": 950.5}, True),
        ("value >= 900.0", {"value": 899.9}, False),
        ("node.spec.unschedulable == true", {"node": {"spec": {"unschedulable": True}}}, True),
        ("has(node.spec.unschedulable)", {"node": {"spec": {}}}, False),
        ("domainCount > 1", {"domainCount": 2}, True),
        ("config.a.b == 1", {"config": {"a": {"b": 1}}}, True),
    ],
)
def test_evaluate_bool(expression: str, variables: dict[str, Any], expected: bool) -> None:
    assert cel.evaluate_bool(expression, variables) is expected


def test_evaluate_returns_plain_python() -> None:
    assert cel.evaluate("[1, 2].map(x, x * 2)") == [2, 4]
    assert cel.evaluate('{"a": 1.5}') == {"a": 1.5}
    assert cel.evaluate("x", {"x": None}) is None


def test_threshold() -> None:
    assert cel.evaluate_threshold("value > 1", 1.5)
    assert not cel.evaluate_threshold("value > 1", 1)


@pytest.mark.parametrize(
    ("expression", "kind", "message"),
    [
        (
            "platform ==",
            "compile",
            "compiling CEL expression 'platform ==': syntax error at line 1, column 10",
        ),
        (
            "nosuch == 1",
            "evaluate",
            "evaluating CEL expression 'nosuch == 1': undeclared reference to 'nosuch'",
        ),
        ('"x"', "type", "evaluating CEL expression '\"x\"': must evaluate to bool, got string"),
        ("node.spec.missing", "evaluate", "no such member"),
    ],
)
def test_errors_carry_expression_and_reason(expression: str, kind: str, message: str) -> None:
    with pytest.raises(cel.CELError) as error:
        cel.evaluate_bool(expression, {"platform": "aws", "node": {"spec": {}}})
    assert error.value.expression == expression
    assert error.value.kind == kind
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_compile_is_cached() -> None:
    assert cel.compile_expression("1 == 1") is cel.compile_expression("1 == 1")
    cel.check("1 == 1")
    with pytest.raises(cel.CELError):
        cel.check("(")


def test_unsupported_variable_is_a_cel_error() -> None:
    with pytest.raises(cel.CELError, match="unsupported variable value"):
        cel.evaluate("x == 1", {"x": object()})
