"""Golden reports (cli.md 4.5): text, JSON and JUnit of the objects a run leaves behind.

Each case is a directory under ``report/`` with ``input.yaml``, the objects as nvcre writes them
(made by :mod:`tests.golden.report_inputs` from the controllers' own pure functions; the test
fails when the file no longer matches what they produce), and the reports built from them:
``expected.txt`` (``certification report`` / ``workloadrun report``), ``expected.json``
(``--results-file`` / ``-o json``) and ``expected.xml`` (``--junit-file``).

Update with ``NVCRE_UPDATE_GOLDEN=1 pytest tests/golden`` and review every changed file by hand.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from nvcre.report.jsonreport import to_json
from nvcre.report.junit import render_junit
from nvcre.report.text import render_text
from tests.golden.report_inputs import CASES, report_of

ROOT = Path(__file__).parent / "report"
UPDATE = os.environ.get("NVCRE_UPDATE_GOLDEN") == "1"


def _check(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual)
    assert path.is_file(), f"no {path.name} for {path.parent.name}; run with NVCRE_UPDATE_GOLDEN=1"
    assert actual == path.read_text(), f"{path.parent.name}/{path.name} differs"


@pytest.mark.parametrize("case", sorted(CASES), ids=str)
def test_golden_report(case: str) -> None:
    folder = ROOT / case
    if UPDATE:
        folder.mkdir(exist_ok=True)
    objects = CASES[case]()
    dumped = yaml.safe_dump(objects, sort_keys=False, width=1000, allow_unicode=True)
    _check(folder / "input.yaml", dumped)
    report = report_of(yaml.safe_load((folder / "input.yaml").read_text()))
    _check(folder / "expected.txt", render_text(report))
    _check(folder / "expected.json", json.dumps(to_json(report), indent=2, ensure_ascii=False) + "\n")
    _check(folder / "expected.xml", render_junit([report]))
