"""Golden pairs of the simulated accelerator: one case per fault kind, plus healthy runs.

Each case is a directory under ``sandbox/`` with ``input.yaml``:

    # What the case shows.
    command: [...]                    # the pod's argv
    nodes: 2                          # aws H100 nodes gpu-node-000.. (default 2)
    faults: [gpu-node-001=hang]       # --fault specs (default none)
    seed: 1                           # default 1
    attempt: 0                        # default 0
    rank: 0                           # the pod's index in the group (default 0)
    log_style: srun                   # --log-style (default plain)

and ``expected.yaml``: the exit code, duration, failed hosts, node effects, whether the log is
served, and the log as the pod prints it, one ``stream: text`` entry a line. Update with ``NVCRE_UPDATE_GOLDEN=1 pytest tests/golden`` and review every
changed file by hand.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvcre.sandbox import Member, node_model, parse_faults, simulate
from nvcre.sandbox.styles import parse_log_style

CASES = Path(__file__).parent / "sandbox"
UPDATE = os.environ.get("NVCRE_UPDATE_GOLDEN") == "1"


def _observed(spec: dict[str, Any]) -> dict[str, Any]:
    names = [f"gpu-node-{i:03d}" for i in range(spec.get("nodes", 2))]
    members = [Member(n, node_model(n, "NVIDIA-H100-80GB-HBM3", "aws")) for n in names]
    sim = simulate(
        spec["command"],
        members,
        parse_faults(spec.get("faults", [])),
        seed=spec.get("seed", 1),
        attempt=spec.get("attempt", 0),
        rank=spec.get("rank", 0),
        style=parse_log_style(spec.get("log_style", "")),
    )
    return {
        "exit_code": sim.exit_code,
        "duration_s": None if sim.duration_s is None else round(sim.duration_s, 3),
        "failed_hosts": list(sim.failed_hosts),
        "log_served": sim.log_served,
        "node_effects": [
            {
                "offset_s": round(e.offset_s, 3),
                "node": e.node,
                "labels": dict(e.change.labels),
                "taints": [f"{t.key}={t.value}:{t.effect}" for t in e.change.taints],
                "conditions": [f"{c.type}={c.status} ({c.reason}): {c.message}" for c in e.change.conditions],
                "missing_gpus": e.change.missing_gpus,
            }
            for e in sim.node_effects
        ],
        "log": [f"{line.stream}: {line.text}" for line in sim.lines],
    }


@pytest.mark.parametrize("case", sorted(p for p in CASES.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    observed = _observed(yaml.safe_load((case / "input.yaml").read_text()))
    expected_file = case / "expected.yaml"
    if UPDATE:
        expected_file.write_text(yaml.safe_dump(observed, sort_keys=False, width=1000, allow_unicode=True))
    expected = yaml.safe_load(expected_file.read_text())
    assert observed == expected
