"""Helpers every ``nvcrectl`` command shares: output format, loading manifests, user errors.

A user error is one line on stderr, ``Error: <message>``, never a traceback: exit status 2 when
an input cannot be read as what the command takes (``InputError``: a missing, binary, non-UTF-8
or empty file, YAML that does not parse or is not a Kubernetes object), 1 for everything else
(a bad flag value, a manifest of the wrong kind or with invalid fields, a spec the core rejects).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

import click
import yaml

from nvcre import yamlio
from nvcre.api.v1alpha1.resource import Resource
from nvcre.inputs import NO_OBJECTS, InputError, label, manifest_text, objects, read_bytes, yaml_documents
from nvcre.validation.manifests import check_object

P = ParamSpec("P")
R = TypeVar("R")
K = TypeVar("K", bound=Resource)

OUTPUT_FORMATS: Final = ("yaml", "json")
BAD_INPUT: Final = 2
"""The exit status of an ``InputError``."""


class UserError(Exception):
    """A problem the user can fix; printed as one line, exit status 1."""

    def __init__(self, message: str) -> None:
        self.message = " ".join(message.splitlines())
        super().__init__(self.message)


def fail(message: str, status: int = 1) -> None:
    """Print ``Error: <message>`` on stderr and exit ``status``."""
    click.echo(f"Error: {' '.join(message.splitlines())}", err=True)
    sys.exit(status)


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn ``UserError`` (exit 1) and ``InputError`` (exit 2) raised by a command into one line
    on stderr."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except UserError as error:
            fail(error.message)
        except InputError as error:
            fail(str(error), BAD_INPUT)
        raise AssertionError("unreachable")

    return wrapper


def choice(value: str, choices: Sequence[str], flag: str) -> str:
    """``value`` if allowed, else ``UserError('invalid <flag> "<value>": must be one of a, b')``."""
    if value not in choices:
        raise UserError(f'invalid {flag} "{value}": must be one of {", ".join(choices)}')
    return value


def output_option(
    default: str = "yaml", formats: Sequence[str] = OUTPUT_FORMATS
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``-o/--output`` with the given formats; an unknown one is a user error (exit 1)."""
    allowed = tuple(formats)

    def check(ctx: click.Context, param: click.Parameter, value: str) -> str:
        if value not in allowed:
            click.echo(f'Error: invalid --output "{value}": must be one of {", ".join(allowed)}', err=True)
            ctx.exit(1)
        return value

    return click.option(
        "-o",
        "--output",
        "output",
        default=default,
        show_default=True,
        help=f"Output format: {', '.join(allowed)}.",
        callback=check,
    )


class _Dumper(yamlio.SafeDumper):  # type: ignore[misc]
    """Block-style YAML; multi-line strings as literal blocks. libyaml's emitter where PyYAML has
    it: the same text, five times faster (a Workflow's YAML is a tenth of a cold render)."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def to_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1 << 16)


def render(data: Any, output: str) -> str:
    """One object, or a list as a YAML multi-document stream / a JSON array."""
    if output == "json":
        return json.dumps(data, indent=2) + "\n"
    if isinstance(data, list):
        return "".join(("---\n" if i else "") + to_yaml(item) for i, item in enumerate(data))
    return to_yaml(data)


def emit(data: Any, output: str) -> None:
    """Write ``data`` to stdout in the chosen format."""
    click.echo(render(data, output), nl=False)


def load_documents(path: Path | str) -> list[Any]:
    """The non-empty YAML documents of a file (``-`` reads stdin); ``InputError`` when it cannot
    be read, is not UTF-8 text or not YAML."""
    source = str(path)
    return yaml_documents(source, manifest_text(source, read_bytes(source)))


def load_object(path: Path | str) -> dict[str, Any]:
    """The single object of a YAML file, unvalidated."""
    documents = objects(str(path), load_documents(path))
    if len(documents) != 1:
        raise UserError(f"{label(str(path))}: expected exactly one object, found {len(documents)}")
    return documents[0]


def load_validated(path: Path | str, kind: type[K]) -> tuple[dict[str, Any], K]:
    """The single object of a YAML file as written, and as ``kind``, checked like ``nvcrectl validate``.

    Every finding is reported in the one error line, each with its field path. The raw dict
    keeps what the model cannot (explicit nulls in override patches, unset defaults).
    """
    document = load_object(path)
    where = label(str(path))
    found = document.get("kind")
    if found != kind.KIND:
        raise UserError(f"{where}: expected kind {kind.KIND}, got {json.dumps(found)}")
    report = check_object(document, where, 0)
    if report.findings:
        raise UserError(f"{where}: {'; '.join(str(finding) for finding in report.findings)}")
    if not isinstance(report.resource, kind):
        raise UserError(f"{where}: not a valid {kind.KIND}")
    return document, report.resource


def load_resource(path: Path | str, kind: type[K]) -> K:
    """The single object of a YAML file as ``kind`` (see ``load_validated``)."""
    return load_validated(path, kind)[1]


def load_nodes(path: Path | str) -> list[dict[str, Any]]:
    """Nodes from a file: a YAML list, a ``v1/List``/``NodeList``, or a stream of Node documents."""
    documents = load_documents(path)
    where = label(str(path))
    if not documents:
        raise InputError(f"{where}: {NO_OBJECTS}")
    items: list[Any] = []
    for document in documents:
        if isinstance(document, list):
            items.extend(document)
        elif isinstance(document, dict) and isinstance(document.get("items"), list):
            items.extend(document["items"])
        else:
            items.append(document)
    nodes: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
            raise UserError(f"{where}: item {index} is not a Node")
        metadata = item.get("metadata")
        if not isinstance(metadata, dict) or not metadata.get("name"):
            raise UserError(f"{where}: item {index}: metadata.name is required")
        nodes.append(item)
    if not nodes:
        raise UserError(f"{where}: no nodes in file")
    return nodes
