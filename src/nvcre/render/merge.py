"""Merge engines for overrides: strategic merge patch, RFC 6902 JSON patch, named-list deep merge.

All functions are pure: they never mutate their arguments and return fresh data.

Strategic merge patch (``strategic_merge``) follows Kubernetes: maps merge recursively, an
explicit ``null`` deletes a key, a list merges by its patch-merge key when the type declares
one and is replaced whole otherwise. Which lists merge is a property of the Go types, recorded
in the tables below (paths use ``*`` for "every item"):

======================================================  ==========  ===============================
path (under the schema root)                            strategy    why
======================================================  ==========  ===============================
JobTemplateSpec (``spec.jobTemplate``; ``JOB_TEMPLATE_SCHEMA``)
------------------------------------------------------------------------------------------------
spec.workload.trainJob.trainer.args                     replace     Kubeflow ``listType=atomic``
spec.workload.trainJob.trainer.command                  replace     Kubeflow ``listType=atomic``
spec.workload.trainJob.trainer.env                      replace     Kubeflow type, no merge key
spec.workload.trainJob.runtimePatches                   replace     Kubeflow type, no merge key
spec.workload.trainJob.podTemplateOverrides             replace     Kubeflow type, no merge key
spec.workload.trainJob.trainer.resourcesPerNode.claims  replace     core list without merge key
every other list of the JobTemplateSpec                 replace     no patch-merge key declared
PodTemplateSpec (``POD_TEMPLATE_SCHEMA``; ``POD_SPEC_SCHEMA`` is the same rooted at the PodSpec)
------------------------------------------------------------------------------------------------
spec.containers, spec.initContainers,                   merge       by ``name``
spec.ephemeralContainers
spec.<containers>.*.env                                 merge       by ``name``
spec.<containers>.*.volumeMounts                        merge       by ``mountPath`` (core key)
spec.<containers>.*.volumeDevices                       merge       by ``devicePath``
spec.<containers>.*.ports                               merge       by ``containerPort``
spec.volumes, spec.imagePullSecrets,                    merge       by ``name``
spec.resourceClaims
spec.hostAliases                                        merge       by ``ip``
spec.topologySpreadConstraints                          merge       by ``topologyKey``
spec.tolerations, args, command, and the rest           replace     no patch-merge key
======================================================  ==========  ===============================

Dependency merge (``deep_merge_named``) is the controller's own, schema-free rule: lists in
which every item is an object with a non-empty ``name`` merge by name (replicatedJobs,
containers, initContainers, env, volumes, volumeMounts, resourceClaims, claims, ...); any other
list replaces.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

MergeSchema = Mapping[tuple[str, ...], str | None]
"""List path -> patch-merge key (``None``: replace whole). Unlisted lists are replaced."""

PATCH_DIRECTIVE: Final = "$patch"

JOB_TEMPLATE_SCHEMA: Final[MergeSchema] = {
    ("spec", "workload", "trainJob", "trainer", "args"): None,
    ("spec", "workload", "trainJob", "trainer", "command"): None,
    ("spec", "workload", "trainJob", "trainer", "env"): None,
    ("spec", "workload", "trainJob", "runtimePatches"): None,
    ("spec", "workload", "trainJob", "podTemplateOverrides"): None,
    ("spec", "workload", "trainJob", "trainer", "resourcesPerNode", "claims"): None,
}
"""The JobTemplateSpec (``Workflow.spec.jobTemplate``): no list has a patch-merge key."""


def _pod_spec_schema() -> dict[tuple[str, ...], str | None]:
    schema: dict[tuple[str, ...], str | None] = {
        ("volumes",): "name",
        ("imagePullSecrets",): "name",
        ("resourceClaims",): "name",
        ("hostAliases",): "ip",
        ("topologySpreadConstraints",): "topologyKey",
        ("tolerations",): None,
    }
    for containers in ("containers", "initContainers", "ephemeralContainers"):
        schema[(containers,)] = "name"
        schema[(containers, "*", "env")] = "name"
        schema[(containers, "*", "volumeMounts")] = "mountPath"
        schema[(containers, "*", "volumeDevices")] = "devicePath"
        schema[(containers, "*", "ports")] = "containerPort"
        schema[(containers, "*", "args")] = None
        schema[(containers, "*", "command")] = None
    return schema


POD_SPEC_SCHEMA: Final[MergeSchema] = _pod_spec_schema()
"""A core PodSpec."""


def rooted(schema: MergeSchema, *prefix: str) -> dict[tuple[str, ...], str | None]:
    """The same schema mounted under ``prefix`` (e.g. a PodSpec at ``spec``)."""
    return {(*prefix, *path): key for path, key in schema.items()}


POD_TEMPLATE_SCHEMA: Final[MergeSchema] = rooted(POD_SPEC_SCHEMA, "spec")
"""A core PodTemplateSpec (``metadata`` + ``spec``)."""


class MergeError(ValueError):
    """A patch cannot be applied; ``path`` is where (JSON-pointer-like, relative to the root)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


