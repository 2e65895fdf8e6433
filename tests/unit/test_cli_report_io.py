"""How the report reads a run's objects: each kind in lists the label selects, never a namespace."""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.constants import Kind, Label
from nvcre.cli import report_io
from nvcre.testing.builders import BandwidthMeasurement


class Lists:
    """A client that answers ``list`` from ``objects`` by an ``in`` selector, and records each."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.selectors: list[dict[str, Any]] = []

    def list(self, resource: Any, *, namespace: str, labels: dict[str, Any]) -> list[dict[str, Any]]:
        self.selectors.append(labels)
        ((key, values),) = labels.items()
        found = [o for o in self.objects if o["metadata"]["labels"].get(key) in values]
        return sorted(found, key=lambda o: str(o["metadata"]["name"]))


def test_many_jobs_are_read_in_a_few_lists_in_name_order() -> None:
    jobs = [f"wf-group-{i:03d}-iter-1" for i in range(120)]
    measurements = [BandwidthMeasurement(f"{j}-bandwidth").labels(**{Label.JOB: j}).obj() for j in jobs]
    other = BandwidthMeasurement("other-bandwidth").labels(**{Label.JOB: "other"}).obj()
    kube: Any = Lists([*measurements, other])
    found = report_io.list_labelled(kube, Kind.BANDWIDTH_MEASUREMENT, "ns", Label.JOB, reversed(jobs))
    assert [m["metadata"]["name"] for m in found] == [f"{j}-bandwidth" for j in jobs]
    assert [len(s[Label.JOB]) for s in kube.selectors] == [50, 50, 20]


def test_a_name_no_label_can_hold_is_not_asked_for_and_no_name_asks_nothing() -> None:
    kube: Any = Lists([])
    assert report_io.list_labelled(kube, Kind.JOB, "ns", Label.WORKFLOW, ["x" * 64, ""]) == []
    assert kube.selectors == []
    report_io.list_labelled(kube, Kind.JOB, "ns", Label.WORKFLOW, ["x" * 63, "x" * 64, "x" * 63])
    assert kube.selectors == [{Label.WORKFLOW: ["x" * 63]}]
