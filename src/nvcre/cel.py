"""CEL expressions: compile once, evaluate with plain Python variables.

A thin wrapper over cel-python used for override ``when.expression``, threshold expressions
(``value``, a float) and node-health expressions (``node``, a Node dict). Standard CEL string
functions work (``startsWith``, ``endsWith``, ``contains``, ``matches``, ``size``, ``in``), plus
the Kubernetes string extensions ``split``, ``join``, ``lowerAscii``, ``upperAscii`` and ``trim``.
Numbers compare across types as in cel-go (``value == 487`` with ``value`` a double): cel-python
orders ints against doubles but refuses to test them for equality.
Every failure is a ``CELError`` that carries the expression and what went wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, bool_eq, bool_ne

CELErrorKind = Literal["compile", "evaluate", "type"]


class CELError(ValueError):
    """A CEL expression failed to compile, to evaluate, or returned the wrong type."""

    def __init__(self, expression: str, error: str, kind: CELErrorKind) -> None:
        self.expression = expression
        self.error = error
        self.kind = kind
        verb = {"compile": "compiling", "evaluate": "evaluating", "type": "evaluating"}[kind]
        super().__init__(f"{verb} CEL expression {expression!r}: {error}")


def _split(text: Any, separator: Any) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


def _join(items: Any, separator: Any = "") -> celtypes.StringType:
    return celtypes.StringType(str(separator).join(str(item) for item in items))


def _number(value: Any) -> bool:
    return isinstance(value, celtypes.IntType | celtypes.UintType | celtypes.DoubleType) and not isinstance(
        value, celtypes.BoolType
    )


def _plain(value: Any) -> int | float:
    """As a Python number, which compares int and float exactly."""
    return float(value) if isinstance(value, celtypes.DoubleType) else int(value)


def _equal(left: Any, right: Any) -> Any:
    if _number(left) and _number(right):
        return celtypes.BoolType(_plain(left) == _plain(right))
    return bool_eq(left, right)


def _not_equal(left: Any, right: Any) -> Any:
    if _number(left) and _number(right):
        return celtypes.BoolType(_plain(left) != _plain(right))
    return bool_ne(left, right)


_EXTENSIONS: dict[str, Callable[..., Any]] = {
    "_==_": _equal,
    "_!=_": _not_equal,
    "split": _split,
    "join": _join,
    "lowerAscii": lambda text: celtypes.StringType(str(text).lower()),
    "upperAscii": lambda text: celtypes.StringType(str(text).upper()),
    "trim": lambda text: celtypes.StringType(str(text).strip()),
}

_UNDECLARED = re.compile(r"^(undeclared reference to '[^']*')")


def _describe(error: BaseException) -> str:
    """A one-line description of a cel-python error (its messages can embed whole activations)."""
    if isinstance(error, CELParseError):
        line, column = getattr(error, "line", None), getattr(error, "column", None)
        if line is not None and column is not None:
            return f"syntax error at line {line}, column {column}"
        return "syntax error"
    first = error.args[0] if error.args else error
    text = str(first)
    match = _UNDECLARED.match(text)
    if match:
        return match.group(1)
    return text.splitlines()[0] if text else type(error).__name__


@dataclass(frozen=True)
class Program:
    """A compiled expression; evaluate it as often as needed."""

    expression: str
    _runner: Any

    def evaluate(self, variables: Mapping[str, Any] | None = None) -> Any:
        """The result as plain Python (bool, int, float, str, list, dict, None)."""
        try:
            activation = {name: to_cel(value) for name, value in (variables or {}).items()}
        except (TypeError, ValueError) as error:
            raise CELError(self.expression, f"unsupported variable value: {error}", "evaluate") from error
        try:
            result = self._runner.evaluate(activation)
        except CELEvalError as error:
            raise CELError(self.expression, _describe(error), "evaluate") from error
        except Exception as error:  # cel-python raises plain Python errors for some bad inputs
            raise CELError(self.expression, _describe(error), "evaluate") from error
        if isinstance(result, CELEvalError):
            raise CELError(self.expression, _describe(result), "evaluate")
        return from_cel(result)

    def evaluate_bool(self, variables: Mapping[str, Any] | None = None) -> bool:
        result = self.evaluate(variables)
        if not isinstance(result, bool):
            raise CELError(self.expression, f"must evaluate to bool, got {type_name(result)}", "type")
        return result


@lru_cache(maxsize=1024)
def compile_expression(expression: str) -> Program:
    """Compile (cached by expression text); ``CELError`` on a syntax error."""
    environment = celpy.Environment()
    try:
        ast = environment.compile(expression)
        runner = environment.program(ast, functions=_EXTENSIONS)
    except CELParseError as error:
        raise CELError(expression, _describe(error), "compile") from error
    except Exception as error:
        raise CELError(expression, _describe(error), "compile") from error
    return Program(expression, runner)


def evaluate(expression: str, variables: Mapping[str, Any] | None = None) -> Any:
    return compile_expression(expression).evaluate(variables)


def evaluate_bool(expression: str, variables: Mapping[str, Any] | None = None) -> bool:
    """Evaluate an expression that must return a bool."""
    return compile_expression(expression).evaluate_bool(variables)


def check(expression: str) -> None:
    """Raise ``CELError`` when the expression does not compile."""
    compile_expression(expression)


def evaluate_threshold(expression: str, value: float) -> bool:
    """A threshold such as ``value >= 900`` against one measured value (a double)."""
    return evaluate_bool(expression, {"value": float(value)})


def to_cel(value: Any) -> Any:
    """Plain Python data -> CEL values (floats stay doubles, ints ints, bools bools)."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType({celtypes.StringType(str(k)): to_cel(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return celtypes.ListType([to_cel(item) for item in value])
    return json_to_cel(value)


def from_cel(value: Any) -> Any:
    """CEL values -> plain Python data."""
    if value is None:
        return None
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, Mapping):
        return {from_cel(k): from_cel(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [from_cel(item) for item in value]
    return value


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__