def _show_path(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def strip_nulls(value: Any) -> Any:
    """A copy without ``null`` map values (a null in a patch deletes; on new content it means nothing)."""
    if isinstance(value, Mapping):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None and k != PATCH_DIRECTIVE}
    if isinstance(value, list):
        return [strip_nulls(item) for item in value]
    return copy.deepcopy(value)


# --- strategic merge patch ---------------------------------------------------------------------


def strategic_merge(base: Any, patch: Any, schema: MergeSchema = JOB_TEMPLATE_SCHEMA) -> Any:
    """Kubernetes strategic merge patch of ``base`` with ``patch`` under ``schema``.

    Supports the ``$patch: replace`` (map) and ``$patch: delete`` (map or merge-list item)
    directives. A patch that is not a map replaces the base wholesale.
    """
    return _smp(base, patch, schema, ())


def _smp(base: Any, patch: Any, schema: MergeSchema, path: tuple[str, ...]) -> Any:
    if not isinstance(patch, Mapping):
        return strip_nulls(patch)
    directive = patch.get(PATCH_DIRECTIVE)
    if directive == "replace":
        return strip_nulls(patch)
    if directive is not None and directive != "delete":
        raise MergeError(_show_path(path), f"unsupported {PATCH_DIRECTIVE} directive {directive!r}")
    if not isinstance(base, Mapping):
        return strip_nulls(patch)
    result = copy.deepcopy(dict(base))
    for key, value in patch.items():
        if key == PATCH_DIRECTIVE:
            continue
        child = (*path, key)
        if value is None or (isinstance(value, Mapping) and value.get(PATCH_DIRECTIVE) == "delete"):
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _smp_list(result[key], value, schema, child)
        elif isinstance(value, Mapping):
            result[key] = _smp(result.get(key), value, schema, child)
        else:
            result[key] = strip_nulls(value)
    return result


def _smp_list(base: list[Any], patch: list[Any], schema: MergeSchema, path: tuple[str, ...]) -> list[Any]:
    merge_key = schema.get(path)
    if merge_key is None:
        return [item for item in strip_nulls(patch) if not _is_delete(item)]
    item_path = (*path, "*")
    result = copy.deepcopy(base)
    for position, item in enumerate(patch):
        if not isinstance(item, Mapping) or merge_key not in item:
            raise MergeError(
                f"{_show_path(path)}[{position}]",
                f"list merges by {merge_key!r}, so every patch item must be an object with {merge_key!r}",
            )
        match = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, Mapping) and existing.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if _is_delete(item):
            if match is not None:
                del result[match]
        elif match is None:
            result.append(strip_nulls(item))
        else:
            result[match] = _smp(result[match], item, schema, item_path)
    return result


