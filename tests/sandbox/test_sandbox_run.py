"""The README's main command: ``nvcrectl sandbox run examples/certification/gpu-cluster-cert.yaml
--fault gpu-node-007=slow-nic:0.4`` (at 16x speed here, to keep CI short) brings up 16
simulated aws H100 nodes, runs the seed example's all-reduce over all of them as one group (it
fails against the expected floor), screens the 16 nodes in pairs with their neighbours, runs the
training category, prints the report naming gpu-node-007 alone with its pair's value against the
floor, tears the sandbox down and exits 1; the JSON, JUnit and HTML files say the same."""

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


def test_the_readme_command_names_the_slow_node_alone_and_leaves_nothing(tmp_path: Path) -> None:
    bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    state = tmp_path / "state"
    result = subprocess.run(
        [NVCRECTL, "sandbox", "run", "examples/certification/gpu-cluster-cert.yaml",
         "--fault", "gpu-node-007=slow-nic:0.4", "--speed", "16", "--state-dir", str(state),
         "--results-file", str(tmp_path / "r.json"), "--junit-file", str(tmp_path / "j.xml"),
         "--html-file", str(tmp_path / "r.html")],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "16 NVIDIA-H100-80GB-HBM3 nodes (aws), gpu-node-007=slow-nic:0.4, 16x speed" in result.stderr
    assert "[watch] Certification failed." in result.stderr
    assert "Categories:   1/2 passed" in result.stderr
    assert "Result:       FAILED" in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "Failed Nodes:" in x]
    assert re.search(r"Failed Nodes: gpu-node-007  busbw \d+\.\d GB/s < floor 389\.7", line), line
    assert result.stderr.rstrip().endswith("Error: certification failed")

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["result"] == "FAILED"
    assert [c["status"] for c in report["categories"]] == ["Failed", "Succeeded"]
    (failed,) = report["failedNodes"]
    assert (failed["name"], failed["reason"], failed["cause"]) == (
        "gpu-node-007",
        "ThresholdViolation",
        "BelowExpected",
    ), report
    assert "floor 389.67 GB/s (80% of expected; row h100/aws/all_reduce/2-nodes)" in failed["message"]
    assert failed["message"].endswith(
        "(re-tested in pairs, failing with each of gpu-node-006 and gpu-node-008)"
    )
    # each category says what it ran: the digest of its spec and its images, none other than rendered
    for card in report["categories"]:
        provenance = card["provenance"]
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", provenance["specDigest"]), card
        assert provenance["images"] and all(
            i["imageIDs"] == [f"kwok://{i['image']}"] and "mismatch" not in i for i in provenance["images"]
        ), provenance
    suite = ET.fromstring((tmp_path / "j.xml").read_text()).find("testsuite")
    assert suite is not None
    names = {p.get("name") for p in suite.iter("property")}
    assert {f"{c['domain']}/{c['variant']}/specDigest" for c in report["categories"]} <= names
    cases = suite.iter("testcase")
    assert [c.find("failure") is not None for c in cases] == [True, False]
    page = (tmp_path / "r.html").read_text()
    assert "1 failed node: gpu-node-007" in page  # the summary line
    assert '<td class="bad">gpu-node-007</td>' in page  # its row: measured value, bound, reason
    assert re.search(r"<td>busbw \d+\.\d GB/s</td><td>&lt; floor 389\.7 GB/s", page)
    assert "<title>gpu-node-007: failed" in page  # its fleet-map cell

    assert not state.exists()
    assert _processes_naming(str(state)) == []
