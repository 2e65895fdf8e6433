"""What a Certification does next: one Workflow per category, strictly one at a time (spec §2; pure).

``status.categoryStatuses`` holds one entry per category; the first one not done is started
(its Workflow created) or followed (its Workflow's outcome copied); when every one is done the
Certification's outcome follows. A failed category never stops the ones after it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from nvcre.api.v1alpha1.constants import TERMINAL_CONDITION_TYPES, CertificationReason, ConditionType
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.catalog import CategoryNotFound, load_catalog
from nvcre.conditions import condition_of, condition_true
from nvcre.decide import scheduling
from nvcre.durations import format_duration
from nvcre.objects import Obj
from nvcre.orchestration.discovery import cordoned_opt_in

PENDING, IN_PROGRESS, SUCCEEDED, FAILED = "Pending", "InProgress", "Succeeded", "Failed"
DONE = (SUCCEEDED, FAILED)

Entry = dict[str, Any]
"""One ``status.categoryStatuses`` entry."""
WorkflowLookup = Callable[[str, str], Obj | None]
"""A Workflow by namespace and name, None when there is none."""


class Transition(NamedTuple):
    """The condition of the execution trio made True, with its reason and message."""

    cond_type: str
    reason: str
    message: str


def selector_text(target: dict[str, Any] | None) -> str:
    """``k=v,...`` of the target's nodeSelector, sorted; ``any node`` when it has none."""
    selector = (target or {}).get("nodeSelector") or {}
    return ",".join(f"{k}={selector[k]}" for k in sorted(selector)) or "any node"


def waiting_message(target: dict[str, Any] | None, remaining_seconds: float) -> str:
    remaining = format_duration(max(int(remaining_seconds), 0) * 1_000_000_000)
    if cordoned_opt_in(target):
        return f"No nodes (including unschedulable) match {selector_text(target)}; retrying for up to {remaining} more."
    return (
        f"No schedulable nodes match {selector_text(target)}; retrying for up to {remaining} more. "
        "Nodes that are cordoned or unschedulable do not count."
    )


def initial_statuses(cert: Obj) -> list[Entry]:
    return [
        {"domain": c["domain"], "variant": c["variant"], "status": PENDING}
        for c in cert["spec"].get("categories") or ()
    ]


def unknown_category(cert: Obj) -> str | None:
    """The first category the catalog does not know, as ``domain/variant``."""
    catalog = load_catalog()
    for category in cert["spec"].get("categories") or ():
        try:
            catalog.lookup(category["domain"], category["variant"])
        except CategoryNotFound:
            return f"{category['domain']}/{category['variant']}"
    return None


def category(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('domain')}/{entry.get('variant')}"


def age(cert: Obj, now: datetime) -> float:
    """Seconds since the Certification was created (0 when that time is unreadable)."""
    created = cert["metadata"].get("creationTimestamp")
    try:
        start = parse_time(created) if isinstance(created, str) else created
    except ValueError:
        return 0.0
    if not isinstance(start, datetime):
        return 0.0
    return (now - start).total_seconds()


