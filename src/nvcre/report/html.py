"""The report as one self-contained HTML page (pure): inline CSS and SVG, no script.

The fourth renderer of :class:`nvcre.report.model.Report`, beside the box report, JSON and JUnit:
per category the verdict, a fleet map (every node a cell, grouped by topology domain, coloured by
verdict, named on hover by an SVG ``<title>`` and in a table for screen readers), the bus
bandwidth of each group against its threshold or expected floor, bus bandwidth against message
size per group, training goodput and step time per group, the diagnosis or isolation rounds as
a tree, and every failed node with its measured value, threshold, reason and failure log.

This module computes the geometry; ``templates/report.html.j2`` writes the page with Jinja2's
autoescaping on, so every name, message and log tail is escaped. The page's Content-Security-
Policy (``default-src 'none'``) forbids any script, font or request: it reads the same offline.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Final

import jinja2

from nvcre.report.model import CategoryReport, GroupBandwidth, NodeFinding, Report
from nvcre.report.text import LOG_BYTES, human_size
from nvcre.report.trends import NodeTrend

CELL: Final = 10
"""A fleet-map cell's side in px."""
PITCH: Final = 12
COLUMNS: Final = 64
"""Cells per line of a domain's block."""
LABELLED_BARS: Final = 64
"""Up to this many groups a bar chart names each bar; beyond, bars are thin and named on hover."""
PLOT_WIDTH: Final = 420
LINE_W: Final = 640
LINE_H: Final = 260

STATE_CLASS: Final = {"Passed": "p", "Failed": "f", "Pending": "r", "Excluded": "x"}
STATE_TEXT: Final = {"p": "passed", "f": "failed", "r": "not finished", "x": "excluded"}


# --- the fleet map --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    x: int
    y: int
    node: str
    state: str
    """``p`` passed, ``f`` failed, ``r`` not finished, ``x`` excluded (the CSS class)."""
    group: str


@dataclass(frozen=True)
class Block:
    label: str
    y: int
    cells: tuple[Cell, ...]
    failed: tuple[str, ...]
    other: tuple[str, ...]
    passed: tuple[str, ...]


@dataclass(frozen=True)
class FleetMap:
    width: int
    height: int
    blocks: tuple[Block, ...]
    counts: tuple[tuple[str, int], ...]


def _cell_state(node: str, status: str, group: str, blamed: set[str], failed_groups: set[str]) -> str:
    """Passed; failed when blamed or in a failed group (an execution failure blames no node);
    else not finished."""
    if status == "Passed":
        return "p"
    if node in blamed or group in failed_groups:
        return "f"
    return "r"


