"""The Jinja2 environment every catalog entry and ``_lib`` fragment is rendered with.

Entries produce YAML text. Fragments under ``_lib/`` are written at column 0 and indented by the
caller (``{{ lib("nccl/gb200-env.yaml") | indent(8) }}`` with the placeholder itself at column 0).

Functions (globals) and filters available to every template:

``lib(path, **vars)``
    render ``_lib/<path>`` with the caller's variables (plus ``vars``), one trailing newline
    trimmed; a missing fragment is an error.
``include_file(rel)`` / ``include_template(rel)``
    the raw / rendered file ``<domain>/<variant>/<rel>`` of the entry being rendered; ``""``
    when it does not exist.
``env_list(path, **vars)``
    the fragment ``path`` (a YAML list of ``{name, value}``) parsed into a list.
``| indent(n)``
    prefix every non-empty line with ``n`` spaces (the first line too).
``| to_yaml``
    YAML of a value, trailing newline trimmed.
``| quote``
    a double-quoted YAML scalar.
``| mpi_args``
    a YAML list of ``{name, value}`` turned into YAML list lines ``- -x`` and ``- "NAME=VALUE"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import yaml

from nvcre import yamlio
from nvcre.api.v1alpha1.constants import Default

LIB_DIR = "_lib"


class TemplateError(Exception):
    """A template could not be rendered (syntax, undefined variable, missing fragment, bad data)."""


def _indent(text: str, width: int) -> str:
    pad = " " * width
    return "\n".join(pad + line if line.strip() else line for line in str(text).split("\n"))


def to_yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=False, width=1 << 16).rstrip("\n")


def _quote(value: Any) -> str:
    return json.dumps(str(value))


def parse_env(text: str) -> list[dict[str, str]]:
    """Parse an env fragment (a YAML list of ``{name, value}``) into a list of plain pairs."""
    try:
        items = yamlio.load(text) or []
    except yaml.YAMLError as exc:
        raise TemplateError(f"env fragment is not YAML: {exc}") from exc
    if not isinstance(items, list):
        raise TemplateError("env fragment must be a YAML list of {name, value}")
    out: list[dict[str, str]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise TemplateError(f"env fragment item must have a name: {item!r}")
        out.append({"name": item["name"], "value": "" if item.get("value") is None else str(item["value"])})
    return out


def mpi_args(text: str) -> str:
    """Each ``{name, value}`` becomes the two mpirun arguments ``-x`` and ``NAME=VALUE``."""
    lines: list[str] = []
    for item in parse_env(text):
        lines.append("- -x")
        lines.append("- " + json.dumps(f"{item['name']}={item['value']}"))
    return "\n".join(lines)


class Templates:
    """Loads and renders the templates under one catalog root directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(root)),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            autoescape=False,
        )
        self.env.filters["indent"] = _indent
        self.env.filters["to_yaml"] = to_yaml
        self.env.filters["quote"] = _quote
        self.env.filters["mpi_args"] = mpi_args
        self.env.globals["lib"] = self._lib
        self.env.globals["env_list"] = self._env_list
        self.env.globals["include_file"] = self._include_file
        self.env.globals["include_template"] = self._include_template
        self.env.globals["NODE_HEALTH_EXPRESSION"] = Default.NODE_HEALTH_EXPRESSION

    def compile(self, rel: str) -> jinja2.Template:
        """Parse a template; syntax errors surface here."""
        try:
            return self.env.get_template(rel)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{rel}:{exc.lineno}: {exc.message}") from exc
        except jinja2.TemplateNotFound as exc:
            raise TemplateError(f"template not found: {rel}") from exc

    def render(self, rel: str, data: dict[str, Any]) -> str:
        """Render the template at ``rel`` (relative to the root) with ``data``."""
        template = self.compile(rel)
        try:
            return template.render(data)
        except TemplateError:
            raise
        except jinja2.TemplateError as exc:
            raise TemplateError(f"{rel}: {exc}") from exc

    # --- functions ------------------------------------------------------------------------------

    @jinja2.pass_context
    def _lib(self, ctx: jinja2.runtime.Context, path: str, **extra: Any) -> str:
        data = {**ctx.get_all(), **extra}
        return self.render(f"{LIB_DIR}/{path}", data).removesuffix("\n")

    @jinja2.pass_context
    def _env_list(self, ctx: jinja2.runtime.Context, path: str, **extra: Any) -> list[dict[str, str]]:
        return parse_env(self._lib(ctx, path, **extra))

    def _entry_file(self, ctx: jinja2.runtime.Context, rel: str) -> str | None:
        entry_dir = ctx.get("entry_dir")
        if not entry_dir:
            raise TemplateError("include_file/include_template are only available in catalog entries")
        path = f"{entry_dir}/{rel}"
        return path if (self.root / path).is_file() else None

    @jinja2.pass_context
    def _include_file(self, ctx: jinja2.runtime.Context, rel: str) -> str:
        path = self._entry_file(ctx, rel)
        return "" if path is None else (self.root / path).read_text().removesuffix("\n")

    @jinja2.pass_context
    def _include_template(self, ctx: jinja2.runtime.Context, rel: str) -> str:
        path = self._entry_file(ctx, rel)
        return "" if path is None else self.render(path, ctx.get_all()).removesuffix("\n")
