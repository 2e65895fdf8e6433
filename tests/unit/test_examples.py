"""Every shipped example is valid and survives a load/dump/load round trip unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nvcre.api.v1alpha1 import KINDS
from nvcre.validation import validate_file

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").rglob("*.yaml"))
DOCUMENTS = [
    pytest.param(path, index, doc, id=f"{path.parent.name}/{path.name}#{index}")
    for path in EXAMPLES
    for index, doc in enumerate(yaml.safe_load_all(path.read_text()))
    if doc is not None and doc.get("apiVersion", "").startswith("nvcre.nvidia.com/")
]


def test_examples_exist() -> None:
    kinds = {doc.values[2]["kind"] for doc in DOCUMENTS}
    assert {"WorkloadRun", "Job", "Certification"} <= kinds


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_validates(path: Path) -> None:
    reports = [r for r in validate_file(path) if r.kind in KINDS]
    assert reports, f"{path} holds no nvcre object"
    for report in reports:
        assert report.ok, [str(f) for f in report.findings]


@pytest.mark.parametrize(("path", "index", "document"), DOCUMENTS)
def test_round_trip_is_lossless(path: Path, index: int, document: dict[str, object]) -> None:
    kind = KINDS[str(document["kind"])]
    first = kind.model_validate(document)
    dumped = first.to_dict()
    second = kind.model_validate(dumped)
    assert second == first
    assert second.to_dict() == dumped
    # Nothing the user wrote is lost or invented (CRD defaults aside, which the API server adds too).
    assert _without_defaults(dumped, document) == document


def _without_defaults(dumped: object, original: object) -> object:
    """``dumped`` restricted to the keys present in ``original``."""
    if isinstance(dumped, dict) and isinstance(original, dict):
        return {k: _without_defaults(dumped[k], original[k]) for k in original if k in dumped}
    if isinstance(dumped, list) and isinstance(original, list):
        return [_without_defaults(d, o) for d, o in zip(dumped, original, strict=True)]
    return dumped
