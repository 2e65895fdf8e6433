"""Reading a Certification's or WorkloadRun's objects for the report, and writing its files.

What belongs to a run is found the way nvcre links it: Workflows by the certification /
workload-run label, Jobs by the workflow label, measurements by the job label, node-result
ConfigMaps by the Workflow's status refs; each kind in one list (a few when a run has many Jobs)
that the label selects, never a whole namespace. A caller that has just read the run, its
Workflows and their Jobs (``--wait``'s last poll) hands them over as :class:`Held`, and only the
rest is read. The NodeRecords of the run's target nodes (cluster-scoped) are read by name for a
few nodes, in one paged list of all records for more (:func:`node_records`); a reader who may
not read them gets the report without its node history and a warning. The report itself is built
by :mod:`nvcre.report`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from nvcre.api.v1alpha1 import KINDS
from nvcre.api.v1alpha1.constants import Kind, Label
from nvcre.cli.common import UserError
from nvcre.cli.connection import api_error, read
from nvcre.report import linking
from nvcre.report.build import (
    CertificationObjects,
    WorkflowObjects,
    WorkloadRunObjects,
    certification_report,
    workloadrun_report,
)
from nvcre.report.history import target_nodes
from nvcre.report.jsonreport import to_json
from nvcre.report.junit import render_junit
from nvcre.report.model import Report

if TYPE_CHECKING:
    from lightkube import Client

Obj = dict[str, Any]

RECORDS_BY_NAME: Final = 64
"""Up to this many target nodes, their NodeRecords are read one GET each; beyond it, one list of
every record (paged by :data:`RECORDS_PER_PAGE`), the others dropped as they arrive: a
16,384-node run costs 33 requests, not 16,384, and a 4-node run in that fleet not the whole
fleet's records."""
RECORDS_PER_PAGE: Final = 500


@dataclass(frozen=True)
class Held:
    """What the caller read of a run a moment ago: the run, its Workflows (by the run's label)
    and their Jobs (by the Workflow label), as plain dicts."""

    run: Obj
    workflows: list[Obj]
    jobs: list[Obj]


def _resource(kind: str) -> Any:
    from nvcre.resources import BY_KIND

    return BY_KIND[kind]


def _get(kube: Client, kind: str, name: str, namespace: str) -> Obj | None:
    return read(kube, _resource(kind), name, namespace, f"{kind.lower()} {namespace}/{name}")


def _list(kube: Client, kind: str, namespace: str, labels: dict[str, Any]) -> list[Obj]:
    try:
        return [_plain(item) for item in kube.list(_resource(kind), namespace=namespace, labels=labels)]
    except Exception as error:
        raise UserError(f"cannot list {KINDS[kind].PLURAL} in {namespace}: {api_error(error)}") from error


def list_labelled(kube: Client, kind: str, namespace: str, key: str, values: Iterable[str]) -> list[Obj]:
    """The objects of ``kind`` whose label ``key`` is one of ``values``, in name order, read in
    lists of :data:`~nvcre.report.linking.NAMES_PER_SELECTOR` values each; nothing is read
    without a value."""
    found = [obj for labels in linking.selectors(key, values) for obj in _list(kube, kind, namespace, labels)]
    return linking.by_name(found)


def _plain(item: Any) -> Obj:
    data: Obj = item.to_dict() if hasattr(item, "to_dict") else dict(item)
    return data


def _config_map(kube: Client, name: str, namespace: str) -> Obj | None:
    from lightkube.resources.core_v1 import ConfigMap

    return read(kube, ConfigMap, name, namespace, f"configmap {namespace}/{name}")


def _workflow_objects(
    kube: Client, namespace: str, workflows: list[Obj], held_jobs: list[Obj] | None
) -> list[WorkflowObjects]:
    """Each Workflow's Jobs (those held, else one list for all the Workflows), their
    measurements (one list per kind for all the Jobs) and its node-result ConfigMaps."""
    names = linking.names(workflows)
    if held_jobs is None:
        jobs = list_labelled(kube, Kind.JOB, namespace, Label.WORKFLOW, names)
    else:
        jobs = [j for j in held_jobs if linking.label(j, Label.WORKFLOW) in names]
    job_names = linking.names(jobs)
    return linking.workflow_objects(
        workflows,
        jobs,
        list_labelled(kube, Kind.BANDWIDTH_MEASUREMENT, namespace, Label.JOB, job_names),
        list_labelled(kube, Kind.GOODPUT_MEASUREMENT, namespace, Label.JOB, job_names),
        {name: _config_map(kube, name, namespace) for name in linking.result_config_maps(workflows)},
    )


