"""Validate nvcre manifests (multi-document YAML) against the kinds' schemas and models."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from nvcre import yamlio
from nvcre.api.v1alpha1 import API_VERSION, KIND_MODULES, kind_model
from nvcre.api.v1alpha1.resource import Resource
from nvcre.validation.logprofiles import profile_problems
from nvcre.validation.schema import validate


@dataclass(frozen=True)
class Finding:
    """One problem with a manifest: the field path (may be empty) and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass
class ObjectReport:
    """The outcome for one document of a file."""

    source: str
    index: int
    kind: str = ""
    name: str = ""
    findings: list[Finding] = field(default_factory=list)
    resource: Resource | None = None

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def label(self) -> str:
        what = f"{self.kind}/{self.name}" if self.kind else f"document {self.index + 1}"
        return f"{self.source}: {what}"


SCHEMAS = Path(__file__).parent / "schemas"
"""``<Kind>.json``: each kind's structural schema as its CRD carries it, written by ``python -m
nvcre.crd`` (whose ``--check`` fails when one is stale)."""


@cache
def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMAS / f"{kind}.json").read_text())
    return schema


def _pydantic_findings(error: ValidationError) -> list[Finding]:
    findings = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"] if not isinstance(part, int))
        findings.append(Finding(path, item["msg"]))
    return findings


def check_object(document: Any, source: str, index: int) -> ObjectReport:
    """Validate one decoded document."""
    report = ObjectReport(source, index)
    if not isinstance(document, dict):
        report.findings.append(Finding("", f"expected a Kubernetes object, got {type(document).__name__}"))
        return report
    api_version, kind = document.get("apiVersion"), document.get("kind")
    report.kind = str(kind or "")
    metadata = document.get("metadata")
    report.name = str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
    if not kind:
        report.findings.append(Finding("kind", "Required value"))
        return report
    if api_version != API_VERSION:
        report.findings.append(
            Finding("apiVersion", f"unsupported apiVersion {api_version!r}; expected {API_VERSION!r}")
        )
        return report
    if kind not in KIND_MODULES:
        known = ", ".join(sorted(KIND_MODULES))
        report.findings.append(
            Finding("kind", f"unknown kind {kind!r} in {API_VERSION}; known kinds: {known}")
        )
        return report
    if not report.name and not (isinstance(metadata, dict) and metadata.get("generateName")):
        report.findings.append(Finding("metadata.name", "Required value: name or generateName is required"))
    schema_errors = validate(_schema(kind), document)
    report.findings.extend(Finding(e.path, e.message) for e in schema_errors)
    if not schema_errors:
        try:
            report.resource = kind_model(kind).model_validate(document)
        except ValidationError as error:
            report.findings.extend(_pydantic_findings(error))
        if kind == "LogProfile" and report.resource is not None:
            report.findings.extend(Finding(path, problem) for path, problem in profile_problems(document))
    return report


def validate_documents(documents: Iterable[Any], source: str) -> Iterator[ObjectReport]:
    for index, document in enumerate(documents):
        if document is not None:
            yield check_object(document, source, index)


def validate_file(path: Path) -> list[ObjectReport]:
    """Every object of a YAML file; a file that is not YAML gives one report saying so."""
    source = str(path)
    try:
        documents = yamlio.load_all(path.read_text())
    except OSError as error:
        return [ObjectReport(source, 0, findings=[Finding("", f"cannot read file: {error.strerror}")])]
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        problem = getattr(error, "problem", None) or str(error)
        return [ObjectReport(source, 0, findings=[Finding("", f"not valid YAML{at}: {problem}")])]
    reports = list(validate_documents(documents, source))
    if not reports:
        return [ObjectReport(source, 0, findings=[Finding("", "no Kubernetes objects in file")])]
    return reports