def current(statuses: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the first category not done; None when every one is."""
    return next((i for i, s in enumerate(statuses) if s.get("status") not in DONE), None)


def following(entry: Mapping[str, Any]) -> bool:
    """The category's Workflow was created: follow it rather than start one."""
    return entry.get("status") == IN_PROGRESS and bool(entry.get("workflowRef"))


def any_failed(statuses: Sequence[Mapping[str, Any]]) -> bool:
    return any(s.get("status") == FAILED for s in statuses)


def outcome(statuses: Sequence[Mapping[str, Any]], validation: str | None) -> Transition:
    """The Certification's end once every category is done (``validation``: see
    :func:`validation_message`)."""
    if not any_failed(statuses):
        return Transition(
            ConditionType.SUCCEEDED,
            CertificationReason.ALL_WORKFLOWS_SUCCEEDED,
            "All certification categories completed successfully",
        )
    reason = (
        CertificationReason.WORKFLOW_VALIDATION_FAILED if validation else CertificationReason.WORKFLOW_FAILED
    )
    return Transition(ConditionType.FAILED, reason, "One or more certification categories failed")


def failed_workflows(cert: Obj, statuses: Sequence[Entry]) -> Iterator[tuple[Entry, str, str]]:
    """Each failed category with the namespace and name of the Workflow it ran."""
    for entry in statuses:
        ref = entry.get("workflowRef") or {}
        if entry.get("status") == FAILED and ref.get("name"):
            yield entry, ref.get("namespace") or cert["metadata"]["namespace"], ref["name"]


def validation_message(entry: Mapping[str, Any], workflow: Obj | None) -> str | None:
    """The Certification's ``ValidationFailed`` message when the failed category's Workflow
    failed validation (the first such category's is the Certification's)."""
    if workflow is None or not condition_true(workflow, ConditionType.VALIDATION_FAILED):
        return None
    validation = condition_of(workflow, ConditionType.VALIDATION_FAILED) or {}
    return f"Category {category(entry)}: {validation.get('message') or 'performance validation failed'}"


def _running(message: str) -> Transition:
    return Transition(ConditionType.IN_PROGRESS, CertificationReason.WORKFLOW_RUNNING, message)


RECORDED_FIELDS = ("succeededNodesRef", "failedNodesRef", "failedNodeCount", "provenance")
"""What a category's entry copies from its Workflow's status: the node-result ConfigMap refs, the
count of failed nodes and the provenance (spec digest, images that ran)."""


def failed_nodes_refs(statuses: Sequence[Entry]) -> list[Mapping[str, Any]]:
    """The failed-nodes ConfigMap refs whose names :func:`summary` needs to count each failed
    node once: those of the categories with failed nodes, when two or more have (one category's
    count is already its nodes, each once)."""
    refs = [
        s["failedNodesRef"]
        for s in statuses
        if int(s.get("failedNodeCount") or 0) and (s.get("failedNodesRef") or {}).get("name")
    ]
    return refs if len(refs) > 1 else []


def summary(statuses: Sequence[Entry], failed_nodes: Collection[str] | None = None) -> dict[str, Any]:
    """The Certification's printed summary of its category statuses: ``progress`` (categories
    ended of all) and ``failedNodeCount``: the nodes of ``failed_nodes`` (the names in the
    ConfigMaps of :func:`failed_nodes_refs`) when given, else each category's count, summed."""
    ended = sum(1 for s in statuses if s.get("status") in DONE)
    count = (
        len(set(failed_nodes))
        if failed_nodes is not None
        else sum(int(s.get("failedNodeCount") or 0) for s in statuses)
    )
    return {"progress": f"{ended}/{len(statuses)}", "failedNodeCount": count}


def with_workflow_record(entry: Entry, workflow: Obj) -> Entry:
    """``entry`` with the Workflow's :data:`RECORDED_FIELDS` that are set."""
    status = workflow.get("status") or {}
    recorded = {key: copy.deepcopy(status[key]) for key in RECORDED_FIELDS if status.get(key)}
    return {**entry, **recorded}


@dataclass(frozen=True)
class Followed:
    entry: Entry
    """The category's entry as it becomes."""
    transition: Transition | None
    """None: the Workflow has not started, nothing to write."""
    ended: bool
    """The category is done: go on to the next one at once."""


def follow(entry: Entry, workflow: Obj | None) -> Followed:
    """The followed category's entry and the Certification's condition, given its Workflow
    (None when it is gone)."""
    key = category(entry)
    if workflow is None:
        return Followed({**entry, "status": FAILED}, _running(f"Workflow for category {key} not found"), True)
    updated = with_workflow_record(entry, workflow)
    for cond_type, status, word in (
        (ConditionType.FAILED, FAILED, "failed"),
        (ConditionType.SUCCEEDED, SUCCEEDED, "succeeded"),
    ):
        if condition_true(workflow, cond_type):
            message = f"Workflow for category {key} {word}, advancing to next category"
            return Followed({**updated, "status": status}, _running(message), True)
    if not condition_true(workflow, ConditionType.IN_PROGRESS):
        return Followed(updated, None, False)  # "Created Workflow ..." still says it all
    blocked = scheduling.blocked_message(workflow)
    if blocked is not None:
        transition = Transition(ConditionType.IN_PROGRESS, scheduling.BLOCKED, f"Category {key}: {blocked}")
        return Followed(updated, transition, False)
    return Followed(updated, _running("Certification in progress"), False)


def started(statuses: Sequence[Entry], index: int, name: str, namespace: str) -> tuple[Entry, Transition]:
    """The started category's entry, naming its created Workflow, and the condition saying so."""
    entry = {**statuses[index], "status": IN_PROGRESS, "workflowRef": {"name": name, "namespace": namespace}}
    message = f"Created Workflow for category {category(entry)} ({index + 1} of {len(statuses)})"
    return entry, Transition(ConditionType.IN_PROGRESS, CertificationReason.WORKFLOW_CREATED, message)


def recovered(cert: Obj, workflow: WorkflowLookup) -> list[Entry] | None:
    """A terminal Certification's categories with every failed one whose Workflow still runs
    back InProgress (a stale failure); None when there is none."""
    statuses = [dict(s) for s in (cert.get("status") or {}).get("categoryStatuses") or ()]
    any_recovered = False
    for entry, namespace, name in failed_workflows(cert, statuses):
        found = workflow(namespace, name)
        if (
            found is not None
            and not found["metadata"].get("deletionTimestamp")
            and not any(condition_true(found, t) for t in TERMINAL_CONDITION_TYPES)
        ):
            entry["status"] = IN_PROGRESS
            any_recovered = True
    return statuses if any_recovered else None
