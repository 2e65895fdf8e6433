"""CEL expressions: compile once, evaluate with plain Python variables.

A thin wrapper over cel-python used for override ``when.expression``, threshold expressions
(``value``, a float) and node-health expressions (``node``, a Node dict). Standard CEL string
functions work (``startsWith``, ``endsWith``, ``contains``, ``matches``, ``size``, ``in``), plus
the Kubernetes string extensions ``split``, ``join``, ``lowerAscii``, ``upperAscii`` and ``trim``,
and its quantity library's ``quantity``, ``isQuantity`` and ``compareTo`` (the CRDs' rules use them).
Numbers compare across types as in cel-go (``value == 487`` with ``value`` a double): cel-python
orders ints against doubles but refuses to test them for equality.
Every failure is a ``CELError`` that carries the expression and what went wrong.

Expressions are bounded (the limits are in :mod:`nvcre.api.v1alpha1.limits`): compiling refuses
one that is too long, calls too many comprehension macros, nests them too deeply or is parsed too
deep, and an evaluation stops with a ``budget`` error after a fixed number of steps, so no
expression can hold the caller (the manager's event loop) for more than a fraction of a second.
The budget counts steps, not time: an expression passes or fails the same way on any machine
(a one-second wall-clock backstop only catches steps whose cost outgrows their operands' size).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, cast

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import Activation, CELEvalError, Evaluator, bool_eq, bool_ne

from nvcre.api.v1alpha1.limits import (
    EXPRESSION_MAX_DEPTH,
    EXPRESSION_MAX_LENGTH,
    EXPRESSION_MAX_MACRO_NESTING,
    EXPRESSION_MAX_MACROS,
    EXPRESSION_MAX_SECONDS,
    EXPRESSION_MAX_STEPS,
    EXPRESSION_STEP_SIZE,
    macro_calls,
)
from nvcre.platform.nic import parse_quantity

CELErrorKind = Literal["compile", "evaluate", "type", "budget"]
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
"""The comprehension macros: each evaluates its arguments once per element of a list or map."""
_NOT_CEL = frozenset({"reduce"})
"""Macros cel-python adds to CEL (``reduce`` can double a string at every element)."""


class CELError(ValueError):
    """A CEL expression failed to compile, to evaluate, or returned the wrong type."""

    def __init__(self, expression: str, error: str, kind: CELErrorKind) -> None:
        self.expression = expression
        self.error = error
        self.kind = kind
        verb = "compiling" if kind == "compile" else "evaluating"
        super().__init__(f"{verb} CEL expression {expression!r}: {error}")


def _split(text: Any, separator: Any) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


def _join(items: Any, separator: Any = "") -> celtypes.StringType:
    return celtypes.StringType(str(separator).join(str(item) for item in items))


def _quantity(text: Any) -> celtypes.DoubleType:
    """A Kubernetes quantity (``"500m"``, ``"2Gi"``) as its value; an invalid one is an error."""
    value = parse_quantity(str(text))
    if value is None:
        raise ValueError(f"invalid quantity {str(text)!r}")
    return celtypes.DoubleType(float(value))


def _compare_to(left: Any, right: Any) -> celtypes.IntType:
    return celtypes.IntType((float(left) > float(right)) - (float(left) < float(right)))


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
    "quantity": _quantity,
    "isQuantity": lambda text: celtypes.BoolType(parse_quantity(str(text)) is not None),
    "compareTo": _compare_to,
}

_UNDECLARED = re.compile(r"^(undeclared reference to '[^']*')")
_NO_OVERLOAD = re.compile(r"^found no matching overload for Token\('RULE', '(\w+)'\) applied to '\((.*)\)'")
_CEL_TYPE = re.compile(r"<class 'celpy\.celtypes\.(\w+)Type'>")
_OPERATORS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
    "unary_neg": "-",
    "unary_not": "!",
}


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
    match = _NO_OVERLOAD.match(text)
    if match:  # cel-python names its grammar rule and Python classes; say it in CEL's words
        operator = _OPERATORS.get(match.group(1), match.group(1))
        operands = ", ".join(name.lower() for name in _CEL_TYPE.findall(match.group(2)))
        return f"no matching overload for '{operator}' applied to ({operands})"
    return text.splitlines()[0] if text else type(error).__name__


TIME_MESSAGE = f"exceeded the evaluation time limit of {EXPRESSION_MAX_SECONDS:g} s"


class _BudgetExceeded(Exception):
    """Raised inside the evaluator; not a ``CELEvalError``, so no CEL operator can absorb it."""


class _Budget:
    __slots__ = ("calls", "charged", "deadline", "left", "steps")

    def __init__(self, steps: int) -> None:
        self.steps = self.left = steps
        self.calls = 0
        self.deadline = time.monotonic() + EXPRESSION_MAX_SECONDS
        self.charged: dict[int, Any] = {}
        """The big values already paid for, by id (held, so that no id is reused meanwhile)."""

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise _BudgetExceeded(f"exceeded the evaluation budget of {self.steps} steps")
        self.calls += 1
        if self.calls % 256 == 0 and time.monotonic() > self.deadline:
            raise _BudgetExceeded(TIME_MESSAGE)

    def spend_sizes(self, values: Iterable[Any]) -> None:
        """One step per :data:`EXPRESSION_STEP_SIZE` characters, items or entries of each value,
        once per value: a value passed up through the parse tree is paid for where it is made."""
        for value in values:
            if (
                isinstance(value, str | bytes | list | dict)
                and len(value) >= EXPRESSION_STEP_SIZE
                and id(value) not in self.charged
            ):
                self.charged[id(value)] = value
                self.spend(len(value) // EXPRESSION_STEP_SIZE)


class _BudgetedEvaluator(Evaluator):
    """cel-python's evaluator, charging one step per node of the expression it visits, and its
    comprehensions' nested evaluators charging the same budget."""

    def __init__(self, ast: lark.Tree[Any], activation: Activation, budget: _Budget) -> None:
        super().__init__(ast, activation)
        self.budget = budget

    def visit(self, tree: lark.Tree[Any]) -> Any:
        self.budget.spend(1)
        result = super().visit(tree)
        self.budget.spend_sizes((result,))
        return result

    def visit_children(self, tree: lark.Tree[Any]) -> list[Any]:
        self.budget.spend(len(tree.children))
        results = super().visit_children(tree)
        self.budget.spend_sizes(results)
        return results

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        return _BudgetedEvaluator(ast, self.activation, self.budget)


