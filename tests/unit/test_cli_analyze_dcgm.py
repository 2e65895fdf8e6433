"""``nvcrectl analyze dcgm``: the test results of a saved ``dcgmi diag`` output, and its exit
status (0 passed, 1 a failed test, a report cut short or none, 2 bad input).

The figures are those of tests/unit/test_measure_dcgm.py, read by hand from each file.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import yaml

from nvcre.decide.job.diagnostics import NO_REPORT
from tests.unit.analyze_cli import analyze

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "dcgm"
DATA = Path(__file__).resolve().parents[1] / "data" / "dcgm"


run = partial(analyze, "dcgm")


def test_all_pass_corpus_log_as_json() -> None:
    code, out, err = run(str(CORPUS / "gcm-dcgmi-diag-r4-all-pass.log"), "-o", "json")
    status = json.loads(out)
    assert code == 0 and err == ""
    assert {k: status[k] for k in ("level", "version", "complete", "passed", "tests", "failedTests")} == {
        "level": 4,  # the `dcgmi diag -r 4` prompt line
        "version": None,
        "complete": True,
        "passed": True,
        "tests": 18,
        "failedTests": [],
    }
    assert status["results"][0] == {
        "category": "Deployment",
        "test": "Blacklist",
        "entity": "all",
        "status": "Pass",
        "message": "",
    }
    assert status["summary"] == "dcgmi diag level 4: all 18 tests passed"
    assert status["verdict"] == {
        "failed": False,
        "reason": "WorkloadCompleted",
        "message": "dcgmi diag level 4: all 18 tests passed",
    }


def test_failed_test_table_names_the_gpu_and_message() -> None:
    code, out, err = run(str(DATA / "a10g-dcgm339-r3-text-targeted-power-fail-gpu1.log"), "--level", "3")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].split() == ["CATEGORY", "TEST", "ENTITY", "STATUS", "MESSAGE"]
    (failed,) = [line for line in lines if " Fail " in line]
    assert failed.split()[:6] == ["Stress", "Targeted", "Power", "GPU", "1", "Fail"]
    assert failed.endswith("for GPU 1 Verify that the clock speeds and GPU utilization are high.")
    assert "version: 3.3.9" in lines and "complete: true" in lines and "tests: 16" in lines
    assert "failedTests: Targeted Power" in lines
    assert lines[-1].startswith(
        "verdict: WorkloadFailed: dcgmi diag level 3: 1 of 16 tests failed: Targeted Power on GPU 1 (GPU 1 Max power"
    )
    assert err.startswith("Error: dcgmi diag level 3: 1 of 16 tests failed: Targeted Power on GPU 1")


def test_json_report_from_stdin_as_yaml() -> None:
    code, out, _ = run(
        "-", "-o", "yaml", stdin=(DATA / "gb10-dcgm423-r1-json-software-fail-persistence.json").read_text()
    )
    status = yaml.safe_load(out)
    assert code == 1
    assert (status["version"], status["complete"], status["passed"]) == ("4.2.3", True, False)
    assert status["failedTests"] == ["software"]
    assert status["results"][0]["entity"] == "GPU 0"
    assert status["results"][0]["message"].startswith(
        "Persistence Mode: Persistence mode for GPU 0 is disabled."
    )


def test_a_report_cut_short_never_passes() -> None:
    code, out, _ = run(str(DATA / "issue215-dcgm4-r4-json-fragment-diagnostic-8gpu.json"), "-o", "json")
    status = json.loads(out)
    assert code == 1
    assert (status["complete"], status["passed"], status["failedTests"]) == (False, False, [])
    assert [r["status"] for r in status["results"]] == ["Pass"] * 8
    assert status["verdict"]["reason"] == "MeasurementUnavailable"
    assert status["summary"] == "dcgmi diag: report cut short; none of the 1 tests read failed"


def test_a_level_that_skipped_every_test_beyond_software_does_not_pass() -> None:
    """DCGM 4.4.2 ``-r 3`` on a GB10 (the log does not show the level): software passed, the seven
    tests of level 3 skipped. DCGM counts no failure; nvcre, as for a DCGM category's Job, does
    not call that a pass, and says why on stderr."""
    code, out, err = run(
        str(DATA / "gb10-microk8s-pod-dcgm442-r3-text-all-skipped-but-software.log"), "-o", "json"
    )
    status = json.loads(out)
    assert code == 1
    assert (status["complete"], status["passed"], status["failedTests"]) == (True, False, [])
    assert status["verdict"] == {
        "failed": True,
        "reason": "MeasurementUnavailable",
        "message": "dcgmi diag: no test failed: 1 of 8 passed, 7 skipped: no test beyond the "
        "software checks ran",
    }
    assert err.startswith("Error: dcgmi diag: no test failed") and "no test beyond the software checks" in err


def test_no_dcgmi_output() -> None:
    code, out, err = run("-", "-o", "json", stdin="Error from server (NotFound): pods not found\n")
    status = json.loads(out)
    assert code == 1
    assert (status["results"], status["passed"], status["summary"]) == ([], False, NO_REPORT)
    assert err == f"Error: {NO_REPORT}\n"


def test_several_files_are_one_log(tmp_path: Path) -> None:
    """A log split in two pieces (rotated) reads as one report."""
    text = (CORPUS / "gcm-dcgmi-diag-r4-all-pass.log").read_text().splitlines(keepends=True)
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_text("".join(text[:12]))
    second.write_text("".join(text[12:]))
    code, out, _ = run(str(first), str(second), "-o", "json")
    assert code == 0 and json.loads(out)["tests"] == 18
    code, out, _ = run(str(first), "-o", "json")
    assert code == 1 and json.loads(out)["complete"] is False


def test_bad_input() -> None:
    code, _, err = run("/nonexistent/dcgm.log")
    assert code == 2 and "cannot read file" in err
    code, _, _ = run("-", "--level", "5", stdin="")
    assert code == 2