def fleet_map(category: CategoryReport) -> FleetMap | None:
    """Every node of the category as a cell, one block per topology domain (sorted byte-wise;
    one unnamed block when the run has no domains), then its excluded nodes."""
    if not category.nodes and not category.excluded_nodes:
        return None
    blamed = {f.node for g in category.failed_groups for f in g.findings}
    failed_groups = {g.name for g in category.failed_groups}
    domains: dict[str, list[Cell]] = {}
    for node in category.nodes:
        state = _cell_state(node.name, node.status, node.group, blamed, failed_groups)
        domains.setdefault(node.rack, []).append(Cell(0, 0, node.name, state, node.group))
    if category.excluded_nodes:
        domains["excluded"] = [Cell(0, 0, n, "x", "") for n in sorted(category.excluded_nodes)]
    blocks, y, widest = [], 0, 0
    for name in sorted(domains, key=lambda d: (d == "excluded" and bool(category.excluded_nodes), d)):
        members = sorted(domains[name], key=lambda c: c.node)
        y += 16
        cells = tuple(
            Cell((i % COLUMNS) * PITCH, y + (i // COLUMNS) * PITCH, c.node, c.state, c.group)
            for i, c in enumerate(members)
        )
        widest = max(widest, min(len(members), COLUMNS))
        failed = tuple(c.node for c in members if c.state == "f")
        label = name or "no topology domain"
        label += f" · {len(members)} node{'s' if len(members) != 1 else ''}"
        if failed:
            label += f" · {len(failed)} failed"
        blocks.append(
            Block(
                label=label,
                y=y - 4,
                cells=cells,
                failed=failed,
                other=tuple(c.node for c in members if c.state in ("r", "x")),
                passed=tuple(c.node for c in members if c.state == "p"),
            )
        )
        y += math.ceil(len(members) / COLUMNS) * PITCH + 4
    counts: dict[str, int] = {}
    for block in blocks:
        for cell in block.cells:
            counts[cell.state] = counts.get(cell.state, 0) + 1
    return FleetMap(
        width=max(widest * PITCH, 260),
        height=y,
        blocks=tuple(blocks),
        counts=tuple((STATE_TEXT[s], counts[s]) for s in ("f", "r", "x", "p") if s in counts),
    )


# --- bar charts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    y: int
    label: str
    width: float
    value: str
    state: str
    """``p`` passed, ``f`` failed or low, ``r`` not finished."""
    title: str
    limit_x: float | None = None


@dataclass(frozen=True)
class BarChart:
    caption: str
    width: int
    height: int
    label_width: int
    row: int
    labelled: bool
    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]
    limit: str = ""
    limit_x: float | None = None
    """One mark across every bar when all share the bound (else each bar has its own)."""


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exponent = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exponent:
            return float(step * exponent)
    return float(10 * exponent)


def _ticks(top: float, scale: float, fmt: str = "{:g}") -> tuple[tuple[float, str], ...]:
    return tuple((round(top * i / 4 * scale, 1), fmt.format(round(top * i / 4, 3))) for i in range(5))


@dataclass(frozen=True)
class _Row:
    label: str
    value: float | None
    text: str
    state: str
    title: str
    limit: float | None = None


def _bar_chart(caption: str, rows: Sequence[_Row], *, limit: str = "", unit: str = "") -> BarChart | None:
    if not any(r.value is not None for r in rows):
        return None
    labelled = len(rows) <= LABELLED_BARS
    row = 18 if labelled else 4
    top = _nice_max(max([r.value or 0.0 for r in rows] + [r.limit or 0.0 for r in rows]))
    scale = PLOT_WIDTH / top
    label_width = min(max(len(r.label) for r in rows) * 7 + 12, 200) if labelled else 8
    bars = tuple(
        Bar(
            y=i * row,
            label=r.label,
            width=round((r.value or 0.0) * scale, 1),
            value=r.text,
            state=r.state,
            title=r.title,
            limit_x=round(r.limit * scale, 1) if r.limit is not None else None,
        )
        for i, r in enumerate(rows)
    )
    shared = {b.limit_x for b in bars}
    if len(shared) == 1 and None not in shared:
        bars = tuple(dataclasses.replace(b, limit_x=None) for b in bars)
    return BarChart(
        limit_x=shared.pop() if len(shared) == 1 else None,
        caption=caption,
        width=label_width + PLOT_WIDTH + 110,
        height=len(rows) * row + 22,
        label_width=label_width,
        row=row,
        labelled=labelled,
        bars=bars,
        ticks=_ticks(top, scale, "{:g}" + unit),
        limit=limit,
    )


def _group_state(group: GroupBandwidth) -> str:
    if not group.finished:
        return "r"
    return "f" if not group.passed or group.low else "p"


def bandwidth_bars(category: CategoryReport) -> BarChart | None:
    """Each group's best bus bandwidth, its threshold or floor marked on its bar."""
    rows = []
    for g in category.bandwidth_groups:
        title = f"{g.group}: {g.bus_bandwidth or 'no data'}"
        if g.limit:
            title += f" ({g.limit})"
        if g.provisional:
            title += " (provisional)"
        if g.failed_nodes:
            title += f"; failed nodes: {', '.join(g.failed_nodes)}"
        rows.append(_Row(g.group, g.value_gbps, g.bus_bandwidth, _group_state(g), title, g.limit_gbps))
    limits = sorted({g.limit for g in category.bandwidth_groups if g.limit})
    return _bar_chart("Bus bandwidth by group (GB/s)", rows, limit="; ".join(limits))


def training_bars(category: CategoryReport) -> list[BarChart]:
    """Goodput and step time per training group."""
    metrics = category.group_metrics
    out = []
    for caption, attribute, fmt in (
        ("Goodput by group", "goodput", "{:.3f}"),
        ("Step time by group (s)", "step_time_sec", "{:.2f} s"),
        ("TFLOPs per GPU by group", "tflops_per_gpu", "{:.1f}"),
    ):
        rows = []
        for m in metrics:
            value = getattr(m, attribute)
            text = fmt.format(value) if value is not None else "no data"
            state = "f" if not m.passed else ("r" if m.provisional else "p")
            rows.append(_Row(m.group, value, text, state, f"{m.group} ({len(m.nodes)} nodes): {text}"))
        chart = _bar_chart(caption, rows)
        if chart:
            out.append(chart)
    return out


# --- bus bandwidth against message size -----------------------------------------------------


@dataclass(frozen=True)
class Series:
    points: str
    state: str
    title: str


@dataclass(frozen=True)
class LineChart:
    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    series: tuple[Series, ...]
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]
    limit_y: float | None
    limit: str
    apart: tuple[str, ...]
    passing: int


def _values(rows: Iterable[tuple[int, str]]) -> list[tuple[int, float]]:
    out = []
    for size, text in rows:
        try:
            value = float(text)
        except ValueError:
            continue
        if size > 0 and value == value:
            out.append((size, value))
    return out