def _node_records_or_error(kube: Client, nodes: Sequence[str]) -> list[Obj]:
    from nvcre.cli.connection import get_or_none
    from nvcre.resources import NodeRecord

    if len(nodes) <= RECORDS_BY_NAME:
        found = (get_or_none(kube, NodeRecord, node) for node in nodes)
        return [_plain(r) for r in found if r is not None]
    from lightkube.core.exceptions import ApiError

    wanted = set(nodes)
    try:
        return [
            _plain(r)
            for r in kube.list(NodeRecord, chunk_size=RECORDS_PER_PAGE)
            if r.metadata is not None and r.metadata.name in wanted
        ]
    except ApiError as error:
        if error.status.code == 404:  # no NodeRecord kind (an older install): no records, as by name
            return []
        raise


def node_records(kube: Client, workflows: Sequence[Mapping[str, Any]]) -> list[Obj] | None:
    """The NodeRecords of the nodes of the run's target (:func:`nvcre.report.history.target_nodes`);
    None, with a warning on stderr, when they cannot be read (a reader without ``nvcre-view``
    through a ClusterRoleBinding is refused them): the report is then the report without its
    node history."""
    nodes = target_nodes(workflows)
    if not nodes:
        return []
    try:
        return _node_records_or_error(kube, nodes)
    except Exception as error:  # API and transport errors: the history is left out, not the report
        click.echo(
            f"Warning: cannot read noderecords: {api_error(error)}; the report leaves out the nodes' history",
            err=True,
        )
        return None


def _run_objects(
    kube: Client, kind: str, label: str, name: str, namespace: str, held: Held | None
) -> tuple[Obj, list[Obj], list[Obj] | None]:
    """The run (``UserError`` when it does not exist), its Workflows and the Jobs held: what
    ``held`` holds (the wait's last poll), else read now."""
    if held is not None:
        return held.run, held.workflows, held.jobs
    run = _get(kube, kind, name, namespace)
    if run is None:
        raise UserError(f'{kind.lower()} "{name}" not found in namespace "{namespace}"')
    return run, _list(kube, Kind.WORKFLOW, namespace, {label: name}), None


def read_certification_report(kube: Client, name: str, namespace: str, held: Held | None = None) -> Report:
    """The report of Certification ``name``; ``UserError`` when it does not exist."""
    cert, workflows, jobs = _run_objects(kube, Kind.CERTIFICATION, Label.CERTIFICATION, name, namespace, held)
    objects = _workflow_objects(kube, namespace, workflows, jobs)
    return certification_report(
        CertificationObjects(
            certification=cert,
            workflows=objects,
            now=datetime.now(UTC),
            records=node_records(kube, [w.workflow for w in objects]),
        )
    )


def read_workloadrun_report(kube: Client, name: str, namespace: str, held: Held | None = None) -> Report:
    """The report of WorkloadRun ``name``; ``UserError`` when it does not exist."""
    run, workflows, jobs = _run_objects(kube, Kind.WORKLOAD_RUN, Label.WORKLOAD_RUN, name, namespace, held)
    workflow = next(
        (w for w in workflows if w["metadata"]["name"] == name), workflows[0] if workflows else None
    )
    objects = _workflow_objects(kube, namespace, [workflow], jobs) if workflow else []
    return workloadrun_report(
        WorkloadRunObjects(
            workloadrun=run,
            workflow=objects[0] if objects else None,
            now=datetime.now(UTC),
            records=node_records(kube, [w.workflow for w in objects]),
        )
    )


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror or error}") from error
    click.echo(f"Results written to {path}", err=True)


def results_json(reports: Sequence[Report]) -> str:
    """One object for one report, a JSON array for several."""
    data: Any = to_json(reports[0]) if len(reports) == 1 else [to_json(r) for r in reports]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_results(path: Path, reports: Sequence[Report]) -> None:
    _write(path, results_json(reports))


def write_junit(path: Path, reports: Sequence[Report]) -> None:
    _write(path, render_junit(reports))


def write_html(path: Path, reports: Sequence[Report]) -> None:
    """The self-contained HTML page (:mod:`nvcre.report.html`)."""
    from nvcre.report.html import render_html

    _write(path, render_html(reports))


def report_exit_errors(reports: Sequence[Report]) -> list[str]:
    """``<kind> "<n>" is still running`` / ``... failed`` per report that did not pass (cli.md 4.4);
    an ``INCOMPLETE`` report exits 0 (its verdict is in the report)."""
    out = []
    for report in reports:
        kind = report.kind.lower()
        if report.result == "RUNNING":
            out.append(f'{kind} "{report.name}" is still running')
        elif report.result == "FAILED":
            out.append(f'{kind} "{report.name}" failed')
    return out
