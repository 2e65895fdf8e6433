"""The box report of cli.md 4.5: 66 columns, header box, one card per category, summary card."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from typing import Final

from nvcre.report.history import NodeHistory
from nvcre.report.model import (
    CategoryReport,
    Diagnosis,
    DomainMetrics,
    FailedGroup,
    FailureLog,
    NodeFinding,
    Report,
)

WIDTH: Final = 66
INNER: Final = WIDTH - 2
"""Characters between a card's borders."""
TEXT: Final = INNER - 1
"""The most a card line may hold: one space stays before the right border."""
LOG_LINES: Final = 20
LOG_BYTES: Final = 4 * 1024
ICON: Final = {"Succeeded": "✓", "Restarted": "↻", "Failed": "✗", "Running": "⋯"}
SHA256: Final = re.compile(r"(sha256:[0-9a-f]{12})[0-9a-f]{52}")
HISTORY_LINES: Final = 20
"""Nodes listed per block of the Node History card (the JSON report lists them all)."""


def fit(text: str, width: int = TEXT) -> str:
    """``text`` cut to ``width`` characters, ending in ``...`` when cut."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _line(text: str = "") -> str:
    """A card line; a nested box's own right border may take the last but one column."""
    kept = text if len(text.rstrip()) <= TEXT else fit(text)
    return "│" + kept.ljust(INNER) + "│"


def _card(title: str, body: Iterable[str]) -> list[str]:
    return [
        "┌" + "─" * INNER + "┐",
        _line(f"  {title}"),
        "├" + "─" * INNER + "┤",
        *(_line(text) for text in body),
        "└" + "─" * INNER + "┘",
    ]


