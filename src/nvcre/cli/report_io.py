"""Reading a Certification's or WorkloadRun's objects for the report, and writing its files.

What belongs to a run is found the way nvcre links it: Workflows by the certification /
workload-run label, Jobs by the workflow label, measurements by the job label, node-result
ConfigMaps by the Workflow's status refs. The report itself is built by :mod:`nvcre.report`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nvcre.api.v1alpha1 import KINDS
from nvcre.api.v1alpha1.constants import Kind, Label
from nvcre.cli.common import UserError
from nvcre.cli.connection import api_error, read
from nvcre.report.build import (
    CertificationObjects,
    WorkflowObjects,
    WorkloadRunObjects,
    certification_report,
    workloadrun_report,
)
from nvcre.report.jsonreport import to_json
from nvcre.report.junit import render_junit
from nvcre.report.model import Report

if TYPE_CHECKING:
    from lightkube import Client

Obj = dict[str, Any]


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


def _plain(item: Any) -> Obj:
    data: Obj = item.to_dict() if hasattr(item, "to_dict") else dict(item)
    return data


def _config_map(kube: Client, ref: Any, namespace: str) -> Obj | None:
    from lightkube.resources.core_v1 import ConfigMap

    name = (ref or {}).get("name")
    if not name:
        return None
    return read(kube, ConfigMap, name, namespace, f"configmap {namespace}/{name}")


def _workflow_objects(kube: Client, workflow: Obj) -> WorkflowObjects:
    meta = workflow.get("metadata") or {}
    namespace = str(meta.get("namespace"))
    jobs = _list(kube, Kind.JOB, namespace, {Label.WORKFLOW: str(meta.get("name"))})
    names = {str(j["metadata"]["name"]) for j in jobs}

    def measurements(kind: str) -> list[Obj]:
        found = _list(kube, kind, namespace, {}) if jobs else []
        return [m for m in found if ((m.get("metadata") or {}).get("labels") or {}).get(Label.JOB) in names]

    status = workflow.get("status") or {}
    return WorkflowObjects(
        workflow=workflow,
        jobs=jobs,
        bandwidths=measurements(Kind.BANDWIDTH_MEASUREMENT),
        goodputs=measurements(Kind.GOODPUT_MEASUREMENT),
        failed_nodes=_config_map(kube, status.get("failedNodesRef"), namespace),
        succeeded_nodes=_config_map(kube, status.get("succeededNodesRef"), namespace),
    )


def read_certification_report(kube: Client, name: str, namespace: str) -> Report:
    """The report of Certification ``name``; ``UserError`` when it does not exist."""
    cert = _get(kube, Kind.CERTIFICATION, name, namespace)
    if cert is None:
        raise UserError(f'certification "{name}" not found in namespace "{namespace}"')
    workflows = _list(kube, Kind.WORKFLOW, namespace, {Label.CERTIFICATION: name})
    return certification_report(
        CertificationObjects(
            certification=cert,
            workflows=[_workflow_objects(kube, w) for w in workflows],
            now=datetime.now(UTC),
        )
    )


def read_workloadrun_report(kube: Client, name: str, namespace: str) -> Report:
    """The report of WorkloadRun ``name``; ``UserError`` when it does not exist."""
    run = _get(kube, Kind.WORKLOAD_RUN, name, namespace)
    if run is None:
        raise UserError(f'workloadrun "{name}" not found in namespace "{namespace}"')
    workflows = _list(kube, Kind.WORKFLOW, namespace, {Label.WORKLOAD_RUN: name})
    workflow = next(
        (w for w in workflows if w["metadata"]["name"] == name), workflows[0] if workflows else None
    )
    return workloadrun_report(
        WorkloadRunObjects(
            workloadrun=run,
            workflow=_workflow_objects(kube, workflow) if workflow else None,
            now=datetime.now(UTC),
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
