"""The catalog's DCGM diagnostics on the simulated cluster: ``nvcrectl sandbox run`` of a
Certification with ``dcgm-level1`` and ``dcgm-level3`` on four aws H100 nodes (at 16x speed),
``slow-gpu:1.5`` on gpu-node-001. Each node's pod runs the rendered ``dcgmi diag``, which the
simulated accelerator answers with DCGM 4.5's JSON document and exit status: level 1 (the
software checks) passes on every node; at level 3 targeted_stress fails on GPU 0 of
gpu-node-001 (``Max stress level of ... did not reach desired stress level of 29250.0``), its pod
exits 226 (``DCGM_ST_NVVS_ERROR``) and the report names that node alone, with the document in its
failure log; the node's failure names that test and GPU with DCGM's words (the report nvcre
read), and level 1's Jobs succeeded only on a whole report in which every test passed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nvcre.testing import binaries as bins

ROOT = Path(__file__).resolve().parents[2]
NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
CERTIFICATION = """\
apiVersion: nvcre.nvidia.com/v1alpha1
kind: Certification
metadata:
  name: dcgm-diagnostics
  namespace: nvcre
spec:
  target:
    nodeSelector:
      nvidia.com/gpu.present: "true"
  categories:
    - domain: diagnostics
      variant: dcgm-level1
    - domain: diagnostics
      variant: dcgm-level3
"""


def test_level_3_names_the_slow_gpu_node_alone_with_dcgm_s_own_report(tmp_path: Path) -> None:
    bins.ensure((*bins.REQUIRED, *bins.CHAIN))
    (tmp_path / "cert.yaml").write_text(CERTIFICATION)
    result = subprocess.run(
        [NVCRECTL, "sandbox", "run", str(tmp_path / "cert.yaml"), "--nodes", "4",
         "--fault", "gpu-node-001=slow-gpu:1.5", "--speed", "16", "--state-dir", str(tmp_path / "state"),
         "--results-file", str(tmp_path / "r.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["result"] == "FAILED"
    assert [(c["variant"], c["status"]) for c in report["categories"]] == [
        ("dcgm-level1", "Succeeded"),
        ("dcgm-level3", "Failed"),
    ], out
    assert [n["name"] for n in report["failedNodes"]] == ["gpu-node-001"]
    (finding,) = report["failedNodes"]
    assert finding["reason"] == "WorkloadFailed"
    assert (
        "dcgmi diag level 3: 1 of 8 tests failed: targeted_stress on GPU 0 (Max stress level of"
        in finding["message"]
    ), "the node's failure names the test, the GPU and DCGM's measured number"
    (group,) = report["categories"][1]["failedGroups"]
    assert group["nodes"] == ["gpu-node-001"]
    log = group["failureLog"]
    assert (log["nodeName"], log["exitCode"]) == ("gpu-node-001", 226)
    assert '"name" : "targeted_stress"' in log["tail"]
    assert "did not reach desired stress level of 29250.0 for GPU 0" in log["tail"]
