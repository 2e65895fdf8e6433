"""What the runs' gauges say, from cached Jobs and Workflows (``nvcre_job_status``,
``nvcre_workflow_domain_nodes``); the manager serves them on ``/metrics``
(:mod:`nvcre.controllers.run_metrics`).

They are computed from the objects at each scrape, not kept from the writes the controllers made:
a Job or Workflow that is deleted leaves ``/metrics`` with it, and a restarted manager, or a new
leader, serves the same values once its caches have synced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from nvcre.api.v1alpha1.constants import ConditionType, Label

JOB_STATUSES: Final = ("pending", "running", "succeeded", "failed")
"""``nvcre_job_status``'s ``status`` values: one of them 1 for each Job, the others 0."""
FAILED_TYPES: Final = (ConditionType.FAILED, ConditionType.HARDWARE_FAILED, ConditionType.VALIDATION_FAILED)
GROUP_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed")

JobLabels = tuple[str, str, str, str]
"""(namespace, job, workflow, status)."""
DomainLabels = tuple[str, str, str, str]
"""(namespace, workflow, domain, phase)."""


def _true(obj: Mapping[str, Any], cond_type: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == cond_type and c.get("status") == "True" for c in conditions)


def job_status(job: Mapping[str, Any]) -> str:
    """A Job's status: ``failed`` when any failure condition is True, whatever else is (a timed-out
    Job is failed even if a stale ``InProgress`` were still True), then ``succeeded``, ``running``
    (``InProgress``), else ``pending``."""
    if any(_true(job, t) for t in FAILED_TYPES):
        return "failed"
    if _true(job, ConditionType.SUCCEEDED):
        return "succeeded"
    if _true(job, ConditionType.IN_PROGRESS):
        return "running"
    return "pending"


def job_samples(jobs: Iterable[Mapping[str, Any]]) -> list[tuple[JobLabels, float]]:
    """``nvcre_job_status``: for each Job, 1 for its status and 0 for each other."""
    samples: list[tuple[JobLabels, float]] = []
    for job in jobs:
        meta = job.get("metadata") or {}
        workflow = str((meta.get("labels") or {}).get(Label.WORKFLOW) or "")
        now = job_status(job)
        for status in JOB_STATUSES:
            labels = (str(meta.get("namespace") or ""), str(meta.get("name") or ""), workflow, status)
            samples.append((labels, 1.0 if status == now else 0.0))
    return sorted(samples)


def _group_domains(group: Mapping[str, Any]) -> dict[str, int]:
    """Nodes of a group per topology domain: all of them in its one domain, else its
    ``domainNodeCounts``; none for a group of no domain (a Workflow without a topology key)."""
    domains = list(group.get("domains") or ())
    if len(domains) == 1:
        return {domains[0]: len(group.get("nodes") or ())}
    counts = group.get("domainNodeCounts") or {}
    return {d: int(counts.get(d) or 0) for d in domains}


def domain_samples(workflows: Iterable[Mapping[str, Any]]) -> list[tuple[DomainLabels, float]]:
    """``nvcre_workflow_domain_nodes``: for each Workflow and topology domain of its current groups,
    how many of the domain's nodes are in a group of each phase (every phase listed, 0 included)."""
    samples: list[tuple[DomainLabels, float]] = []
    for workflow in workflows:
        meta = workflow.get("metadata") or {}
        groups = ((workflow.get("status") or {}).get("orchestration") or {}).get("groups") or ()
        nodes: dict[str, dict[str, int]] = {}
        for group in groups:
            phase = str(group.get("phase") or "Pending")
            for domain, count in _group_domains(group).items():
                by_phase = nodes.setdefault(domain, dict.fromkeys(GROUP_PHASES, 0))
                by_phase[phase] = by_phase.get(phase, 0) + count
        for domain, by_phase in nodes.items():
            for phase, count in by_phase.items():
                labels = (str(meta.get("namespace") or ""), str(meta.get("name") or ""), domain, phase)
                samples.append((labels, float(count)))
    return sorted(samples)