def human_size(size: int) -> str:
    """Bytes with 1024 multiples: ``8 GB``, ``512 KB``, ``1.5 MB``."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _field(label: str, value: str) -> str:
    return f"  {label:<11}{value}"


def _log_lines(log: FailureLog, indent: str) -> list[str]:
    """The captured failure, then at most 20 wrapped lines / 4 KiB of its log tail."""
    out = [
        f"{indent}Pod:       {log.pod}",
        f"{indent}Node:      {log.node}",
        f"{indent}Exit code: {log.exit_code}" + (f" ({log.reason})" if log.reason else ""),
    ]
    if not log.tail:
        return out
    data = log.tail.encode()
    kept = data[-LOG_BYTES:].decode(errors="ignore")
    cut = len(kept.encode()) < len(data)
    source = kept.splitlines()
    if cut and len(source) > 1:
        source = source[1:]  # the first line kept is a partial one
    width = TEXT - len(indent) - 2
    wrapped = [piece for line in source for piece in (textwrap.wrap(line, width) or [""])]
    if len(wrapped) > LOG_LINES:
        wrapped = wrapped[-LOG_LINES:]
        cut = True
    out.append(f"{indent}Log tail:")
    out.extend(f"{indent}  {piece}" for piece in wrapped)
    if cut:
        out.append(f"{indent}(log truncated: last {len(wrapped)} lines shown)")
    return out


def _finding_text(finding: NodeFinding) -> str:
    return f"{finding.node}  {finding.summary}"


def _failed_groups(groups: Iterable[FailedGroup]) -> list[str]:
    out = ["", "  Failed Groups:"]
    for group in groups:
        out.append(f"      ✗  {group.name} ({len(group.nodes)} nodes)")
        if group.reason:
            out.append(f"         {group.reason}")
        if group.failure_log is not None:
            out.extend(_log_lines(group.failure_log, "         "))
        findings = {f.node: f for f in group.findings}
        for node in group.nodes:
            finding = findings.get(node)
            out.append(f"           - {_finding_text(finding) if finding else node}")
    return out


def _metric_lines(metrics: DomainMetrics) -> list[str]:
    mark = " (provisional)" if metrics.provisional else ""
    out = []
    if metrics.goodput is not None:
        out.append(f"Avg Runtime Goodput:  {metrics.goodput:.2f} ({metrics.goodput * 100:.0f}%){mark}")
    if metrics.tflops_per_gpu is not None:
        out.append(f"Avg TFLOPs/GPU:  {metrics.tflops_per_gpu:.1f}{mark}")
    if metrics.step_time_sec is not None:
        out.append(f"Avg Step Time:  {metrics.step_time_sec:.2f}s{mark}")
    if metrics.interruptions is not None:
        lost = f" (lost work {metrics.lost_work_sec or 0.0:.0f}s)" if metrics.interruptions else ""
        out.append(f"Interruptions:  {metrics.interruptions}{lost}{mark}")
    return out


def _metrics(all_metrics: Iterable[DomainMetrics]) -> list[str]:
    out: list[str] = []
    for metrics in all_metrics:
        out.append("")
        if not metrics.name:
            out.extend(f"  {text}" for text in _metric_lines(metrics))
            continue
        box = INNER - 3  # "  ┌...┐ " inside the card
        title = f" {metrics.name} ({metrics.node_count} nodes) "
        out.append("  ┌" + fit(title, box - 2).ljust(box - 2, "─") + "┐ ")
        out.extend("  │" + fit(f"  {text}", box - 2).ljust(box - 2) + "│ " for text in _metric_lines(metrics))
        out.append("  └" + "─" * (box - 2) + "┘ ")
    return out


def _diagnosis(diagnosis: Diagnosis) -> list[str]:
    out = [
        "",
        "  Diagnosis:",
        f"    Stage:    {diagnosis.stage or 'pending'}",
        f"    Rounds:   {diagnosis.rounds}",
    ]
    if diagnosis.outcome:
        out.append(f"    Outcome:  {diagnosis.outcome}")
    if diagnosis.limit:
        out.append(f"    Limit:    {diagnosis.limit}")
    out.append(f"    Healthy:  {len(diagnosis.healthy)} nodes")
    if diagnosis.suspect:
        out.append(f"    Suspect:  {len(diagnosis.suspect)} ({', '.join(diagnosis.suspect)})")
    if diagnosis.faulty_by_domain:
        out.append("    Faulty:")
        out.extend(f"      {domain}: {', '.join(nodes)}" for domain, nodes in diagnosis.faulty_by_domain)
    for fault in diagnosis.infra:
        out.append(f"    Infra:    {fault}")
    for seen in diagnosis.transient:
        how = "both mixes passed" if seen.stage == "cross-boundary" else "passed on re-test"
        out.append(f"    Transient: {seen.group} (round {seen.round}) {how}, not blamed")
    if diagnosis.max_bw:
        out.append(f"    Max BW:   {diagnosis.max_bw}")
    if diagnosis.min_bw:
        out.append(f"    Min BW:   {diagnosis.min_bw}")
    if diagnosis.test_results:
        out.append("    Test Results:")
        for stage in diagnosis.test_results:
            failed = f" ({', '.join(stage.failed)})" if stage.failed else ""
            out.append(f"      {stage.stage}: {len(stage.passed)} passed, {len(stage.failed)} failed{failed}")
    return out


def _bandwidth(category: CategoryReport) -> list[str]:
    out: list[str] = []
    if category.bandwidth_groups:
        out += ["", "  Bandwidth by group:"]
        for group in category.bandwidth_groups:
            if group.bus_bandwidth:
                value = group.bus_bandwidth + ("  LOW" if group.low else "")
                value += " (provisional)" if group.provisional else ""
            else:
                value = "no bandwidth data"
            icon = ("✓" if group.passed else "✗") if group.finished else ICON["Running"]
            out.append(f"    {icon}  {group.group}  {value}")
            if group.transport:
                out.append(f"         Transport: {', '.join(group.transport)}")
            if group.failed_nodes:
                out.append(f"         Failed nodes: {', '.join(group.failed_nodes)}")
    if category.transport or category.bandwidth:
        out.append("")
    if category.transport:
        out.append(f"  Transport: {', '.join(category.transport)}")
    if category.bandwidth:
        mark = " (provisional: not final until the Job's complete log is read)"
        out.append("  Bandwidth" + (mark if category.bandwidth_provisional else "") + ":")
        out.append("    " + f"{'Size':<10} {'AlgBW':<12} {'BusBW':<12} Samples")
        for row in category.bandwidth:
            star = "*" if category.bandwidth_provisional else ""
            out.append(
                "    "
                + f"{human_size(row.size_bytes):<10} {row.alg_bw + star:<12} {row.bus_bw + star:<12} {row.samples}"
            )
    return out


def _short(text: str) -> str:
    """``text`` with each sha256 digest cut to its first 12 hex digits (the JSON report has them
    whole)."""
    return SHA256.sub(r"\1", text)


def _provenance(category: CategoryReport) -> list[str]:
    """The spec digest and each image that ran, by digest (an imageID's repository is the
    image's); an image that is not what the spec rendered is marked ✗ with why."""
    if not category.spec_digest and not category.images:
        return []
    out = ["", "  Provenance:"]
    if category.spec_digest:
        out.append(f"    Spec:  {_short(category.spec_digest)}")
    for image in category.images:
        out.append(f"    {'✗' if image.mismatch else '✓'}  {_short(image.image)}")
        out.extend(f"         {_short(i.rpartition('@')[2])}" for i in image.image_ids)
        out.extend(f"         {piece}" for piece in textwrap.wrap(_short(image.mismatch), TEXT - 9))
    return out


def category_lines(category: CategoryReport) -> list[str]:
    """The body of one category card, every block in the order of cli.md 4.5."""
    out = [_field("Status:", category.status)]
    if category.reason:
        out.append(_field("Reason:", category.reason))
    if category.runtime:
        out.append(_field("Runtime:", category.runtime))
    if category.iterations:
        out.append("  Iterations:")
        out.extend(
            f"    {ICON[i.state]} #{i.number} {i.state}" + (f" {i.runtime}" if i.runtime else "")
            for i in category.iterations
        )
    for label, value in (
        ("Scale:", category.scale),
        ("Nodes/Job:", "" if category.nodes_per_job is None else str(category.nodes_per_job)),
        ("Jobs:", "" if category.jobs is None else str(category.jobs)),
        ("Placement:", category.placement),
        ("MNNVL:", category.mnnvl),
    ):
        if value:
            out.append(_field(label, value))
    if category.failed_groups:
        out += _failed_groups(category.failed_groups)
    if category.cliques:
        out += ["", "  Cliques:"]
        for clique in category.cliques:
            out.append(
                f"    {'✓' if clique.passed else '✗'}  {clique.name}  {clique.validated}/{clique.total} nodes"
            )
            if clique.bus_bandwidth:
                out.append(f"         Bus bandwidth: {clique.bus_bandwidth}")
            if clique.transport:
                out.append(f"         Transport: {', '.join(clique.transport)}")
    if category.diagnosis is not None:
        out += _diagnosis(category.diagnosis)
    out += _metrics(category.metrics)
    out += _bandwidth(category)
    out += _provenance(category)
    return out


def _header(report: Report) -> list[str]:
    out = [
        "╔" + "═" * INNER + "╗",
        "║" + report.title.center(INNER) + "║",
        "╚" + "═" * INNER + "╝",
        "",
        f"  Name:      {report.name}",
        f"  Platform:  {report.platform or 'unknown'}",
        f"  GPU:       {report.gpu or 'unknown'}",
        f"  Nodes:     {report.total_nodes}",
    ]
    if report.excluded_nodes:
        out.append(f"  Excluded:  {len(report.excluded_nodes)} ({', '.join(report.excluded_nodes)})")
        if report.exclusion_reason:
            out.extend(
                textwrap.wrap(
                    report.exclusion_reason, WIDTH, initial_indent=" " * 13, subsequent_indent=" " * 13
                )
            )
    return out


def _summary(report: Report) -> list[str]:
    passed = sum(1 for c in report.categories if c.status == "Succeeded")
    body = [f"  Categories:   {passed}/{len(report.categories)} passed"]
    if not report.failed_nodes:
        body.append("  Failed Nodes: none")
    for index, finding in enumerate(report.failed_nodes):
        label = "Failed Nodes:" if index == 0 else ""
        group = f" ({finding.group})" if finding.group else ""
        body.append(f"  {label:<14}{_finding_text(finding)}{group}")
    body += _release(report)
    if report.stopped is not None:
        body.append(f"  Stopped:      {report.stopped.reason}")
        indent = " " * 16
        body += textwrap.wrap(
            report.stopped.message,
            TEXT,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,  # a flag (--max-nodes-per-run) stays whole
        )
    body.append(f"  Result:       {report.result}")
    return _card("Summary", body)


def _release(report: Report) -> list[str]:
    """``Released: yes``, or ``no (<reason>)`` and what remains, once the ended run says."""
    release = report.release
    if release is None:
        return []
    if release.released:
        return ["  Released:     yes"]
    return [
        f"  Released:     no ({release.reason})",
        *textwrap.wrap(release.message, TEXT, initial_indent=" " * 16, subsequent_indent=" " * 16),
    ]


def _listed(title: str, rows: list[tuple[str, str]]) -> list[str]:
    """A block of ``node  text`` rows, the first :data:`HISTORY_LINES` and how many more; each
    text under its node when a row of the longest node name would not fit the card."""
    out = [f"  {title}"]
    shown = rows[:HISTORY_LINES]
    width = max(len(node) for node, _ in shown)
    if 4 + width + 2 + max(len(text) for _, text in shown) <= TEXT:
        out.extend(f"    {node:<{width}}  {text}" for node, text in shown)
    else:
        out.extend(line for node, text in shown for line in (f"    {node}", f"      {text}"))
    if len(rows) > HISTORY_LINES:
        out.append(f"    ... and {len(rows) - HISTORY_LINES} more")
    return out


def history_lines(history: NodeHistory) -> list[str]:
    """The Node History card: repeat failures, then the nodes not certified recently."""
    out: list[str] = []
    if history.repeat_failures:
        rows = [(r.node, r.text) for r in history.repeat_failures]
        out += _listed("Repeat failures:", rows)
    if history.not_certified:
        rows = [(u.node, u.text) for u in history.not_certified]
        out += [""] if out else []
        out += _listed(f"Not certified in {history.stale_after_days} days:", rows)
    return out


def render_text(report: Report) -> str:
    """The box report, ending in a newline."""
    lines = _header(report)
    for category in report.categories:
        lines += ["", *_card(f"{category.domain}/{category.variant}", category_lines(category))]
    if report.history is not None:
        lines += ["", *_card("Node History", history_lines(report.history))]
    lines += ["", *_summary(report)]
    return "\n".join(lines) + "\n"
