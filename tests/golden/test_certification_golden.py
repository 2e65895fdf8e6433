"""Golden renders of Certifications: ``nvcrectl certification render`` compared structurally.

Each case is a directory under ``certification/`` with ``input.yaml``:

    # What the case proves (reviewed against spec/catalog.md).
    args: [--platform, aws]          # CLI flags (the Certification file is appended)
    nodes: [...]                     # optional: Node objects, passed as --nodes-file
    certification: {...}             # the Certification

and ``expected.yaml``, the multi-document Workflow stream the command must print (compared after
parsing, so formatting does not matter). Cases with ``error: <text>`` instead must exit 1 with
exactly one line on stderr containing the text.

Update with ``NVCRE_UPDATE_GOLDEN=1 pytest tests/golden`` and review every changed file by hand.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.cli.main import cli

CASES = Path(__file__).parent / "certification"
UPDATE = os.environ.get("NVCRE_UPDATE_GOLDEN") == "1"


def _cases() -> list[Path]:
    return sorted(p for p in CASES.iterdir() if (p / "input.yaml").is_file())


def _run(case: Path, tmp_path: Path) -> tuple[int, str, str, dict[str, Any]]:
    spec = yaml.safe_load((case / "input.yaml").read_text())
    cert_file = tmp_path / "cert.yaml"
    cert_file.write_text(yaml.safe_dump(spec["certification"], sort_keys=False))
    args = ["certification", "render", *spec.get("args", [])]
    if "nodes" in spec:
        nodes_file = tmp_path / "nodes.yaml"
        nodes_file.write_text(yaml.safe_dump(spec["nodes"], sort_keys=False))
        args += ["--nodes-file", str(nodes_file)]
    result = CliRunner().invoke(cli, [*args, str(cert_file)])
    return result.exit_code, result.stdout, result.stderr, spec


@pytest.mark.parametrize("case", _cases(), ids=lambda p: p.name)
def test_golden(case: Path, tmp_path: Path) -> None:
    code, out, err, spec = _run(case, tmp_path)
    assert "Traceback" not in err
    if "error" in spec:
        assert code == 1, out
        lines = [line for line in err.splitlines() if line.startswith("Error:")]
        assert len(lines) == 1, err
        assert spec["error"] in lines[0]
        return
    assert code == 0, err
    expected_file = case / "expected.yaml"
    if UPDATE:
        expected_file.write_text(out)
    assert expected_file.is_file(), f"no expected.yaml for {case.name}; run with NVCRE_UPDATE_GOLDEN=1"
    expected = list(yaml.safe_load_all(expected_file.read_text()))
    actual = list(yaml.safe_load_all(out))
    if actual != expected:
        diff = difflib.unified_diff(
            yaml.safe_dump_all(expected, sort_keys=True).splitlines(),
            yaml.safe_dump_all(actual, sort_keys=True).splitlines(),
            "expected",
            "actual",
            lineterm="",
        )
        pytest.fail(f"{case.name} differs from expected.yaml:\n" + "\n".join(diff))


def test_enough_cases() -> None:
    cases = _cases()
    renders = [c for c in cases if "error" not in yaml.safe_load((c / "input.yaml").read_text())]
    assert len(renders) >= 40
    assert len(cases) - len(renders) >= 15
