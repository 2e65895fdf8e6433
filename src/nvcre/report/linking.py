"""Which of a run's objects its report is built from, and which Workflow each belongs to: the links
nvcre writes (the run's label on its Workflows, the workflow label on Jobs, the job label on
measurements, a Workflow's status refs to its node-result ConfigMaps). One rule for the objects
``nvcrectl ... report`` reads and for those the manager freezes into a ReportExport; the reading
itself (sync in the CLI, async in the manager) is the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from nvcre.api.v1alpha1.constants import Label
from nvcre.naming import MAX_K8S_NAME_LEN
from nvcre.report.build import WorkflowObjects

Obj = dict[str, Any]

NAMES_PER_SELECTOR: Final = 50
"""Label values per ``in`` selector: a run of many Jobs lists its measurements in a few
requests, each URL a few kilobytes (well within what proxies in front of an API server take)."""


def label_values(names: Iterable[str]) -> list[str]:
    """The distinct ``names`` that can be label values, sorted: an object whose name is longer
    than a label value can be is named by no label (the API server refuses it), and one such
    value would make it refuse the whole selector."""
    return sorted({n for n in names if n and len(n) <= MAX_K8S_NAME_LEN})


def selectors(key: str, names: Iterable[str]) -> Iterator[dict[str, list[str]]]:
    """The label selectors (``key in (...)``, :data:`NAMES_PER_SELECTOR` values each) that
    together select the objects labelled with one of ``names``; none without a name."""
    chosen = label_values(names)
    for start in range(0, len(chosen), NAMES_PER_SELECTOR):
        yield {key: chosen[start : start + NAMES_PER_SELECTOR]}


def by_name(objects: Iterable[Obj]) -> list[Obj]:
    """``objects`` in name order, as one list of them returns them."""
    return sorted(objects, key=lambda obj: str(_meta(obj).get("name") or ""))


def names(objects: Iterable[Obj]) -> list[str]:
    return [str(_meta(obj).get("name")) for obj in objects]


def result_config_maps(workflows: Iterable[Obj]) -> list[str]:
    """The names of the node-result ConfigMaps the Workflows' statuses refer to."""
    found = []
    for workflow in workflows:
        status = workflow.get("status") or {}
        for ref in ("failedNodesRef", "succeededNodesRef"):
            name = (status.get(ref) or {}).get("name")
            if name:
                found.append(str(name))
    return found


def workflow_objects(
    workflows: Sequence[Obj],
    jobs: Iterable[Obj],
    bandwidths: Iterable[Obj],
    goodputs: Iterable[Obj],
    config_maps: Mapping[str, Obj | None],
) -> list[WorkflowObjects]:
    """Each Workflow with its own Jobs (by the workflow label), their measurements (by the job
    label) and the node-result ConfigMaps its status refers to (from ``config_maps`` by name;
    one not there is None)."""
    jobs, bandwidths, goodputs = list(jobs), list(bandwidths), list(goodputs)
    out = []
    for workflow in workflows:
        name = _meta(workflow).get("name")
        own = [j for j in jobs if label(j, Label.WORKFLOW) == name]
        own_names = set(names(own))
        status = workflow.get("status") or {}
        out.append(
            WorkflowObjects(
                workflow=workflow,
                jobs=own,
                bandwidths=[m for m in bandwidths if label(m, Label.JOB) in own_names],
                goodputs=[m for m in goodputs if label(m, Label.JOB) in own_names],
                failed_nodes=_referred(status.get("failedNodesRef"), config_maps),
                succeeded_nodes=_referred(status.get("succeededNodesRef"), config_maps),
            )
        )
    return out


def _referred(ref: Any, config_maps: Mapping[str, Obj | None]) -> Obj | None:
    name = (ref or {}).get("name")
    return config_maps.get(str(name)) if name else None


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def label(obj: Obj, key: str) -> Any:
    """The value of ``obj``'s label ``key`` (None when it has none)."""
    return (_meta(obj).get("labels") or {}).get(key)


__all__ = [
    "NAMES_PER_SELECTOR",
    "by_name",
    "label",
    "label_values",
    "names",
    "result_config_maps",
    "selectors",
    "workflow_objects",
]
