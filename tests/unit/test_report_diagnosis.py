"""The report's Diagnosis block for what a diagnosis finds: a faulty link between two domains,
a transient failure, a limit; the diagnose status made by the state machine on the model fleet,
on the objects of the ``diagnosis`` golden case."""

from __future__ import annotations

import copy
from typing import Any

from nvcre.orchestration import diagnose as dg
from nvcre.report.jsonreport import to_json
from nvcre.report.text import render_text
from nvcre.testing import diagnose as model
from tests.golden.report_inputs import diagnosis, report_of


def _with_status(status: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(diagnosis())
    data["workflows"][0]["workflow"]["status"]["orchestration"]["diagnose"] = status
    return data


def _block(data: dict[str, Any]) -> list[str]:
    text = render_text(report_of(data))
    block = text.split("│  Diagnosis:")[1].split("│  Bandwidth by group:")[0]
    return [line[1:].rstrip(" │") for line in block.splitlines()[1:-1]]


def _json(data: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = to_json(report_of(data))["categories"][0]["diagnosis"]
    return found


def test_a_bad_link_names_both_domains_and_no_node() -> None:
    fleet = model.fleet_of([2, 2, 2], domain="gpu-node-block-{}", node="gpu-node-{:03d}")
    fleet.links = {frozenset(("gpu-node-block-0", "gpu-node-block-2"))}
    fleet.flaky = {"gpu-node-003"}
    done = model.run(fleet)
    lines = _block(_with_status(done.status))
    assert "    Outcome:  Faulty" in lines
    assert "    Infra:    link gpu-node-block-0 <-> gpu-node-block-2: [g..." in lines
    assert "    Transient: screen-1 (round 1) passed on re-test, not blamed" in lines
    assert not any(line.startswith("    Faulty:") for line in lines)
    found = _json(_with_status(done.status))
    assert found["infrastructureFaults"] == [
        "link gpu-node-block-0 <-> gpu-node-block-2: [gpu-node-000] vs [gpu-node-004] (cross-boundary)"
    ]
    assert found["transientFailures"] == [
        {
            "round": 1,
            "group": "screen-1",
            "nodes": ["gpu-node-002", "gpu-node-003"],
            "stage": "intra-screening",
        }
    ]
    assert found["outcome"] == "Faulty" and "faultyNodes" not in found


def test_an_inconclusive_diagnosis() -> None:
    fleet = model.fleet_of([2, 2], domain="gpu-node-block-{}", node="gpu-node-{:03d}")
    fleet.flaky = {"gpu-node-000"}  # the representative of its domain: re-tested twice
    done = model.run(fleet, dg.Settings())
    assert done.verdict.succeeded
    found = _json(_with_status(done.status))
    assert found["outcome"] == "Inconclusive"
    assert [t["group"] for t in found["transientFailures"]] == ["screen-0", "inter-domain"]


def test_cross_boundary_probing_inside_a_domain() -> None:
    """A link narrowed to the nodes that fail only together, and one whose mixes both passed."""
    nodes = [f"gpu-node-{i:03d}" for i in range(8)]
    domains = {"gpu-node-block-0": nodes, "gpu-node-block-1": ["gpu-node-008", "gpu-node-009"]}
    narrowed = model.run_linked(domains, {"x": nodes[2:4], "y": nodes[6:8]}, ("x", "y"))
    lines = _block(_with_status(narrowed.status))
    assert "    Infra:    gpu-node-block-0: [gpu-node-002, gpu-node-003]..." in lines
    assert _json(_with_status(narrowed.status))["infrastructureFaults"] == [
        "gpu-node-block-0: [gpu-node-002, gpu-node-003] vs [gpu-node-006, gpu-node-007] (cross-boundary)"
    ]
    missed = model.run_linked(domains, {"x": nodes[0:2], "y": nodes[6:8]}, ("x", "y"))
    lines = _block(_with_status(missed.status))
    assert "    Outcome:  Inconclusive" in lines
    assert "    Transient: cross-0 (round 3) both mixes passed, not blamed" in lines
