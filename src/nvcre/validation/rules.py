"""The CRDs' CEL rules (``x-kubernetes-validations``), evaluated offline as the API server
evaluates them at admission, so that ``nvcrectl validate`` refuses what ``kubectl apply`` would.

Not evaluated here: transition rules (they compare with ``oldSelf``, which a file does not have),
and two rules nvcre checks offline by its own code with the engine admission uses: a LogProfile
pattern must compile as RE2 (``''.matches(self)``; :mod:`nvcre.validation.semantics` compiles it
with RE2, which Python's ``re`` is not) and the comprehension-macro count of an expression
(``findAll``, with POSIX classes; :mod:`nvcre.cel` counts the macros when it compiles).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

CHECKED_ELSEWHERE: Final = ("''.matches(self)", "findAll(")
"""Text that marks a rule nvcre checks offline by its own code (see the module docstring)."""


def offline(rule: str) -> bool:
    """Whether ``rule`` is evaluated offline (not a transition rule, not checked elsewhere)."""
    return "oldSelf" not in rule and not any(mark in rule for mark in CHECKED_ELSEWHERE)


def _type(value: Any) -> str:
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"


def violations(schema: Mapping[str, Any], value: Any) -> list[str]:
    """The message of each offline rule of ``schema`` that ``value`` breaks, as the API server
    writes it (``Invalid value: "string": <message>``). A rule that cannot be evaluated here
    (an invalid quantity, say) reports nothing: the schema's own checks name the field."""
    out = []
    for validation in schema.get("x-kubernetes-validations") or ():
        rule = str(validation.get("rule") or "")
        if not offline(rule):
            continue
        from nvcre.cel import CELError, compile_expression  # only for a value a rule checks (start-up)

        try:
            holds = compile_expression(rule).evaluate({"self": value})
        except CELError:
            continue
        if holds is False:
            out.append(f'Invalid value: "{_type(value)}": {_message(validation, value)}')
    return out


def _message(validation: Mapping[str, Any], value: Any) -> str:
    """The rule's ``messageExpression`` evaluated, else its ``message``, as the API server does."""
    from nvcre.cel import CELError, compile_expression

    expression = str(validation.get("messageExpression") or "")
    if expression:
        try:
            message = compile_expression(expression).evaluate({"self": value})
        except CELError:
            message = None
        if isinstance(message, str) and message.strip() and "\n" not in message:
            return message
    return str(validation.get("message") or f"failed rule: {validation.get('rule')}")