class _Runner(celpy.InterpretedRunner):
    def evaluate_within(self, context: Any, steps: int) -> Any:
        return _BudgetedEvaluator(self.ast, self.new_activation(), _Budget(steps)).evaluate(context)


@dataclass(frozen=True)
class Program:
    """A compiled expression; evaluate it as often as needed."""

    expression: str
    _runner: _Runner

    def evaluate(
        self, variables: Mapping[str, Any] | None = None, *, steps: int = EXPRESSION_MAX_STEPS
    ) -> Any:
        """The result as plain Python (bool, int, float, str, list, dict, None), evaluated within
        ``steps`` (a ``budget`` error past them)."""
        try:
            activation = {name: to_cel(value) for name, value in (variables or {}).items()}
        except (TypeError, ValueError) as error:
            raise CELError(self.expression, f"unsupported variable value: {error}", "evaluate") from error
        try:
            result = self._runner.evaluate_within(activation, steps)
        except _BudgetExceeded as exceeded:
            raise CELError(self.expression, str(exceeded), "budget") from None
        except RecursionError:  # below EXPRESSION_MAX_DEPTH only on an already deep stack
            raise CELError(self.expression, "nested too deeply to evaluate", "evaluate") from None
        except CELEvalError as error:
            raise CELError(self.expression, _describe(error), "evaluate") from error
        except Exception as error:  # cel-python raises plain Python errors for some bad inputs
            raise CELError(self.expression, _describe(error), "evaluate") from error
        if isinstance(result, CELEvalError):
            raise CELError(self.expression, _describe(result), "evaluate")
        return from_cel(result)

    def evaluate_bool(
        self, variables: Mapping[str, Any] | None = None, *, steps: int = EXPRESSION_MAX_STEPS
    ) -> bool:
        result = self.evaluate(variables, steps=steps)
        if not isinstance(result, bool):
            raise CELError(self.expression, f"must evaluate to bool, got {type_name(result)}", "type")
        return result


