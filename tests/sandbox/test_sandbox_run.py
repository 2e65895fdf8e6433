"""The README's main command: ``nvcrectl sandbox run examples/certification/fleet-nccl.yaml
--fault gpu-node-007=slow-nic:0.4`` brings up 16 simulated aws H100 nodes, certifies them in
pairs against the example's bandwidth floor, re-tests both members of the failed pair with
healthy partners, prints the report naming gpu-node-007 alone with its re-test's value and
partner, tears the sandbox down and exits 1; the JSON and JUnit files say the same."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from nvcre.testing import binaries as bins

ROOT = Path(__file__).resolve().parents[2]
NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))


def _processes_naming(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and text in cmdline:
            found.append(cmdline)
    return found


def test_the_readme_command_names_the_slow_node_and_leaves_nothing(tmp_path: Path) -> None:
    bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    state = tmp_path / "state"
    result = subprocess.run(
        [NVCRECTL, "sandbox", "run", "examples/certification/fleet-nccl.yaml",
         "--fault", "gpu-node-007=slow-nic:0.4", "--state-dir", str(state),
         "--results-file", str(tmp_path / "r.json"), "--junit-file", str(tmp_path / "j.xml")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "16 NVIDIA-H100-80GB-HBM3 nodes (aws), gpu-node-007=slow-nic:0.4" in result.stderr
    assert "[watch] Certification failed." in result.stderr
    assert "Result:       FAILED" in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "gpu-node-007  busbw" in x and "(group-3)" in x]
    assert re.search(r"gpu-node-007  busbw \d+\.\d GB/s < 400 \(group-3\)", line), line
    assert "gpu-node-006  busbw" not in result.stderr, "the healthy partner is not blamed"
    assert result.stderr.rstrip().endswith("Error: certification failed")

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["result"] == "FAILED"
    (category,) = report["categories"]
    (failed,) = report["failedNodes"]
    assert (failed["name"], failed["reason"]) == ("gpu-node-007", "ThresholdViolation"), report
    assert re.search(r"\(re-tested with healthy partner gpu-node-0\d\d\)$", failed["message"]), failed
    assert category["status"] == "Failed"
    cases = ET.fromstring((tmp_path / "j.xml").read_text()).iter("testcase")
    assert [c.find("failure") is not None for c in cases] == [True]

    assert not state.exists()
    assert _processes_naming(str(state)) == []
