"""A validator for structural OpenAPI v3 schemas, reporting errors the way the API server does.

It checks everything a CRD schema states: types, required fields, unknown fields, enums,
patterns, lengths, item and property counts, numeric bounds, embedded resources, and the CEL
rules :mod:`nvcre.validation.rules` evaluates offline. Paths and wording follow the API server (``spec.numNodes: Invalid value: 0: ...``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from nvcre.validation import rules


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str
    rule: bool = False
    """A CEL rule's (the rest are the structural schema's)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else json.dumps(value, default=str)


def _type_ok(expected: str, value: Any) -> bool:
    match expected:
        case "object":
            return isinstance(value, dict)
        case "array":
            return isinstance(value, list)
        case "string":
            return isinstance(value, str)
        case "boolean":
            return isinstance(value, bool)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def validate(schema: dict[str, Any], value: Any, path: str = "") -> list[FieldError]:
    """Every schema violation of ``value``, in document order."""
    errors: list[FieldError] = []
    _check(schema, value, path, errors)
    return errors


def _invalid(errors: list[FieldError], path: str, value: Any, why: str) -> None:
    errors.append(FieldError(path, f"Invalid value: {_show(value)}: {path} in body {why}"))


def _check(schema: dict[str, Any], value: Any, path: str, errors: list[FieldError]) -> None:
    """``value`` against ``schema``, then the schema's CEL rules when ``value`` passed the rest
    (as at admission, where a rule sees only a well-formed value)."""
    before = len(errors)
    _check_structure(schema, value, path, errors)
    if len(errors) == before and value is not None:
        errors.extend(FieldError(path, message, rule=True) for message in rules.violations(schema, value))


def _check_structure(schema: dict[str, Any], value: Any, path: str, errors: list[FieldError]) -> None:
    if value is None:
        if not schema.get("nullable"):
            errors.append(FieldError(path, 'Invalid value: "null": must not be null'))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            _invalid(errors, path, value, "must be of type integer or string")
            return
    elif "type" in schema and not _type_ok(schema["type"], value):
        errors.append(
            FieldError(
                path, f"Invalid value: {_show(value)}: {path} in body must be of type {schema['type']}"
            )
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_show(v) for v in schema["enum"])
        errors.append(FieldError(path, f"Unsupported value: {_show(value)}: supported values: {allowed}"))
    if isinstance(value, str):
        _check_string(schema, value, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, path, errors)
    elif isinstance(value, list):
        _check_array(schema, value, path, errors)
    elif isinstance(value, dict):
        _check_object(schema, value, path, errors)


def _check_string(schema: dict[str, Any], value: str, path: str, errors: list[FieldError]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        _invalid(errors, path, value, f"should be at least {schema['minLength']} chars long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(FieldError(path, f"Too long: may not be more than {schema['maxLength']} bytes"))
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        _invalid(errors, path, value, f"should match '{schema['pattern']}'")


def _check_number(schema: dict[str, Any], value: float, path: str, errors: list[FieldError]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        _invalid(errors, path, value, f"should be greater than or equal to {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        _invalid(errors, path, value, f"should be less than or equal to {schema['maximum']}")


def _too_many(count: int, limit: int) -> str:
    return f"Too many: {count}: must have at most {limit} item{'' if limit == 1 else 's'}"


def _check_array(schema: dict[str, Any], value: list[Any], path: str, errors: list[FieldError]) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        _invalid(errors, path, value, f"should have at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(
            FieldError(path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items")
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _check(items, item, f"{path}[{index}]", errors)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_object(schema: dict[str, Any], value: dict[str, Any], path: str, errors: list[FieldError]) -> None:
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        _invalid(errors, path, value, f"should have at least {schema['minProperties']} properties")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(FieldError(path, _too_many(len(value), schema["maxProperties"])))
    if schema.get("x-kubernetes-embedded-resource"):
        for key in ("apiVersion", "kind"):
            if not value.get(key):
                errors.append(FieldError(_join(path, key), "Required value: must not be empty"))
    for key in schema.get("required", ()):
        if key not in value:
            errors.append(FieldError(_join(path, key), "Required value"))
    properties: dict[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    open_object = schema.get("x-kubernetes-preserve-unknown-fields", False)
    for key, item in value.items():
        child = _join(path, key) if properties or not isinstance(extra, dict) else f"{path}[{_show(key)}]"
        if key in properties:
            _check(properties[key], item, child, errors)
        elif isinstance(extra, dict):
            _check(extra, item, f"{path}[{_show(key)}]", errors)
        elif not open_object and (properties or extra is False):
            errors.append(FieldError(child, "Unknown field"))