def compile_expression(expression: str) -> Program:
    """Compile (cached by expression text, failures too); ``CELError`` on a syntax error or an
    expression beyond the limits."""
    compiled = _compile(expression)
    if isinstance(compiled, CELError):  # a new one: a raised error keeps the frames it went through
        raise CELError(compiled.expression, compiled.error, compiled.kind)
    return compiled


@lru_cache(maxsize=1024)
def _compile(expression: str) -> Program | CELError:
    try:
        problem = _oversized(expression)
        if problem:
            return CELError(expression, problem, "compile")
        environment = celpy.Environment(runner_class=_Runner)
        ast = environment.compile(expression)
        problem = _too_complex(ast)
        if problem:
            return CELError(expression, problem, "compile")
        runner = environment.program(ast, functions=_EXTENSIONS)
    except Exception as error:  # CELParseError, and the plain Python errors cel-python lets out
        return CELError(expression, _describe(error), "compile")
    return Program(expression, cast(_Runner, runner))


def _oversized(expression: str) -> str | None:
    """What the text alone shows to be beyond the limits (checked before parsing it)."""
    if len(expression) > EXPRESSION_MAX_LENGTH:
        return f"{len(expression)} characters long, at most {EXPRESSION_MAX_LENGTH}"
    calls = macro_calls(expression)
    if calls > EXPRESSION_MAX_MACROS:
        return (
            f"calls {calls} comprehension macros (all, exists, exists_one, map, filter), "
            f"at most {EXPRESSION_MAX_MACROS}"
        )
    return None


def _macro(tree: lark.Tree[Any]) -> str | None:
    """The macro a ``member.name(args)`` node calls, if it is one."""
    if tree.data == "member_dot_arg" and len(tree.children) > 1:
        name = str(tree.children[1])
        if name in MACROS or name in _NOT_CEL:
            return name
    return None


def _too_complex(ast: lark.Tree[Any]) -> str | None:
    """What the parsed expression shows to be beyond the limits: its depth, its comprehensions
    nested in one another, a macro CEL does not have. Iterative: a deep tree must not recurse."""
    depth = nesting = 0
    stack: list[tuple[lark.Tree[Any], int, int]] = [(ast, 1, 0)]
    while stack:
        tree, level, inside = stack.pop()
        depth = max(depth, level)
        name = _macro(tree)
        if name in _NOT_CEL:
            return f"{name}() is not a CEL macro"
        if name is not None:
            nesting = max(nesting, inside + 1)
        for index, child in enumerate(tree.children):
            if isinstance(child, lark.Tree):
                # a macro's arguments (child 2) run once per element: they are inside it
                stack.append((child, level + 1, inside + 1 if name is not None and index == 2 else inside))
    if depth > EXPRESSION_MAX_DEPTH:
        return f"nested too deeply: {depth} levels, at most {EXPRESSION_MAX_DEPTH}"
    if nesting > EXPRESSION_MAX_MACRO_NESTING:
        return f"comprehension macros nested {nesting} deep, at most {EXPRESSION_MAX_MACRO_NESTING}"
    return None


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


_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (type(None), "null"),
    (bool, "bool"),  # before int: a bool is an int to isinstance
    (int, "int"),
    (float, "double"),
    (str, "string"),
    (list, "list"),
    (dict, "map"),
)


def type_name(value: Any) -> str:
    """CEL's name of a plain value's type (Python's name for a type CEL does not have)."""
    return next((name for kind, name in _TYPE_NAMES if isinstance(value, kind)), type(value).__name__)