def _is_delete(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get(PATCH_DIRECTIVE) == "delete"


# --- RFC 6902 JSON patch -----------------------------------------------------------------------


class JSONPatchError(ValueError):
    """Operation ``index`` of a JSON patch failed."""

    def __init__(self, index: int, message: str) -> None:
        self.index = index
        self.message = message
        super().__init__(f"[{index}]: {message}")


def _pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise ValueError(f"path must be a string, got {json.dumps(pointer)}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f'invalid JSON pointer "{pointer}": must be empty or start with "/"')
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return size
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise ValueError(f'invalid array index "{token}"')
    index = int(token)
    if index > size or (index == size and not allow_end):
        raise ValueError(f"array index {index} out of range (length {size})")
    return index


def _walk(document: Any, tokens: list[str], pointer: str) -> Any:
    node = document
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise ValueError(f'path "{pointer}" does not exist')
            node = node[token]
        elif isinstance(node, list):
            try:
                node = node[_index(token, len(node), allow_end=False)]
            except ValueError as error:
                raise ValueError(f'path "{pointer}": {error}') from None
        else:
            raise ValueError(f'path "{pointer}" does not exist')
    return node


def _get(document: Any, pointer: str) -> Any:
    return _walk(document, _pointer(pointer), pointer)


def _add(document: Any, pointer: str, value: Any) -> Any:
    tokens = _pointer(pointer)
    if not tokens:
        return value
    parent = _walk(document, tokens[:-1], pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise ValueError(f'path "{pointer}": parent is not an object or array')
    return document


def _remove(document: Any, pointer: str) -> tuple[Any, Any]:
    tokens = _pointer(pointer)
    if not tokens:
        raise ValueError("cannot remove the whole document")
    parent = _walk(document, tokens[:-1], pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise ValueError(f'path "{pointer}" does not exist')
        return document, parent.pop(last)
    if isinstance(parent, list):
        try:
            return document, parent.pop(_index(last, len(parent), allow_end=False))
        except ValueError as error:
            raise ValueError(f'path "{pointer}": {error}') from None
    raise ValueError(f'path "{pointer}" does not exist')


def json_equal(a: Any, b: Any) -> bool:
    """JSON value equality (``true`` is not ``1``; ``1`` equals ``1.0``; maps ignore order)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def json_patch(document: Any, operations: Any) -> Any:
    """Apply an RFC 6902 patch (add, remove, replace, move, copy, test) atomically to a copy."""
    if not isinstance(operations, list):
        raise JSONPatchError(
            0, f"a JSON patch must be an array of operations, got {type(operations).__name__}"
        )
    result = copy.deepcopy(document)
    for index, operation in enumerate(operations):
        try:
            result = _apply_operation(result, operation)
        except ValueError as error:
            raise JSONPatchError(index, str(error)) from None
    return result


def _member(operation: Mapping[str, Any], name: str) -> Any:
    if name not in operation:
        raise ValueError(f'operation "{operation.get("op")}" requires "{name}"')
    return operation[name]


def _apply_operation(document: Any, operation: Any) -> Any:
    if not isinstance(operation, Mapping):
        raise ValueError(f"an operation must be an object, got {json.dumps(operation)}")
    op = operation.get("op")
    path = _member(operation, "path")
    if op == "add":
        return _add(document, path, copy.deepcopy(_member(operation, "value")))
    if op == "remove":
        return _remove(document, path)[0]
    if op == "replace":
        value = copy.deepcopy(_member(operation, "value"))
        if not _pointer(path):
            return value
        document, _ = _remove(document, path)
        return _add(document, path, value)
    if op in ("move", "copy"):
        source = _member(operation, "from")
        if not isinstance(source, str):
            raise ValueError(f'"from" must be a string, got {json.dumps(source)}')
        if op == "move":
            if path != source and path.startswith(source + "/"):
                raise ValueError(f'cannot move "{source}" into its own child "{path}"')
            document, value = _remove(document, source)
        else:
            value = copy.deepcopy(_get(document, source))
        return _add(document, path, value)
    if op == "test":
        expected = _member(operation, "value")
        actual = _get(document, path)
        if not json_equal(actual, expected):
            raise ValueError(
                f'test failed: "{path}" is {json.dumps(actual)}, expected {json.dumps(expected)}'
            )
        return document
    raise ValueError(f"unknown op {json.dumps(op)}: must be one of add, remove, replace, move, copy, test")


# --- dependency deep merge (named lists) -------------------------------------------------------


def _named_list(items: Any) -> bool:
    return (
        isinstance(items, list)
        and bool(items)
        and all(
            isinstance(item, Mapping) and isinstance(item.get("name"), str) and item["name"] for item in items
        )
    )


def deep_merge_named(base: Any, patch: Any) -> Any:
    """Deep merge: maps recursively, ``null`` deletes, all-named lists by name, else replace."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        result = copy.deepcopy(dict(base))
        for key, value in patch.items():
            if value is None:
                result.pop(key, None)
            elif key in result:
                result[key] = deep_merge_named(result[key], value)
            else:
                result[key] = strip_nulls(value)
        return result
    if _named_list(base) and _named_list(patch):
        merged = copy.deepcopy(list(base))
        for item in patch:
            position = next(
                (i for i, existing in enumerate(merged) if existing["name"] == item["name"]), None
            )
            if position is None:
                merged.append(strip_nulls(item))
            else:
                merged[position] = deep_merge_named(merged[position], item)
        return merged
    return strip_nulls(patch)


def dependency_key(dependency: Mapping[str, Any]) -> tuple[str, str, str]:
    """(apiVersion, kind, metadata.name) of a dependency object."""
    metadata = dependency.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return (str(dependency.get("apiVersion") or ""), str(dependency.get("kind") or ""), str(name or ""))


def merge_dependencies(
    base: Iterable[Mapping[str, Any]], patches: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each patch object deep-merges into the dependency with its (apiVersion, kind, name), else is appended.

    A patch without apiVersion, kind or metadata.name raises ``MergeError`` naming its position.
    """
    result: list[dict[str, Any]] = [copy.deepcopy(dict(item)) for item in base]
    for position, patch in enumerate(patches):
        if not isinstance(patch, Mapping):
            raise MergeError(f"[{position}]", "a dependency must be an object")
        key = dependency_key(patch)
        missing = [
            name
            for name, value in zip(("apiVersion", "kind", "metadata.name"), key, strict=True)
            if not value
        ]
        if missing:
            raise MergeError(f"[{position}]", f"{', '.join(missing)} required to match a dependency")
        match = next((i for i, existing in enumerate(result) if dependency_key(existing) == key), None)
        if match is None:
            result.append(strip_nulls(patch))
        else:
            result[match] = deep_merge_named(result[match], patch)
    return result
