"""Discovering, compiling and validating the catalog entries shipped as package data.

Layout under ``entries/``: ``<domain>/<variant>.yaml`` is an entry (a Jinja2 template of a
Workflow spec); ``<domain>/<variant>/`` holds its data (``meta.yaml``, files it includes);
``_lib/`` holds shared fragments. Every entry is rendered once with zero-valued
:class:`TemplateData` when the catalog loads, so a broken entry fails at start, not mid-run.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nvcre import yamlio
from nvcre.api.v1alpha1.constants import Default
from nvcre.catalog.errors import CatalogError, CategoryNotFound
from nvcre.catalog.template_data import TemplateData
from nvcre.catalog.templating import LIB_DIR, TemplateError, Templates

ENTRIES_DIR = Path(__file__).parent / "entries"


@dataclass(frozen=True)
class Parallelism:
    """Model-parallel layout of a training entry on one architecture."""

    tp: int = 0
    pp: int = 0
    ep: int = 0


@dataclass(frozen=True)
class EntryMeta:
    """``<domain>/<variant>/meta.yaml``: what the entry runs and its sizing constraints."""

    description: str = ""
    framework: str = ""
    min_gpus: int = 0
    timeout_per_job: str = ""
    parallelism: Mapping[str, Parallelism] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any, where: str) -> EntryMeta:
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise CatalogError(f"{where}: must be a mapping")
        parallelism: dict[str, Parallelism] = {}
        for arch, layout in (raw.get("parallelism") or {}).items():
            if not isinstance(layout, dict):
                raise CatalogError(f"{where}: parallelism.{arch} must be a mapping of tp, pp, ep")
            parallelism[str(arch)] = Parallelism(
                tp=int(layout.get("tp", 0)), pp=int(layout.get("pp", 0)), ep=int(layout.get("ep", 0))
            )
        return cls(
            description=str(raw.get("description", "")),
            framework=str(raw.get("framework", "")),
            min_gpus=int(raw.get("minGPUs", 0)),
            timeout_per_job=str(raw.get("timeoutPerJob", "")),
            parallelism=parallelism,
        )


def config_arch(arch: str) -> str:
    """The architecture whose meta and defaults an architecture shares (gb300 uses gb200's)."""
    return "gb200" if arch == "gb300" else arch


@dataclass(frozen=True)
class Entry:
    """One catalog category."""

    domain: str
    variant: str
    meta: EntryMeta
    iterations: int
    templates: Templates = field(repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.domain}/{self.variant}"

    @property
    def template_path(self) -> str:
        return f"{self.domain}/{self.variant}.yaml"

    @property
    def data_dir(self) -> str:
        return f"{self.domain}/{self.variant}"

    def parallelism(self, arch: str) -> Parallelism:
        """The layout for ``arch`` (through :func:`config_arch`), else ``default``, else zeros."""
        table = self.meta.parallelism
        return table.get(config_arch(arch)) or table.get("default") or Parallelism()

    def default_timeout(self, test_scale: str) -> str:
        """Per-job timeout when the user gives none: the entry's own, else 15m for diagnose, else 1h."""
        if self.meta.timeout_per_job:
            return self.meta.timeout_per_job
        return "15m" if test_scale == "diagnose" else "1h"

    def render_text(self, data: TemplateData) -> str:
        return self.templates.render(self.template_path, data.context(entry_dir=self.data_dir))

    def render(self, data: TemplateData) -> dict[str, Any]:
        """The Workflow spec (as plain data, overrides unresolved) the entry renders for ``data``."""
        try:
            text = self.render_text(data)
        except TemplateError as exc:
            raise CatalogError(f"executing template {self.key}: {exc}") from exc
        try:
            spec = yamlio.load(text)
        except yaml.YAMLError as exc:
            raise CatalogError(f"parsing rendered {self.key}: {exc}") from exc
        if not isinstance(spec, dict):
            raise CatalogError(f"parsing rendered {self.key}: not a mapping")
        return spec

    def to_dict(self) -> dict[str, Any]:
        """What ``list-categories -o json|yaml`` prints for the entry."""
        out: dict[str, Any] = {
            "domain": self.domain,
            "variant": self.variant,
            "framework": self.meta.framework,
            "description": self.meta.description,
            "timeoutPerJob": self.default_timeout(Default.TEST_SCALE),
        }
        if self.meta.min_gpus:
            out["minGPUs"] = self.meta.min_gpus
        return out


class Catalog:
    """The registry of entries, keyed by (domain, variant)."""

    def __init__(self, entries: list[Entry]) -> None:
        self._entries = {(e.domain, e.variant): e for e in entries}

    def lookup(self, domain: str, variant: str) -> Entry:
        """The entry, or :class:`CategoryNotFound` listing the known ones."""
        entry = self._entries.get((domain, variant))
        if entry is None:
            raise CategoryNotFound(domain, variant, [e.key for e in self.list()])
        return entry

    def list(self) -> list[Entry]:
        """Every entry, sorted by domain then variant."""
        return [self._entries[k] for k in sorted(self._entries)]

    def __len__(self) -> int:
        return len(self._entries)


def _discover(root: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in sorted(root.glob("*/*.yaml")):
        domain = path.parent.name
        if domain == LIB_DIR or domain.startswith((".", "_")):
            continue
        variant = path.stem
        if not domain or not variant:
            raise CatalogError(f"catalog entry {path.relative_to(root)}: empty domain or variant")
        found.append((domain, variant))
    return found


def _read_meta(root: Path, domain: str, variant: str) -> EntryMeta:
    path = root / domain / variant / "meta.yaml"
    if not path.is_file():
        return EntryMeta()
    try:
        raw = yamlio.load(path.read_text())
    except yaml.YAMLError as exc:
        raise CatalogError(f"{domain}/{variant}/meta.yaml: {exc}") from exc
    return EntryMeta.parse(raw, f"{domain}/{variant}/meta.yaml")


def load_catalog_from(root: Path) -> Catalog:
    """Load and validate every entry under ``root``; :class:`CatalogError` if any is broken."""
    templates = Templates(root)
    entries: list[Entry] = []
    for domain, variant in _discover(root):
        meta = _read_meta(root, domain, variant)
        probe = Entry(domain, variant, meta, 1, templates)
        try:
            templates.compile(probe.template_path)
        except TemplateError as exc:
            raise CatalogError(f"compiling {probe.key}: {exc}") from exc
        zero = probe.render(TemplateData(entry_name=variant))
        iterations = (zero.get("orchestration") or {}).get("iterations")
        entries.append(
            Entry(
                domain,
                variant,
                meta,
                iterations if isinstance(iterations, int) and iterations >= 1 else 1,
                templates,
            )
        )
    return Catalog(entries)


@functools.cache
def load_catalog() -> Catalog:
    """The catalog shipped with nvcre (loaded and validated once per process)."""
    return load_catalog_from(ENTRIES_DIR)
