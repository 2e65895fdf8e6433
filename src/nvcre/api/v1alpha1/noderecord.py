"""NodeRecord (cluster-scoped): one node's certification history, named after the Node.

The manager writes it when a Workflow the node took part in ends; it never writes the Node
itself. Per category (a catalog category/variant, or the ad-hoc run it came from), the last
:data:`MAX_RESULTS` results are kept, newest last; the summary is computed from them. The rules
(a Workflow's result per node, folding results in) are in ``nvcre.fleet.records``.
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal

from pydantic import Field

from nvcre.api.v1alpha1.constants import Default, Kind
from nvcre.api.v1alpha1.job import ContainerImage
from nvcre.api.v1alpha1.limits import MAX_IMAGES
from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.api.v1alpha1.printing import AGE, Column
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.schema import cel

MAX_RESULTS: Final = 20
"""Results kept per category of a record (the oldest are dropped first)."""
MAX_CATEGORIES: Final = 64
"""Categories kept per record (the one whose newest result is oldest is dropped first)."""
MAX_PARTNERS: Final = 16
"""Partners listed per result (``groupSize`` counts them all)."""
FAILURE_WINDOW_DAYS: Final = 30
"""``summary.failuresLast30Days`` counts the kept results of this many days before the write."""

PASSED: Final = "Passed"
FAILED: Final = "Failed"
Verdict = Literal["Passed", "Failed"]
"""A result's verdict: :data:`PASSED` or :data:`FAILED`."""


class ObjectRef(NvcreModel):
    namespace: str | None = None
    name: str
    uid: str | None = None


class RunRef(NvcreModel):
    kind: Literal["Certification", "WorkloadRun"]
    namespace: str | None = None
    name: str
    uid: str | None = None


class NodeResult(NvcreModel):
    """What one run said of the node."""

    time: str = Field(description="When the Workflow ended (its verdict is final then).")
    run: RunRef | None = Field(
        default=None, description="The Certification or WorkloadRun; absent for a Workflow created alone."
    )
    workflow: ObjectRef
    job: ObjectRef | None = Field(
        default=None,
        description="The Job its values come from: its latest in the Workflow whose outcome agrees with the verdict.",
    )
    group: str | None = Field(default=None, description="That Job's group (group-3, isolate-0, ...).")
    group_size: int | None = Field(default=None, description="Nodes of that group, this one included.")
    domains: list[str] | None = Field(
        default=None, description="The topology domains that group spans (absent when none is known)."
    )
    partners: list[str] | None = Field(
        default=None,
        max_length=MAX_PARTNERS,
        description=f"The group's other nodes (the first {MAX_PARTNERS}).",
    )
    values: dict[str, float] | None = Field(
        default=None,
        description="The Job's final measured values by threshold key (busBandwidthGBps, avgStepTimeSec, "
        "goodputRatio, ...); absent when its measurements gave none.",
    )
    thresholds: dict[str, str] | None = Field(
        default=None, description="The Job's thresholds (CEL over value)."
    )
    floors: dict[str, float] | None = Field(
        default=None, description="The Job's expected-performance floors by key (fraction x expected)."
    )
    images: list[ContainerImage] | None = Field(
        default=None,
        max_length=MAX_IMAGES,
        description="The images that Job's workload ran, by digest.",
    )
    verdict: Verdict
    reason: str | None = Field(
        default=None,
        description="Failed: the failed-nodes reason (HardwareFailureDetected, ThresholdViolation, WorkloadFailed).",
    )
    cause: str | None = Field(
        default=None, description="Failed: nvcre's finer cause (BandwidthOutlier, ...)."
    )
    message: str | None = None


class CategoryHistory(NvcreModel):
    name: str = Field(
        description="domain/variant of a catalog category; workloadrun/<name> or workflow/<name>."
    )
    results: list[NodeResult] = Field(max_length=MAX_RESULTS, description="Oldest first.")


class Baseline(NvcreModel):
    """A node's baseline for one measurement: the median of its latest passing results of one
    category and shape (docs/fleet-memory.md)."""

    category: str
    group_size: int = Field(description="The shape: nodes of the group...")
    domains: int = Field(description="...and the topology domains it spans (0: unknown).")
    key: str = Field(description="busBandwidthGBps or avgStepTimeSec.")
    value: float
    results: int = Field(description="How many passing results the median is of.")


class NodeRecordSummary(NvcreModel):
    last_verdict: Verdict | None = None
    last_result_time: str | None = None
    last_category: str | None = None
    last_pass_time: str | None = None
    last_bus_bandwidth_g_bps: float | None = Field(
        default=None,
        alias="lastBusBandwidthGBps",
        description="busBandwidthGBps of the newest result that has one.",
    )
    failures_last30_days: int | None = Field(
        default=None,
        alias="failuresLast30Days",
        description=f"Failed results kept whose time is within {FAILURE_WINDOW_DAYS} days of the last write.",
    )
    consecutive_failures: int | None = Field(
        default=None, description="Failed results since the newest Passed one, every category."
    )
    baselines: list[Baseline] | None = Field(
        default=None,
        max_length=2 * MAX_CATEGORIES,
        description=f"Per category, for the shape of its newest result: the median of up to "
        f"{Default.BASELINE_RESULTS} latest passing results (the regression rule asks for "
        "baselineResults of them).",
    )
    bus_bandwidth_vs_baseline: float | None = Field(
        default=None,
        description="The newest bus bandwidth against the median of the passing results of its "
        "category and shape before it, in percent (-15.0: 15 % below).",
    )


class NodeRecordSpec(NvcreModel):
    node_name: str = Field(
        min_length=1,
        description="The Node this record is of (the record's name too).",
        json_schema_extra=cel(("self == oldSelf", "nodeName is immutable")),
    )


class NodeRecordStatus(NvcreModel):
    summary: NodeRecordSummary | None = None
    categories: list[CategoryHistory] | None = Field(
        default=None,
        max_length=MAX_CATEGORIES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class NodeRecord(Resource):
    """One node's certification history, kept by the manager across runs."""

    KIND = Kind.NODE_RECORD
    SHORT_NAMES = ("nvnr",)
    COLUMNS = (
        Column("Node", ".spec.nodeName", "The Node it records."),
        Column("Last", ".status.summary.lastVerdict", "Passed or Failed: the newest result's verdict."),
        Column("Last-Certified", ".status.summary.lastPassTime", "When it last passed.", "date"),
        Column(
            "BusBW",
            ".status.summary.lastBusBandwidthGBps",
            "Bus bandwidth of its newest result, GB/s.",
            "number",
        ),
        Column(
            "Vs-Baseline",
            ".status.summary.busBandwidthVsBaseline",
            "The newest bus bandwidth against the node's baseline, percent.",
            "number",
        ),
        Column(
            "Fails-30D",
            ".status.summary.failuresLast30Days",
            f"Failed results within {FAILURE_WINDOW_DAYS} days of the last write.",
            "integer",
        ),
        Column(
            "Consecutive-Fails",
            ".status.summary.consecutiveFailures",
            "Failed results since the last pass.",
            "integer",
            priority=1,
        ),
        Column("Last-Category", ".status.summary.lastCategory", "The newest result's category.", priority=1),
        AGE,
    )
    NAMESPACED: ClassVar[bool] = False

    spec: NodeRecordSpec
    status: NodeRecordStatus | None = None
