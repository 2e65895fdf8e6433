"""A run's provenance in the report: the card's block, the JSON report's and the JUnit properties,
from a status record the Workflow's rule (nvcre.decide.provenance) made."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from nvcre.decide.provenance import fold, status
from nvcre.report.build import category_report
from nvcre.report.jsonreport import to_json
from nvcre.report.junit import render_junit
from nvcre.report.model import Report
from nvcre.report.text import category_lines
from nvcre.testing.builders import Workflow

PINNED = "nvcr.io/nvidia/pytorch:26.01-py3@sha256:" + "a" * 64
RAN_AS = "nvcr.io/nvidia/pytorch@sha256:" + "b" * 64


def _record() -> dict[str, object]:
    """A Workflow whose spec pins its image by digest, and a pod that ran another digest."""
    spec = Workflow("wf").with_runtime().obj()["spec"]
    spec["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["image"] = PINNED
    images = fold([], [PINNED], [{"image": "nvcr.io/nvidia/pytorch:26.01-py3", "imageID": RAN_AS}])
    return status(spec, images)


def test_the_card_json_and_junit_say_what_ran_and_what_did_not_match() -> None:
    record = _record()
    card, _ = category_report("workloadrun", "run", "Succeeded", None, provenance=record)
    mismatch = f"a pod ran {PINNED} as sha256:{'b' * 64}, not the pinned sha256:{'a' * 64}"

    lines = category_lines(card)
    block = lines[lines.index("  Provenance:") :]
    # the card cuts digests to 12 hex digits; the JSON report has them whole
    assert block[:4] == [
        "  Provenance:",
        f"    Spec:  {str(record['specDigest'])[:19]}",
        f"    ✗  nvcr.io/nvidia/pytorch:26.01-py3@sha256:{'a' * 12}",
        f"         sha256:{'b' * 12}",
    ]
    assert " ".join(line.strip() for line in block[4:]) == (
        f"a pod ran nvcr.io/nvidia/pytorch:26.01-py3@sha256:{'a' * 12} as sha256:{'b' * 12}, "
        f"not the pinned sha256:{'a' * 12}"
    )

    report = Report(kind="WorkloadRun", name="run", namespace="ns", result="PASSED", categories=(card,))
    assert to_json(report)["categories"][0]["provenance"] == {
        "specDigest": record["specDigest"],
        "images": [{"image": PINNED, "imageIDs": [RAN_AS], "mismatch": mismatch}],
    }
    suite = ET.fromstring(render_junit([report])).find("testsuite")
    assert suite is not None
    properties = [(p.get("name"), p.get("value")) for p in suite.iter("property")]
    assert properties == [
        ("workloadrun/run/specDigest", record["specDigest"]),
        ("workloadrun/run/image", f"{PINNED} {RAN_AS}"),
        ("workloadrun/run/imageMismatch", mismatch),
    ]
    assert suite[0].tag == "properties", "the schema puts a suite's properties first"


def test_a_run_without_provenance_has_no_block_and_no_properties() -> None:
    card, _ = category_report("workloadrun", "run", "Pending", None)
    assert "  Provenance:" not in category_lines(card)
    report = Report(kind="WorkloadRun", name="run", namespace="ns", result="RUNNING", categories=(card,))
    assert "provenance" not in to_json(report)["categories"][0]
    assert "<properties>" not in render_junit([report])
