"""The HTML report (``-o html``, ``--html-file``) of every report golden input, parsed.

The page is rendered from the same inputs as the text, JSON and JUnit goldens
(``report/*/input.yaml``) and read back: every failed node with its measured value and the bound
it missed, every group, every node of each category's fleet map, the SVG well-formed XML, and
nothing that could run or fetch (no script, no event handler, no external URL, the CSP meta).
No byte golden: the assertions are structural.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from nvcre.report.html import render_html, split_detail
from nvcre.report.model import Report
from tests.golden.report_inputs import report_of

ROOT = Path(__file__).parent / "report"
CASES = sorted(p.parent.name for p in ROOT.glob("*/input.yaml"))
SVG = "{http://www.w3.org/2000/svg}"
VOID = {"meta", "br", "img", "input", "link", "hr", "wbr", "col", "area", "base", "source"}


class _Page(HTMLParser):
    """Tags, attributes and text of a page; checks that every element closes in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.errors: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert not parser.errors, parser.errors[:5]
    assert parser.stack == [], parser.stack
    return parser


def _report(case: str) -> Report:
    return report_of(yaml.safe_load((ROOT / case / "input.yaml").read_text()))


def _svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(chunk) for chunk in re.findall(r"<svg\b.*?</svg>", page, flags=re.S)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_html_report_of_each_golden_input(case: str) -> None:
    report = _report(case)
    page = render_html([report])
    parsed = _parse(page)
    text = " ".join(" ".join(parsed.text).split())

    assert report.name in text and report.result in text
    for category in report.categories:
        assert f"{category.domain}/{category.variant}" in text
        assert category.status in text
        for group in category.bandwidth_groups:
            assert group.group in text
            if group.bus_bandwidth:
                assert group.bus_bandwidth in text
        for metrics in category.group_metrics:
            assert metrics.group in text
        for failed in category.failed_groups:
            assert failed.name in text
            if failed.failure_log and failed.failure_log.tail:
                last = failed.failure_log.tail.strip().splitlines()[-1].strip()
                assert " ".join(last.split()) in text
    # each failed node: a row naming it with its measured value and the bound it missed
    for finding in report.failed_nodes:
        rows = [r for r in parsed.rows if r and r[0] == finding.node]
        assert rows, f"no row for {finding.node}"
        measured, bound = split_detail(finding.detail)
        row = rows[0]
        assert row[1] == finding.group and row[2].startswith(finding.reason)
        assert row[3] == measured
        if bound:
            assert row[4] == bound
        if finding.detail:
            assert measured and re.search(r"\d", measured)

    # the SVG: well-formed, a fleet-map cell per node of each category, each named by a title
    svgs = _svgs(page)
    assert svgs, "no SVG"
    cells = [
        rect
        for svg in svgs
        for group in svg.iter(f"{SVG}g")
        if group.get("class") == "m"
        for rect in group.iter(f"{SVG}rect")
        if rect.find(f"{SVG}title") is not None
    ]
    expected = sum(len(c.nodes) + len(c.excluded_nodes) for c in report.categories)
    assert len(cells) == expected
    named = {(rect.findtext(f"{SVG}title") or "").split(":")[0] for rect in cells}
    for category in report.categories:
        assert {n.name for n in category.nodes} <= named
    failed_cells = {(r.findtext(f"{SVG}title") or "").split(":")[0] for r in cells if r.get("class") == "f"}
    blamed = {f.node for c in report.categories for g in c.failed_groups for f in g.findings}
    assert blamed <= failed_cells

    # self-contained and inert
    tags = [t for t, _ in parsed.tags]
    assert "script" not in tags and "link" not in tags and "iframe" not in tags and "img" not in tags
    for _, attrs in parsed.tags:
        assert not any(name.startswith("on") for name in attrs), attrs
        for name in ("src", "href"):
            value = attrs.get(name) or ""
            assert not value or value.startswith("#"), value
    csp = [a for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and csp[0]["content"] == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "@import" not in page and "url(" not in page


def test_html_report_of_the_isolation_case_names_the_slow_node_and_draws_it_apart() -> None:
    report = _report("isolation")
    page = render_html([report])
    parsed = _parse(page)
    (row,) = {tuple(r) for r in parsed.rows if r and r[0] == "gpu-node-003"}
    assert row[3] == "busbw 194.9 GB/s" and row[4] == "< 400"
    groups, retests = [list(svg.iter(f"{SVG}polyline")) for svg in _svgs(page) if svg.find(f"{SVG}polyline")]
    assert [p.get("class") for p in groups] == ["p", "f"]  # the failed group's line drawn last, apart
    assert (groups[1].findtext(f"{SVG}title") or "").startswith("group-1: peak 19")
    assert [(p.findtext(f"{SVG}title") or "").split(":")[0] for p in retests] == [
        "gpu-node-002 with gpu-node-000",
        "gpu-node-003 with gpu-node-001",
    ]
    assert [p.get("class") for p in retests] == ["p", "f"]
    text = " ".join(" ".join(parsed.text).split())
    assert "gpu-node-003 with gpu-node-001: failed again (19" in text
    assert "passed, cleared (1): gpu-node-002 with gpu-node-000 (4" in text


def test_a_failed_re_test_of_a_node_cleared_by_its_other_re_test_does_not_read_as_its_failure() -> None:
    """Suspects re-tested in pairs on a ring: a healthy node's pair with the bad one fails too,
    and its other pair clears it. The tree says the re-test failed and the node was cleared."""
    report = _report("isolation")
    category = report.categories[0]
    cleared = next(n.name for n in category.nodes if n.status == "Passed")
    with_bad = dataclasses.replace(category.retests[-1], suspect=cleared, partners=("gpu-node-003",))
    category = dataclasses.replace(category, retests=(*category.retests, with_bad))
    text = " ".join(
        " ".join(_parse(render_html([dataclasses.replace(report, categories=(category,))])).text).split()
    )
    assert f"{cleared} with gpu-node-003: re-test failed (19" in text
    assert f"; {cleared} cleared by its other re-test" in text
    assert "gpu-node-003 with gpu-node-001: failed again (19" in text


def test_html_report_of_a_diagnosis_draws_its_rounds_with_the_faulty_node() -> None:
    report = _report("diagnosis")
    assert report.categories[0].diagnosis is not None
    parsed = _parse(render_html([report]))
    faulty = [n for _, names in report.categories[0].diagnosis.faulty_by_domain for n in names]
    assert faulty
    tree = " ".join(" ".join(parsed.text).split())
    assert "Diagnosis" in tree and "Faulty nodes" in tree
    for node in faulty:
        assert node in tree


def test_html_report_escapes_what_the_cluster_says() -> None:
    report = _report("execution-failure")
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    category = report.categories[0]
    groups = tuple(
        dataclasses.replace(
            g,
            reason=hostile,
            failure_log=dataclasses.replace(g.failure_log, tail=hostile) if g.failure_log else None,
        )
        for g in category.failed_groups
    )
    report = dataclasses.replace(
        report,
        name="n<b>",
        categories=(dataclasses.replace(category, failed_groups=groups, reason=hostile),),
    )
    page = render_html([report])
    parsed = _parse(page)
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert hostile in " ".join(parsed.text)


def test_html_report_holds_several_reports() -> None:
    reports = [_report("passing"), _report("threshold-violation")]
    parsed = _parse(render_html(reports))
    text = " ".join(parsed.text)
    assert all(r.name in text for r in reports)
    assert [t for t, _ in parsed.tags].count("h1") == 2


def test_html_report_draws_each_failed_nodes_trend_from_its_record() -> None:
    report = _report("repeat-offenders")
    (trend,) = report.trends
    assert (trend.node, trend.category, trend.key) == (
        "gpu-node-003",
        "communication/nccl-all-reduce",
        "busBandwidthGBps",
    )
    assert [(p.verdict, p.this_run) for p in trend.points] == [
        ("Passed", False),
        ("Failed", False),
        ("Failed", False),
        ("Failed", True),
    ]
    page = render_html([report])
    parsed = _parse(page)
    (row,) = [r for r in parsed.rows if r and r[0] == "gpu-node-003" and r[1] == trend.category]
    assert row[3].startswith("busBandwidthGBps, 4 results: 488.88 GB/s (2026-01-16, Passed) to 194.92 GB/s")
    (spark,) = [svg for svg in _svgs(page) if svg.find(f"{SVG}circle") is not None]
    dots = list(spark.iter(f"{SVG}circle"))
    assert [d.get("class") for d in dots] == ["p", "f", "f", "f now"]
    assert dots[-1].findtext(f"{SVG}title") == "2026-03-02: 194.92 GB/s, Failed (this run)"
    assert _report("isolation").trends == ()  # no records, no trend