def size_chart(category: CategoryReport) -> LineChart | None:
    """Bus bandwidth against message size: one line per group (the category's aggregate when no
    group has its own), failed or low groups drawn apart in red and on top."""
    curves: list[tuple[str, str, list[tuple[int, float]]]] = []
    for g in category.bandwidth_groups:
        points = _values((r.size_bytes, r.bus_bw) for r in g.sizes)
        if points:
            curves.append((g.group, _group_state(g), points))
    if not curves:
        points = _values((r.size_bytes, r.bus_bw) for r in category.bandwidth)
        if not points:
            return None
        curves.append(("all groups", "p", points))
    bounds = [(g.limit_gbps, g.limit) for g in category.bandwidth_groups if g.limit_gbps is not None]
    return _lines(curves, bounds)


def retest_chart(category: CategoryReport) -> LineChart | None:
    """The isolation re-tests' bus bandwidth against message size: one line per re-test, those
    that failed again in red."""
    curves = [
        (f"{r.suspect} with {', '.join(r.partners)}", "p" if r.passed else "f", points)
        for r in category.retests
        if (points := _values((row.size_bytes, row.bus_bw) for row in r.sizes))
    ]
    bounds = [(r.limit_gbps, r.limit) for r in category.retests if r.limit_gbps is not None]
    return _lines(curves, bounds) if curves else None


def _lines(
    curves: list[tuple[str, str, list[tuple[int, float]]]], bounds: list[tuple[float, str]]
) -> LineChart:
    sizes = [s for _, _, pts in curves for s, _ in pts]
    low, high = math.log2(min(sizes)), math.log2(max(sizes))
    span = max(high - low, 1.0)
    limits = [b for b, _ in bounds]
    top = _nice_max(max([v for _, _, pts in curves for _, v in pts] + limits))
    left, top_margin, plot_w, plot_h = 56, 10, LINE_W - 76, LINE_H - 46

    def x(size: int) -> float:
        return round(left + (math.log2(size) - low) / span * plot_w)

    def y(value: float) -> float:
        return round(top_margin + plot_h - value / top * plot_h)

    order = sorted(curves, key=lambda c: (c[1] == "f", c[0]))
    series = tuple(
        Series(
            points=" ".join(f"{x(s)},{y(v)}" for s, v in pts),
            state=state,
            title=f"{name}: peak {max(v for _, v in pts):.2f} GB/s",
        )
        for name, state, pts in order
    )
    x_ticks = tuple(
        (x(2**p), human_size(2**p).replace(" ", ""))
        for p in range(math.ceil(low), math.floor(high) + 1)
        if p % 4 == 3
    )
    y_ticks = tuple((y(top * i / 4), f"{top * i / 4:g}") for i in range(5))
    limit = max(limits) if limits else None
    return LineChart(
        width=LINE_W,
        height=LINE_H,
        left=left,
        top=top_margin,
        plot_w=plot_w,
        plot_h=plot_h,
        series=series,
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        limit_y=y(limit) if limit is not None else None,
        limit="; ".join(sorted({text for _, text in bounds if text})),
        apart=tuple(name for name, state, _ in curves if state == "f"),
        passing=sum(1 for _, state, _ in curves if state != "f"),
    )


# --- failed nodes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FailedRow:
    node: str
    group: str
    reason: str
    cause: str
    measured: str
    threshold: str
    message: str


def _threshold_of(report: Report) -> dict[str, str]:
    out: dict[str, str] = {}
    for category in report.categories:
        for g in category.bandwidth_groups:
            if g.limit:
                out.setdefault(g.group, g.limit)
    return out


_BOUND: Final = re.compile(r" (?=(?:<=|>=|==|!=|<|>|violates) )")


def split_detail(detail: str) -> tuple[str, str]:
    """``busbw 194.9 GB/s < 400`` as (``busbw 194.9 GB/s``, ``< 400``); each of several
    violations (``; ``-joined) split alike."""
    measured, bounds = [], []
    for part in filter(None, detail.split("; ")):
        pieces = _BOUND.split(part, maxsplit=1)
        measured.append(pieces[0])
        bounds.append(pieces[1] if len(pieces) > 1 else "")
    return "; ".join(measured), "; ".join(b for b in bounds if b)


def failed_rows(findings: Iterable[NodeFinding], limits: dict[str, str]) -> list[FailedRow]:
    """Each failed node: its measured value and the bound it missed (read from the finding, else
    its group's bandwidth threshold or floor)."""
    out = []
    for f in findings:
        measured, bound = split_detail(f.detail)
        out.append(
            FailedRow(
                node=f.node,
                group=f.group,
                reason=f.reason,
                cause=f.cause if f.cause != f.reason else "",
                measured=measured,
                threshold=bound or limits.get(f.group, ""),
                message=f.message,
            )
        )
    return out


