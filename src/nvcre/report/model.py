"""The report of a Certification or WorkloadRun (cli.md 4.5) as plain frozen data.

Built from the objects read from the cluster by :mod:`nvcre.report.build`; rendered as the box
report (:mod:`nvcre.report.text`), JSON (:mod:`nvcre.report.jsonreport`), JUnit XML
(:mod:`nvcre.report.junit`) and a self-contained HTML page (:mod:`nvcre.report.html`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nvcre.report.history import NodeHistory
from nvcre.report.trends import NodeTrend

Result = Literal["PASSED", "FAILED", "RUNNING", "INCOMPLETE"]
CategoryState = Literal["Succeeded", "Failed", "Running", "Pending"]
IterationState = Literal["Succeeded", "Restarted", "Failed", "Running"]
ReportKind = Literal["Certification", "WorkloadRun"]


@dataclass(frozen=True)
class FailureLog:
    """The captured failure of an execution-failed group (the Job's ``status.failureLog``)."""

    pod: str
    node: str
    exit_code: int
    reason: str
    tail: str


@dataclass(frozen=True)
class NodeFinding:
    """Why one node failed: its reason, and for a threshold violation the measured value
    against the threshold (``busbw 182.4 GB/s < 400``)."""

    node: str
    reason: str
    group: str
    detail: str = ""
    """The measured value against its threshold (or its peers); empty when the reason says it all."""
    message: str = ""
    """The failed-nodes record's message."""
    cause: str = ""
    """The record's finer cause (``BandwidthOutlier``, ``JobTimedOut``...); the reason when it has none."""

    @property
    def summary(self) -> str:
        """What a reader sees beside the node: the measured value, else the cause."""
        return self.detail or self.cause or self.reason


@dataclass(frozen=True)
class FailedGroup:
    name: str
    nodes: tuple[str, ...]
    reason: str
    failure_log: FailureLog | None = None
    findings: tuple[NodeFinding, ...] = ()


@dataclass(frozen=True)
class Iteration:
    number: int
    state: IterationState
    runtime: str


@dataclass(frozen=True)
class Clique:
    """A topology domain: how many of its nodes ran in a group that passed."""

    name: str
    validated: int
    total: int
    passed: bool
    bus_bandwidth: str = ""
    transport: tuple[str, ...] = ()


@dataclass(frozen=True)
class DomainMetrics:
    """Training metrics averaged over the groups of one topology domain (``name`` empty: flat)."""

    name: str
    node_count: int
    goodput: float | None
    tflops_per_gpu: float | None
    step_time_sec: float | None
    provisional: bool = False
    interruptions: int | None = None
    """Failures and restarts of the domain's groups, summed (None: no group counted any yet)."""
    lost_work_sec: float | None = None
    """Work redone after them (each interruption's time since its last checkpoint), summed."""


@dataclass(frozen=True)
class GroupBandwidth:
    group: str
    passed: bool
    bus_bandwidth: str
    """``"<n> GB/s"``, empty when the group has no bandwidth data."""
    low: bool
    provisional: bool
    transport: tuple[str, ...]
    failed_nodes: tuple[str, ...]
    finished: bool = True
    """False while the group runs (or waits): neither passed nor failed yet."""
    nodes: tuple[str, ...] = ()
    domain: str = ""
    """The group's first topology domain (empty when flat)."""
    value_gbps: float | None = None
    """The best bus bandwidth measured (the number behind ``bus_bandwidth``)."""
    limit_gbps: float | None = None
    """What it is judged against: the ``busBandwidthGBps`` threshold's bound, else the
    expected floor; None when neither is a plain number."""
    limit: str = ""
    """``threshold >= 400`` or ``floor 389.7 GB/s``: what ``limit_gbps`` is."""
    sizes: tuple[BandwidthRow, ...] = ()
    """This group's bus bandwidth by message size."""


@dataclass(frozen=True)
class BandwidthRow:
    size_bytes: int
    alg_bw: str
    bus_bw: str
    samples: int


@dataclass(frozen=True)
class StageResult:
    """One stage of adaptive fault isolation and the screening results recorded for it."""

    stage: str
    passed: tuple[str, ...]
    failed: tuple[str, ...]


@dataclass(frozen=True)
class TransientFailure:
    """A failure that did not repeat (a group that passed its re-test): no node is blamed."""

    round: int
    group: str
    nodes: tuple[str, ...]
    stage: str


@dataclass(frozen=True)
class Diagnosis:
    stage: str
    rounds: int
    healthy: tuple[str, ...]
    suspect: tuple[str, ...]
    faulty_by_domain: tuple[tuple[str, tuple[str, ...]], ...]
    infra: tuple[str, ...]
    max_bw: str
    min_bw: str
    test_results: tuple[StageResult, ...]
    outcome: str = ""
    """``Healthy``, ``Faulty``, ``Inconclusive`` (a transient failure seen) or ``LimitReached``."""
    transient: tuple[TransientFailure, ...] = ()
    limit: str = ""
    """Why the diagnosis stopped early (``maxRounds``, ``deadline``), with its suspects."""


@dataclass(frozen=True)
class GroupMetrics:
    """One training group's measured goodput, step time and TFLOPs/GPU."""

    group: str
    nodes: tuple[str, ...]
    domain: str
    passed: bool
    goodput: float | None
    step_time_sec: float | None
    tflops_per_gpu: float | None
    provisional: bool = False


@dataclass(frozen=True)
class Retest:
    """An isolation re-test: a suspect run with healthy partners, and whether it passed."""

    suspect: str
    partners: tuple[str, ...]
    passed: bool
    bus_bandwidth: str = ""
    """The re-test's best bus bandwidth (``"<n> GB/s"``), empty without data."""
    value_gbps: float | None = None
    sizes: tuple[BandwidthRow, ...] = ()
    limit_gbps: float | None = None
    limit: str = ""
    """The re-test's own bound (its threshold, else the floor for its size)."""


@dataclass(frozen=True)
class ImageRun:
    """An image the category's pods ran: the reference its rendered spec names (or, when the spec
    names none, the one that ran), the digests it ran as, and what did not match the spec."""

    image: str
    image_ids: tuple[str, ...]
    mismatch: str = ""


@dataclass(frozen=True)
class Release:
    """The run's ``ResourcesReleased`` condition: whether its pods, JobSets, TrainJobs and
    Job-scoped runtime copies are gone since it ended."""

    released: bool
    reason: str
    message: str


@dataclass(frozen=True)
class Stopped:
    """Why the run as a whole was stopped (its node limit or its deadline): its Failed reason
    and message."""

    reason: str
    message: str


@dataclass(frozen=True)
class CategoryReport:
    domain: str
    variant: str
    status: CategoryState
    reason: str = ""
    runtime: str = ""
    iterations: tuple[Iteration, ...] = ()
    scale: str = ""
    nodes_per_job: int | None = None
    jobs: int | None = None
    placement: str = ""
    mnnvl: str = ""
    failed_groups: tuple[FailedGroup, ...] = ()
    cliques: tuple[Clique, ...] = ()
    diagnosis: Diagnosis | None = None
    metrics: tuple[DomainMetrics, ...] = ()
    bandwidth_groups: tuple[GroupBandwidth, ...] = ()
    transport: tuple[str, ...] = ()
    bandwidth: tuple[BandwidthRow, ...] = ()
    bandwidth_provisional: bool = False
    excluded_nodes: tuple[str, ...] = ()
    nodes: tuple[NodeStatus, ...] = ()
    """Every node the category placed in a group, with its group, domain and verdict."""
    group_metrics: tuple[GroupMetrics, ...] = ()
    retests: tuple[Retest, ...] = ()
    """The last isolation round's re-tests."""
    spec_digest: str = ""
    """The sha256 of the category's Workflow spec as rendered (its configuration)."""
    images: tuple[ImageRun, ...] = ()
    """The images its pods really ran."""


@dataclass(frozen=True)
class NodeStatus:
    """A node of a WorkloadRun: its group, rack (the group's first domain) and Passed|Failed."""

    name: str
    group: str
    rack: str
    status: Literal["Passed", "Failed"]


@dataclass(frozen=True)
class Report:
    kind: ReportKind
    name: str
    namespace: str
    result: Result
    platform: str = ""
    gpu: str = ""
    total_nodes: int = 0
    excluded_nodes: tuple[str, ...] = ()
    exclusion_reason: str = ""
    categories: tuple[CategoryReport, ...] = ()
    failed_nodes: tuple[NodeFinding, ...] = ()
    nodes: tuple[NodeStatus, ...] = ()
    state: CategoryState = "Pending"
    """The run's own state (Succeeded, Failed, Running, Pending), from its conditions."""
    history: NodeHistory | None = None
    """What the nodes' records say beyond this run (repeat failures, nodes not certified
    recently); None when they say nothing (:mod:`nvcre.report.history`)."""
    trends: tuple[NodeTrend, ...] = ()
    """Each failed node's last results per category, from its record (:mod:`nvcre.report.trends`)."""
    release: Release | None = None
    """Whether the ended run's resources are released; None before it says."""
    stopped: Stopped | None = None
    """Why the run as a whole was stopped; None when it was not (its categories say why they failed)."""

    @property
    def title(self) -> str:
        return f"{self.kind} Report"
