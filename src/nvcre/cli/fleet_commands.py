"""``nvcrectl node history NODE`` and ``nvcrectl fleet``: what the NodeRecords say of a node and
of the fleet. They read the records (and the GPU Nodes), never a run; the rules are
``nvcre.fleet.overview``'s (docs/fleet-memory.md, "Commands")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import click

from nvcre.api.v1alpha1.constants import Default, NodeLabel
from nvcre.cli import connection
from nvcre.cli.cluster import label_selector
from nvcre.cli.common import UserError, emit, output_option, user_errors
from nvcre.cli.status_commands import table
from nvcre.fleet import overview
from nvcre.fleet.baselines import METRICS
from nvcre.fleet.records import FAILED, record_node
from nvcre.measure.thresholds import AVG_STEP_TIME, BUS_BANDWIDTH, GOODPUT_RATIO

# --- pure ----------------------------------------------------------------------------------------

NONE = "-"
PAGE: Final = 500
"""Objects per list request (a 16,384-node fleet: 33 requests for its Nodes, 33 for its records)."""
PARTNERS_SHOWN = 1
"""Partners a history row names in the table (``gpu-node-001 +6``: and six more)."""


def _number(value: Any) -> str:
    return NONE if value is None else f"{value:g}"


def _percent(value: float | None) -> str:
    return NONE if value is None else f"{value:+.1f}%"


def run_label(row: Mapping[str, Any]) -> str:
    """``Certification/nvcre/fleet-nccl``; ``Workflow/nvcre/rec`` for a Workflow created alone."""
    run = row.get("run")
    ref, kind = (run, run["kind"]) if run else (row.get("workflow") or {}, "Workflow")
    return "/".join(str(part) for part in (kind, ref.get("namespace"), ref.get("name")) if part)


def partners_label(partners: Sequence[str], group_size: int | None) -> str:
    """The first partner and how many more the group had (``groupSize`` counts them all)."""
    if not partners:
        return NONE
    more = max(len(partners), (group_size or 0) - 1) - PARTNERS_SHOWN
    shown = ",".join(partners[:PARTNERS_SHOWN])
    return f"{shown} +{more}" if more > 0 else shown


def trend_label(row: Mapping[str, Any]) -> str:
    """The bus bandwidth's change against its baseline, else the step time's."""
    changes = row.get("vsBaseline") or {}
    for key in METRICS:
        if key in changes:
            return _percent(changes[key])
    return NONE


def history_table(node: str, state: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """``node history`` for people: the node and its state, a row per result (oldest first), then
    the message of each failed result."""
    header = f"Node:    {node}\nState:   {state}\n\n"
    if not rows:
        return header + "No results recorded.\n"
    lines: list[tuple[str, ...]] = [
        (
            "TIME",
            "CATEGORY",
            "RUN",
            "GROUP",
            "PARTNERS",
            "BUSBW",
            "STEP-TIME",
            "GOODPUT",
            "VS-BASELINE",
            "VERDICT",
            "CAUSE",
        )
    ]
    failures = []
    for row in rows:
        values = row.get("values") or {}
        lines.append(
            (
                str(row.get("time") or NONE),
                str(row.get("category") or NONE),
                run_label(row),
                str(row.get("group") or NONE),
                partners_label(row.get("partners") or [], row.get("groupSize")),
                _number(values.get(BUS_BANDWIDTH)),
                _number(values.get(AVG_STEP_TIME)),
                _number(values.get(GOODPUT_RATIO)),
                trend_label(row),
                str(row.get("verdict") or NONE),
                str(row.get("cause") or row.get("reason") or NONE),
            )
        )
        if row.get("verdict") == FAILED and row.get("message"):
            failures.append(f"  {row.get('time')}  {row['message']}")
    out = header + table(lines)
    if failures:
        out += "\nFailures:\n" + "\n".join(failures) + "\n"
    return out


def history_document(node: str, record: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """``node history -o json|yaml``: ``node``, ``state`` (as ``nvcrectl fleet`` files it),
    ``summary`` (the record's, as written) and ``results`` (:func:`overview.history`)."""
    return {
        "node": node,
        "state": overview.state_of(record, now, Default.STALE_AFTER_DAYS),
        "summary": dict((record.get("status") or {}).get("summary") or {}),
        "results": overview.history(record),
    }


COUNT_HEADER = ("NODES", *(state.upper() for state in overview.STATES))


def _count_cells(counts: Mapping[str, int]) -> tuple[str, ...]:
    return tuple(str(counts[key]) for key in ("nodes", *overview.STATES))


def fleet_table(doc: Mapping[str, Any]) -> str:
    """``nvcrectl fleet`` for people: one line of totals, the counts by domain and by GPU type,
    then the failing and regressed nodes."""
    total = doc["total"]
    parts = ", ".join(f"{total[state]} {state}" for state in overview.STATES)
    out = f"{total['nodes']} nodes: {parts} (stale: passed over {doc['staleAfterDays']} days ago)\n"
    if not total["nodes"]:
        return out
    for label, key, groups in (
        ("DOMAIN", "domain", doc["byDomain"]),
        ("GPU-TYPE", "gpuType", doc["byGpuType"]),
    ):
        rows = [(label, *COUNT_HEADER)] + [(str(g[key]), *_count_cells(g)) for g in groups]
        out += "\n" + table(rows)
    bad = [n for n in doc["nodes"] if n["state"] in (overview.FAILING, overview.REGRESSED)]
    if bad:
        rows = [("NODE", "STATE", "CAUSE", "CATEGORY", "LAST-RESULT", "LAST-PASS")] + [
            (
                n["name"],
                n["state"],
                n["cause"] or NONE,
                n["lastCategory"] or NONE,
                n["lastResultTime"] or NONE,
                n["lastPassTime"] or NONE,
            )
            for n in bad
        ]
        out += "\n" + table(rows)
    return out


# --- shell ---------------------------------------------------------------------------------------


def _list(kube: Any, resource: Any, what: str, **kwargs: Any) -> list[dict[str, Any]]:
    try:
        return [item.to_dict() for item in kube.list(resource, chunk_size=PAGE, **kwargs)]
    except Exception as error:  # API and transport errors alike end the command
        raise UserError(f"cannot list {what}: {connection.api_error(error)}") from error


def read_history(kube: Any, node: str) -> dict[str, Any]:
    """:func:`history_document` of ``node``'s NodeRecord, read now; ``UserError`` when it has none."""
    from nvcre import resources

    record = connection.read(kube, resources.NodeRecord, node, None, f"the NodeRecord of node {node}")
    if record is None:
        raise UserError(
            f'node "{node}" has no NodeRecord: no run it took part in has ended, or its record was '
            "deleted (kubectl get noderecords lists the nodes that have one)"
        )
    return history_document(node, record, datetime.now(UTC))


@click.group("node")
def node_group() -> None:
    """What nvcre remembers of a node (its NodeRecord)."""


@node_group.command("history")
@click.argument("node")
@output_option(default="table", formats=("table", "json", "yaml"))
@connection.connection_options
@user_errors
def history_command(node: str, output: str, kubeconfig: str | None, context: str | None) -> None:
    """Every result NODE's NodeRecord keeps, oldest first: category, run, group and partners,
    bus bandwidth, step time, goodput, the change against the node's baseline, verdict and cause.
    Reads the record only."""
    doc = read_history(connection.client(kubeconfig, context), node)
    if output == "table":
        click.echo(history_table(node, doc["state"], doc["results"]), nl=False)
    else:
        emit(doc, output)


@click.command("fleet")
@output_option(default="table", formats=("table", "json"))
@click.option(
    "-l",
    "--selector",
    default="",
    help="Only GPU Nodes with these labels, and their records (k=v, k!=v, k, !k; comma-separated).",
)
@connection.connection_options
@user_errors
def fleet_command(output: str, selector: str, kubeconfig: str | None, context: str | None) -> None:
    """GPU nodes certified, failing, regressed, stale or never certified, by topology domain and
    GPU type, from the NodeRecords and the Nodes (nvidia.com/gpu.present=true). Reads only."""
    from lightkube.resources.core_v1 import Node

    from nvcre import resources

    terms = {NodeLabel.GPU_PRESENT: "true", **(label_selector(selector) if selector else {})}
    kube = connection.client(kubeconfig, context)
    nodes = _list(kube, Node, "nodes", labels=terms)
    records = _list(kube, resources.NodeRecord, "NodeRecords")
    if selector:
        names = {str((n.get("metadata") or {}).get("name")) for n in nodes}
        records = [r for r in records if record_node(r) in names]
    doc = overview.fleet(records, nodes, datetime.now(UTC))
    if output == "table":
        click.echo(fleet_table(doc), nl=False)
    else:
        emit(doc, output)