# --- a failed node's trend across runs -----------------------------------------------------


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    state: str
    this_run: bool
    title: str


@dataclass(frozen=True)
class Spark:
    node: str
    category: str
    label: str
    width: int
    height: int
    points: str
    dots: tuple[Dot, ...]
    summary: str


SPARK_STEP: Final = 28
SPARK_H: Final = 44


def sparkline(trend: NodeTrend) -> Spark | None:
    """The node's last results of one category as a small line, each result a dot coloured by its
    verdict (this run's ringed), named on hover."""
    measured = [p for p in trend.points if p.value is not None]
    if not measured:
        return None
    values = [p.value for p in measured if p.value is not None]
    low, high = min(values), max(values)
    span = (high - low) or max(abs(high), 1.0)
    unit = f" {trend.unit}" if trend.unit else ""
    dots = []
    for i, point in enumerate(measured):
        value = point.value if point.value is not None else low
        state = {"Passed": "p", "Failed": "f"}.get(point.verdict, "r")
        title = f"{point.time[:10]}: {value:g}{unit}, {point.verdict or 'no verdict'}"
        dots.append(
            Dot(
                x=8 + i * SPARK_STEP,
                y=round(6 + (high - value) / span * (SPARK_H - 12), 1),
                state=state,
                this_run=point.this_run,
                title=title + (" (this run)" if point.this_run else ""),
            )
        )
    first, last = measured[0], measured[-1]
    return Spark(
        node=trend.node,
        category=trend.category,
        label=trend.key,
        width=16 + (len(dots) - 1) * SPARK_STEP,
        height=SPARK_H,
        points=" ".join(f"{d.x},{d.y}" for d in dots),
        dots=tuple(dots),
        summary=(
            f"{len(measured)} result{'s' if len(measured) != 1 else ''}: "
            f"{first.value:g}{unit} ({first.time[:10]}, {first.verdict}) to "
            f"{last.value:g}{unit} ({last.time[:10]}, {last.verdict})"
        ),
    )


# --- the page -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CategoryView:
    card: CategoryReport
    anchor: str
    fleet: FleetMap | None
    bars: BarChart | None
    sizes: LineChart | None
    retests: LineChart | None
    training: tuple[BarChart, ...]
    failed: tuple[FailedRow, ...]
    logs: tuple[tuple[str, str, str], ...] = field(default=())
    """(group, the captured failure's header, its log tail) per execution-failed group."""


def _tail(text: str) -> str:
    data = text.encode()
    return data[-LOG_BYTES:].decode(errors="ignore")


def category_view(category: CategoryReport, index: int, limits: dict[str, str]) -> CategoryView:
    findings = [f for g in category.failed_groups for f in g.findings]
    logs = tuple(
        (
            g.name,
            f"pod {g.failure_log.pod} on {g.failure_log.node}, exit code {g.failure_log.exit_code}"
            + (f" ({g.failure_log.reason})" if g.failure_log.reason else ""),
            _tail(g.failure_log.tail),
        )
        for g in category.failed_groups
        if g.failure_log is not None
    )
    return CategoryView(
        card=category,
        anchor=f"c{index}",
        fleet=fleet_map(category),
        bars=bandwidth_bars(category),
        sizes=size_chart(category),
        retests=retest_chart(category),
        training=tuple(training_bars(category)),
        failed=tuple(failed_rows(findings, limits)),
        logs=logs,
    )


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nvcre.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["STATE_TEXT"] = STATE_TEXT
    return env


def _summary(report: Report) -> str:
    passed = sum(1 for c in report.categories if c.status == "Succeeded")
    text = f"{passed}/{len(report.categories)} categories passed"
    if report.failed_nodes:
        names = ", ".join(f.node for f in report.failed_nodes[:5])
        more = f" and {len(report.failed_nodes) - 5} more" if len(report.failed_nodes) > 5 else ""
        text += f"; {len(report.failed_nodes)} failed node{'s' if len(report.failed_nodes) != 1 else ''}: {names}{more}"
    if report.excluded_nodes:
        text += f"; {len(report.excluded_nodes)} excluded"
    return text


def render_html(reports: Sequence[Report]) -> str:
    """One page holding each report, in order."""
    views = []
    for r_index, report in enumerate(reports):
        limits = _threshold_of(report)
        views.append(
            (
                report,
                _summary(report),
                [category_view(c, r_index * 1000 + i, limits) for i, c in enumerate(report.categories)],
                failed_rows(report.failed_nodes, limits),
                [spark for t in report.trends if (spark := sparkline(t)) is not None],
            )
        )
    title = ", ".join(f"{r.kind} {r.name}" for r in reports) or "Report"
    return _environment().get_template("report.html.j2").render(title=title, views=views)
