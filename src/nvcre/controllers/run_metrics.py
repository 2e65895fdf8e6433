"""The runs' gauges on the manager's ``/metrics``: ``nvcre_job_status`` and
``nvcre_workflow_domain_nodes``, computed at each scrape by :mod:`nvcre.decide.run_metrics` from
the manager's Job and Workflow caches (a standby caches nothing and serves no series)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from nvcre.decide.run_metrics import domain_samples, job_samples
from nvcre.objects import Obj


class Source(Protocol):
    """What is read of an informer."""

    def items(self, namespace: str | None = None) -> list[Obj]: ...


class RunMetrics(Collector):
    def __init__(self) -> None:
        self.jobs: Source | None = None
        self.workflows: Source | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        status = GaugeMetricFamily(
            "nvcre_job_status",
            "1 for a Job's status (pending, running, succeeded, failed; failed whenever a failure "
            "condition is True), 0 for the others.",
            labels=["namespace", "job", "workflow", "status"],
        )
        for labels, value in job_samples(self.jobs.items() if self.jobs else ()):
            status.add_metric(labels, value)
        domains = GaugeMetricFamily(
            "nvcre_workflow_domain_nodes",
            "Nodes of a Workflow's current groups per topology domain and group phase (Workflows "
            "with a topology key).",
            labels=["namespace", "workflow", "domain", "phase"],
        )
        for labels, value in domain_samples(self.workflows.items() if self.workflows else ()):
            domains.add_metric(labels, value)
        yield status
        yield domains


RUNS = RunMetrics()
REGISTRY.register(RUNS)


def watch(jobs: Source, workflows: Source) -> None:
    """Serve the gauges of what these informers (the manager's) cache."""
    RUNS.jobs, RUNS.workflows = jobs, workflows


__all__ = ["RUNS", "RunMetrics", "Source", "watch"]
