"""The runs' gauges on the manager's ``/metrics``: ``nvcre_job_status`` and
``nvcre_workflow_domain_nodes``, computed at each scrape by :mod:`nvcre.decide.run_metrics` from
the manager's Job and Workflow caches (a standby caches nothing and serves no series)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from nvcre.decide.run_metrics import domain_samples, job_samples
from nvcre.objects import Obj


class Source(Protocol):
    """What is read of an informer."""

    def items(self, namespace: str | None = None) -> list[Obj]: ...


def _items(source: Source | None) -> list[Obj]:
    """What ``source`` caches; nothing before :func:`watch` gave one."""
    return source.items() if source else []


def _gauge(
    name: str, documentation: str, labels: Sequence[str], samples: Iterable[tuple[Sequence[str], float]]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for sample_labels, value in samples:
        family.add_metric(sample_labels, value)
    return family


class RunMetrics(Collector):
    def __init__(self) -> None:
        self.jobs: Source | None = None
        self.workflows: Source | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        status = _gauge(
            "nvcre_job_status",
            "1 for a Job's status (pending, running, succeeded, failed; failed whenever a failure "
            "condition is True), 0 for the others.",
            ["namespace", "job", "workflow", "status"],
            job_samples(_items(self.jobs)),
        )
        domains = _gauge(
            "nvcre_workflow_domain_nodes",
            "Nodes of a Workflow's current groups per topology domain and group phase (Workflows "
            "with a topology key).",
            ["namespace", "workflow", "domain", "phase"],
            domain_samples(_items(self.workflows)),
        )
        yield status
        yield domains


RUNS = RunMetrics()
REGISTRY.register(RUNS)


def watch(jobs: Source, workflows: Source) -> None:
    """Serve the gauges of what these informers (the manager's) cache."""
    RUNS.jobs, RUNS.workflows = jobs, workflows


__all__ = ["RUNS", "RunMetrics", "Source", "watch"]
