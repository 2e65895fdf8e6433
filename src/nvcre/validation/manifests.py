"""Validate nvcre manifests (multi-document YAML) against the kinds' schemas and models."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nvcre.api.v1alpha1 import API_VERSION, KIND_MODULES, kind_model
from nvcre.api.v1alpha1.resource import Resource
from nvcre.inputs import manifest_documents
from nvcre.validation.findings import Finding
from nvcre.validation.schema import validate
from nvcre.validation.semantics import Profiles, semantic_findings


@dataclass
class ObjectReport:
    """The outcome for one document of a file."""

    source: str
    index: int
    kind: str = ""
    name: str = ""
    findings: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    """Not errors (the object is valid): what offline validation cannot know."""
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


def check_object(document: Any, source: str, index: int, profiles: Profiles | None = None) -> ObjectReport:
    """Validate one decoded document: its schema, its model, then what only nvcre's own code
    checks (``profiles``: LogProfiles validated alongside, see :func:`semantic_findings`), then
    the CRD's CEL rules where nothing before named the field."""
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
    errors = validate(_schema(kind), document)
    schema_errors = [e for e in errors if not e.rule]
    report.findings.extend(Finding(e.path, e.message) for e in schema_errors)
    if not schema_errors:
        try:
            report.resource = kind_model(kind).model_validate(document)
        except ValidationError as error:
            report.findings.extend(_pydantic_findings(error))
    if report.resource is not None:
        semantics = semantic_findings(document, profiles)
        report.findings.extend(semantics.findings)
        report.warnings.extend(semantics.warnings)
    # The CRDs' CEL rules last: where nvcre's own checks named the field, theirs says more
    # (the measured values, the unknown keys).
    named = {finding.path for finding in report.findings}
    report.findings.extend(Finding(e.path, e.message) for e in errors if e.rule and e.path not in named)
    return report


def log_profiles(documents: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """The LogProfiles among ``documents``, by name: measurements validated with them may name them."""
    return {
        str(doc["metadata"]["name"]): doc
        for doc in documents
        if isinstance(doc, dict) and doc.get("kind") == "LogProfile" and isinstance(doc.get("metadata"), dict)
    }


def validate_documents(
    documents: Iterable[Any], source: str, profiles: Profiles | None = None
) -> Iterator[ObjectReport]:
    for index, document in enumerate(documents):
        if document is not None:
            yield check_object(document, source, index, profiles)


def validate_file(path: Path) -> list[ObjectReport]:
    """Every object of a manifest file; ``InputError`` when it cannot be read as manifests."""
    documents = manifest_documents(str(path))
    return list(validate_documents(documents, str(path), log_profiles(documents)))
