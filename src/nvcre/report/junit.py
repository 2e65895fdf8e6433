"""JUnit XML of reports (ADR-088): one ``<testsuite>`` per report, one ``<testcase>`` per category.

A failed category carries a ``<failure>``; a category not finished is ``<skipped>``. A report that
is running, empty, ``INCOMPLETE`` or stopped as a whole (its node limit, its deadline) adds a
testcase with an ``<error>``, so CI never reads it as a pass. The layout is the one CI systems read (Jenkins, GitLab, the junit-10 schema):
``testsuites > testsuite > testcase > failure|error|skipped``, with ``tests``/``failures``/
``errors``/``skipped`` counts on each suite and on the root; each suite's ``properties`` (first,
as the schema orders them) record what its categories ran: spec digests and images by digest.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from nvcre.report.model import CategoryReport, Report


def _failure_text(category: CategoryReport) -> str:
    lines = [category.reason] if category.reason else []
    for group in category.failed_groups:
        lines.append(f"{group.name} ({len(group.nodes)} nodes): {group.reason}")
        findings = {f.node: f for f in group.findings}
        for node in group.nodes:
            finding = findings.get(node)
            lines.append(f"  - {node}  {finding.summary}" if finding else f"  - {node}")
    return "\n".join(lines)


def _report_error(report: Report) -> str | None:
    if report.stopped is not None:  # a refused run has no failed category to say so
        return f"{report.kind} {report.name} was stopped ({report.stopped.reason}): {report.stopped.message}"
    if report.result == "RUNNING":
        return f"{report.kind} {report.name} has not finished"
    if report.result == "INCOMPLETE":
        return (
            f"{report.kind} {report.name} passed but excluded {len(report.excluded_nodes)} target node(s): "
            f"{', '.join(report.excluded_nodes)}"
        )
    if not report.categories:
        return f"{report.kind} {report.name} has no categories"
    return None


def _properties(report: Report) -> list[tuple[str, str]]:
    """The suite's properties: whether the ended run's resources were released, then each
    category's provenance as ``<domain>/<variant>/<what>``: its ``specDigest``, one ``image`` per
    image and digest it ran (``<image> <imageID>``), each ``imageMismatch``."""
    out: list[tuple[str, str]] = []
    if report.release is not None:  # whether the ended run's resources are gone
        release = report.release
        out.append(
            ("resourcesReleased", "yes" if release.released else f"no ({release.reason}): {release.message}")
        )
    for category in report.categories:
        key = f"{category.domain}/{category.variant}"
        if category.spec_digest:
            out.append((f"{key}/specDigest", category.spec_digest))
        for image in category.images:
            out.extend((f"{key}/image", f"{image.image} {image_id}") for image_id in image.image_ids)
            if image.mismatch:
                out.append((f"{key}/imageMismatch", image.mismatch))
    return out


def _suite(report: Report) -> ET.Element:
    suite = ET.Element("testsuite", name=report.name)
    properties = _properties(report)
    if properties:
        holder = ET.SubElement(suite, "properties")
        for name, text in properties:
            ET.SubElement(holder, "property", name=name, value=text)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for category in report.categories:
        case = ET.SubElement(
            suite,
            "testcase",
            name=f"{category.domain}/{category.variant}",
            classname=f"{report.kind.lower()}.{report.name}",
            time="0",
        )
        counts["tests"] += 1
        if category.status == "Failed":
            failure = ET.SubElement(case, "failure", message=category.reason or "Failed", type="Failed")
            failure.text = _failure_text(category)
            counts["failures"] += 1
        elif category.status != "Succeeded":
            ET.SubElement(case, "skipped", message=category.status)
            counts["skipped"] += 1
    error = _report_error(report)
    if error is not None:
        case = ET.SubElement(
            suite, "testcase", name="result", classname=f"{report.kind.lower()}.{report.name}", time="0"
        )
        ET.SubElement(case, "error", message=error, type=report.result)
        counts["tests"] += 1
        counts["errors"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", "0")
    return suite


def render_junit(reports: Sequence[Report]) -> str:
    """The JUnit XML document of ``reports``, with an XML declaration and a final newline."""
    root = ET.Element("testsuites", name="nvcre")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for report in reports:
        suite = _suite(report)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key) or 0)
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
