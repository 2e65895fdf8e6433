"""Helpers every ``nvcrectl`` command shares: output format, loading manifests, user errors.

A user error (bad flag value, unreadable or invalid file, a spec the core rejects) is one line
on stderr, ``Error: <message>``, and exit status 1 -- never a traceback.
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
from nvcre.validation.manifests import check_object

P = ParamSpec("P")
R = TypeVar("R")
K = TypeVar("K", bound=Resource)

OUTPUT_FORMATS: Final = ("yaml", "json")


class UserError(Exception):
    """A problem the user can fix; printed as one line, exit status 1."""

    def __init__(self, message: str) -> None:
        self.message = " ".join(message.splitlines())
        super().__init__(self.message)


def fail(message: str) -> None:
    """Print ``Error: <message>`` on stderr and exit 1."""
    click.echo(f"Error: {' '.join(message.splitlines())}", err=True)
    sys.exit(1)


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn ``UserError`` raised by a command into one line on stderr and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except UserError as error:
            fail(error.message)
            raise AssertionError("unreachable") from None

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
    """The YAML documents of a file (``-`` reads stdin); ``UserError`` when unreadable or not YAML."""
    source = str(path)
    try:
        text = sys.stdin.read() if source == "-" else Path(path).read_text()
    except OSError as error:
        raise UserError(f"{source}: cannot read file: {error.strerror or error}") from error
    try:
        return [doc for doc in yamlio.load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise UserError(f"{source}: not valid YAML{at}: {problem}") from error


def load_object(path: Path | str) -> dict[str, Any]:
    """The single object of a YAML file, unvalidated."""
    documents = load_documents(path)
    if len(documents) != 1:
        raise UserError(f"{path}: expected exactly one object, found {len(documents)}")
    document = documents[0]
    if not isinstance(document, dict):
        raise UserError(f"{path}: expected a Kubernetes object, got {type(document).__name__}")
    return document


def load_validated(path: Path | str, kind: type[K]) -> tuple[dict[str, Any], K]:
    """The single object of a YAML file as written, and as ``kind``, checked like ``nvcrectl validate``.

    Every finding is reported in the one error line, each with its field path. The raw dict
    keeps what the model cannot (explicit nulls in override patches, unset defaults).
    """
    document = load_object(path)
    found = document.get("kind")
    if found != kind.KIND:
        raise UserError(f"{path}: expected kind {kind.KIND}, got {json.dumps(found)}")
    report = check_object(document, str(path), 0)
    if report.findings:
        raise UserError(f"{path}: {'; '.join(str(finding) for finding in report.findings)}")
    if not isinstance(report.resource, kind):
        raise UserError(f"{path}: not a valid {kind.KIND}")
    return document, report.resource


def load_resource(path: Path | str, kind: type[K]) -> K:
    """The single object of a YAML file as ``kind`` (see ``load_validated``)."""
    return load_validated(path, kind)[1]


def load_nodes(path: Path | str) -> list[dict[str, Any]]:
    """Nodes from a file: a YAML list, a ``v1/List``/``NodeList``, or a stream of Node documents."""
    documents = load_documents(path)
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
            raise UserError(f"{path}: item {index} is not a Node")
        metadata = item.get("metadata")
        if not isinstance(metadata, dict) or not metadata.get("name"):
            raise UserError(f"{path}: item {index}: metadata.name is required")
        nodes.append(item)
    if not nodes:
        raise UserError(f"{path}: no nodes in file")
    return nodes
