"""Reading and cancelling runs: ``workloadrun status|cancel``, ``certification list|status``.

The status of a run is the True member of its InProgress/Succeeded/Failed trio, ``Pending``
before the controller wrote one. Everything shown is what the controllers wrote; nothing here
decides a verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from nvcre.api.v1alpha1.constants import TERMINAL_CONDITION_TYPES
from nvcre.cli import connection
from nvcre.cli.common import UserError, emit, output_option, user_errors
from nvcre.conditions import PENDING, run_state

# --- pure ----------------------------------------------------------------------------------------


def _created(obj: Mapping[str, Any]) -> datetime | None:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if isinstance(stamp, datetime):
        return stamp
    if isinstance(stamp, str) and stamp:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return None


def human_duration(seconds: float) -> str:
    """kubectl's AGE (``duration.HumanDuration``): ``45s``, ``5m30s``, ``3h``, ``2d4h``, ``1y20d``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:  # a creation time a second ahead of this clock
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years, days = hours // 24 // 365, hours // 24 % 365
    if years < 8:
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{years}y"


def age(obj: Mapping[str, Any], now: datetime) -> str:
    created = _created(obj)
    return human_duration((now - created).total_seconds()) if created else "<unknown>"


def category_statuses(cert: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each category of the spec with the status the controller recorded (``Pending`` before)."""
    recorded = {
        (c.get("domain"), c.get("variant")): c
        for c in (cert.get("status") or {}).get("categoryStatuses") or ()
    }
    out = []
    for category in (cert.get("spec") or {}).get("categories") or ():
        entry = recorded.get((category.get("domain"), category.get("variant"))) or {}
        out.append(
            {
                "domain": str(category.get("domain")),
                "variant": str(category.get("variant")),
                "status": str(entry.get("status") or PENDING),
                "workflow": str((entry.get("workflowRef") or {}).get("name") or ""),
            }
        )
    return out


def certification_summary(cert: Mapping[str, Any]) -> dict[str, Any]:
    """What ``certification list -o json|yaml`` and ``certification status`` show of one Certification."""
    status, reason, message = run_state(cert)
    metadata = cert.get("metadata") or {}
    out: dict[str, Any] = {
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "status": status,
    }
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    created = metadata.get("creationTimestamp")
    if created:
        out["creationTimestamp"] = str(created)
    out["categories"] = [{k: v for k, v in c.items() if v} for c in category_statuses(cert)]
    return out


def table(rows: Sequence[Sequence[str]]) -> str:
    """kubectl-style columns: left-aligned, three spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "".join(
        "".join(cell.ljust(width + 3) for cell, width in zip(row, widths, strict=False)) + row[-1] + "\n"
        for row in rows
    )


def _age(summary: Mapping[str, Any], now: datetime) -> str:
    return age({"metadata": {"creationTimestamp": summary.get("creationTimestamp")}}, now)


def certification_table(
    summaries: Iterable[Mapping[str, Any]], now: datetime, *, all_namespaces: bool
) -> str:
    """NAME, CATEGORIES (finished/total), STATUS, REASON, AGE; NAMESPACE first with ``-A``."""
    header = ("NAME", "CATEGORIES", "STATUS", "REASON", "AGE")
    lines: list[tuple[str, ...]] = [(("NAMESPACE",) if all_namespaces else ()) + header]
    for summary in summaries:
        categories = summary["categories"]
        done = sum(c["status"] in TERMINAL_CONDITION_TYPES for c in categories)
        cells = (
            str(summary["name"]),
            f"{done}/{len(categories)}",
            summary["status"],
            summary.get("reason") or "-",
            _age(summary, now),
        )
        lines.append(((str(summary["namespace"]),) if all_namespaces else ()) + cells)
    return table(lines)


def certification_text(summary: Mapping[str, Any], now: datetime) -> str:
    """``certification status`` for people: the run, then one line per category."""
    lines = [
        f"Name:        {summary['name']}",
        f"Namespace:   {summary['namespace']}",
        f"Status:      {summary['status']}",
    ]
    if summary.get("reason"):
        lines.append(f"Reason:      {summary['reason']}")
    if summary.get("message"):
        lines.append(f"Message:     {summary['message']}")
    lines.append(f"Age:         {_age(summary, now)}")
    rows = [("CATEGORY", "STATUS", "WORKFLOW")] + [
        (f"{c['domain']}/{c['variant']}", c["status"], c.get("workflow") or "-")
        for c in summary["categories"]
    ]
    return "\n".join(lines) + "\n\n" + table(rows)


def failed_node_names(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    return sorted({str(entry["name"]) for entry in entries})


# --- shell ---------------------------------------------------------------------------------------


def _get(kube: Any, resource: Any, kind: str, name: str, namespace: str) -> dict[str, Any]:
    obj = connection.read(kube, resource, name, namespace, f"{kind} {name}")
    if obj is None:
        raise UserError(f'{kind} "{name}" not found in namespace "{namespace}"')
    return obj


def _failed_nodes(kube: Any, run: Mapping[str, Any], namespace: str) -> list[str]:
    """Names in the run's failed-nodes ConfigMap (none when it has no ref or the map is gone)."""
    from lightkube.resources.core_v1 import ConfigMap

    from nvcre.orchestration.result_configmaps import failed_entries

    ref = (run.get("status") or {}).get("failedNodesRef") or {}
    if not ref.get("name"):
        return []
    config_map = connection.read(kube, ConfigMap, ref["name"], namespace, f"ConfigMap {ref['name']}")
    return failed_node_names(failed_entries(config_map))


def certification_summaries(kube: Any, namespace: str) -> list[dict[str, Any]]:
    """:func:`certification_summary` of every Certification of ``namespace`` (``ALL_NS``: of
    all), by namespace and name."""
    from nvcre import resources

    try:
        found = [c.to_dict() for c in kube.list(resources.Certification, namespace=namespace)]
    except Exception as error:  # API and transport errors alike end the command
        raise UserError(f"cannot list certifications: {connection.api_error(error)}") from error
    found.sort(key=lambda c: (c["metadata"].get("namespace") or "", c["metadata"]["name"]))
    return [certification_summary(cert) for cert in found]


@click.command("status")
@click.argument("name")
@output_option(default="text", formats=("text", "json"))
@connection.cluster_options
@user_errors
def workloadrun_status_command(name: str, output: str, cluster: connection.Cluster) -> None:
    """Print the status of WorkloadRun NAME: Pending, InProgress, Succeeded or Failed (exit 0 for all)."""
    from nvcre import resources

    kube, namespace = cluster.client(), cluster.namespace
    run = _get(kube, resources.WorkloadRun, "workloadrun", name, namespace)
    status = run_state(run)[0]
    if output == "text":
        click.echo(status)
        return
    out: dict[str, Any] = {"name": name, "namespace": namespace, "status": status}
    failed = _failed_nodes(kube, run, namespace)
    if failed:
        out["failedNodes"] = failed
    emit(out, "json")


@click.command("cancel")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@connection.cluster_options
@user_errors
def workloadrun_cancel_command(names: tuple[str, ...], cluster: connection.Cluster) -> None:
    """Delete WorkloadRuns; their Workflow, Jobs and pods are deleted with them.

    A name that does not exist is reported on stderr and is not an error.
    """
    from lightkube import ApiError

    from nvcre import resources

    kube, namespace = cluster.client(), cluster.namespace
    failed = False
    for name in names:
        try:
            kube.delete(resources.WorkloadRun, name, namespace=namespace)
        except ApiError as error:
            if error.status.code == 404:
                click.echo(f'WorkloadRun "{name}" not found in namespace "{namespace}"', err=True)
                continue
            click.echo(f'Failed to cancel "{name}": {connection.api_error(error)}', err=True)
            failed = True
            continue
        except Exception as error:  # transport errors
            click.echo(f'Failed to cancel "{name}": {connection.api_error(error)}', err=True)
            failed = True
            continue
        click.echo(f"Cancelled {name}")
    if failed:
        raise click.exceptions.Exit(1)


@click.command("list")
@click.option("-A", "--all-namespaces", is_flag=True, help="List Certifications of every namespace.")
@output_option(default="table", formats=("table", "json", "yaml"))
@connection.cluster_options
@user_errors
def certification_list_command(all_namespaces: bool, output: str, cluster: connection.Cluster) -> None:
    """List Certifications with their progress (categories done/total), status and reason."""
    from lightkube import ALL_NS

    namespace = cluster.namespace
    summaries = certification_summaries(cluster.client(), ALL_NS if all_namespaces else namespace)
    if output != "table":
        emit(summaries, output)
    elif not summaries:
        where = "any namespace" if all_namespaces else f"namespace {namespace}"
        click.echo(f"No certifications found in {where}.", err=True)
    else:
        click.echo(certification_table(summaries, datetime.now(UTC), all_namespaces=all_namespaces), nl=False)


@click.command("status")
@click.argument("name")
@output_option(default="text", formats=("text", "json", "yaml"))
@connection.cluster_options
@user_errors
def certification_status_command(name: str, output: str, cluster: connection.Cluster) -> None:
    """Print the status of Certification NAME and of each of its categories (exit 0 for every status)."""
    from nvcre import resources

    kube, namespace = cluster.client(), cluster.namespace
    cert = _get(kube, resources.Certification, "certification", name, namespace)
    summary = certification_summary(cert)
    if output == "text":
        click.echo(certification_text(summary, datetime.now(UTC)), nl=False)
    else:
        emit(summary, output)
