"""Workflow: discovers nodes, applies overrides, partitions groups and runs one Job per group."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from nvcre.api.v1alpha1.common import (
    ISOLATION,
    BaselineResults,
    DiagnoseSpec,
    ExecutionSpec,
    GangSchedulerSpec,
    OverrideSpec,
    Placement,
    RegressionFraction,
    TargetSpec,
    Thresholds,
    Toggle,
    TopologySpec,
    TypedLocalObjectReference,
    WhenSpec,
    WorkloadReference,
)
from nvcre.api.v1alpha1.constants import Kind
from nvcre.api.v1alpha1.job import FailedNode, JobSpec
from nvcre.api.v1alpha1.meta import Condition, NvcreModel
from nvcre.api.v1alpha1.printing import AGE, MESSAGE, Column, state_columns
from nvcre.api.v1alpha1.provenance import Provenance
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.schema import EmbeddedResource, Json, cel, cel_config

GroupPhase = Literal["Pending", "Running", "Succeeded", "Failed"]


class JobTemplateMetadata(NvcreModel):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class JobTemplate(NvcreModel):
    metadata: JobTemplateMetadata | None = None
    spec: JobSpec


class OrchestrationSpec(NvcreModel):
    target: TargetSpec | None = None
    topology: TopologySpec | None = None
    diagnose: DiagnoseSpec | None = None
    execution: ExecutionSpec | None = None
    iterations: int = Field(default=1, ge=1)
    placement: Placement | None = Field(default=None, description="Pinned (default) or Unpinned.")
    isolation: Toggle | None = Field(default=None, description=ISOLATION)
    max_nodes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "The most nodes the Workflow may take (its owner's limit): a target that resolves to "
            "more fails it TooManyNodes before any Job exists."
        ),
    )
    deadline_time: str | None = Field(
        default=None,
        description=(
            "When the Workflow must stop (RFC 3339; its owner's spec.deadline): no Job starts after "
            "it, unfinished Jobs are deleted and it ends Failed, DeadlineExceeded."
        ),
        json_schema_extra={"format": "date-time"},
    )


class PerformanceTracking(NvcreModel):
    per_node: bool = False
    per_domain: bool = False


class ThresholdsSpec(NvcreModel):
    thresholds: Thresholds | None = None


class PerformanceValidation(NvcreModel):
    enabled: bool = False
    plugin: str | None = None
    config: Json = None
    tracking: PerformanceTracking | None = None
    thresholds: ThresholdsSpec | None = None
    measurement_timeout: str | None = None
    outlier_fraction: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "With 3 or more groups of one size, a group below this fraction of its peers' median bus "
            "bandwidth (or slower than their median step time / fraction) fails validation. "
            "0.9 when unset; 0 turns it off."
        ),
    )
    expected_floor_fraction: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "Judge each group, for every key no threshold names, against this fraction of what the "
            "catalog's expected-performance table says its hardware should measure. Unset or 0: off "
            "(a Certification sets 0.8 unless told otherwise)."
        ),
    )
    regression_fraction: RegressionFraction = None
    baseline_results: BaselineResults = None


class ValidationSpec(NvcreModel):
    performance: PerformanceValidation | None = None


class WorkflowSpec(NvcreModel):
    model_config = cel_config(
        (
            "has(self.gangScheduler) == has(oldSelf.gangScheduler)",
            "gangScheduler cannot be added or removed after creation",
        )
    )

    namespace: str | None = None
    job_template: JobTemplate
    orchestration: OrchestrationSpec
    dependencies: list[EmbeddedResource] | None = Field(
        default=None, description="Objects created before the Jobs; each may carry a `when`."
    )
    overrides: list[OverrideSpec] | None = None
    validation: ValidationSpec | None = None
    gang_scheduler: GangSchedulerSpec | None = Field(
        default=None, json_schema_extra=cel(("self == oldSelf", "gangScheduler is immutable"))
    )


class DependencyRef(NvcreModel):
    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    scope: Literal["workflow", "job"] | None = None
    group_name: str | None = None
    iteration: int | None = None


class GroupRecord(NvcreModel):
    name: str
    phase: GroupPhase
    job_name: str | None = None
    start_time: str | None = None
    completion_time: str | None = None


class IterationRecord(NvcreModel):
    iteration: int
    groups: list[GroupRecord] | None = None


class AppliedOverride(NvcreModel):
    index: int
    when: WhenSpec | None = None
    patches: list[str] | None = None
    no_op: bool | None = None


class ScreeningResult(NvcreModel):
    nodes: list[str] | None = None
    passed: bool


class InfrastructureFault(NvcreModel):
    domain: str
    domains: list[str] | None = Field(
        default=None, description="A bad link between two domains: both of them (domain is 'a,b')."
    )
    group_a: list[str] | None = None
    group_b: list[str] | None = None
    stage: str


class TransientFailure(NvcreModel):
    """A group that failed and passed when re-run (or a failure no later probe reproduced)."""

    round: int
    group: str
    nodes: list[str] | None = None
    stage: str | None = None


class PendingProbe(NvcreModel):
    domain: str
    half_a: list[str] | None = None
    half_b: list[str] | None = None
    probe_round: int | None = None


class CrossBoundaryState(NvcreModel):
    pending_probes: list[PendingProbe] | None = None
    origin_stage: str | None = None


DiagnoseStage = Literal[
    "intra-screening",
    "intra-screening-no-nvl",
    "inter-screening",
    "bisection",
    "confirmation",
    "cross-boundary",
    "complete",
]

_SET: dict[str, Any] = {"x-kubernetes-list-type": "set"}


class DiagnoseStatus(NvcreModel):
    stage: DiagnoseStage | None = None
    round: int | None = None
    healthy_nodes: list[str] | None = Field(default=None, json_schema_extra=_SET)
    suspect_nodes: list[str] | None = Field(default=None, json_schema_extra=_SET)
    no_nvl_suspect_nodes: list[str] | None = Field(
        default=None, alias="noNVLSuspectNodes", json_schema_extra=_SET
    )
    representative_nodes: dict[str, str] | None = None
    screening_results: dict[str, ScreeningResult] | None = None
    no_nvl_screening_results: dict[str, ScreeningResult] | None = Field(
        default=None, alias="noNVLScreeningResults"
    )
    infrastructure_faults: list[InfrastructureFault] | None = None
    cross_boundary_state: CrossBoundaryState | None = None
    start_time: str | None = None
    faulty_nodes: list[str] | None = Field(
        default=None, json_schema_extra=_SET, description="Confirmed faulty with a healthy reference node."
    )
    transient_failures: list[TransientFailure] | None = Field(
        default=None, description="Failures seen that did not repeat: not blamed on any node."
    )
    outcome: Literal["Healthy", "Faulty", "Inconclusive", "LimitReached"] | None = None


class GroupStatus(NvcreModel):
    name: str
    nodes: list[str] | None = None
    domains: list[str] | None = None
    domain_node_counts: dict[str, int] | None = None
    overflow: bool | None = None
    phase: GroupPhase
    retries: int | None = None
    job_ref: WorkloadReference | None = None
    start_time: str | None = None
    completion_time: str | None = None
    suspects: list[FailedNode] | None = Field(
        default=None,
        description="Isolation: what this failed group's Job said of each member no hardware report "
        "named, waiting for the member's re-test.",
    )
    suspect: str | None = Field(
        default=None, description="On an isolation group: the node it re-tests (the others are its partners)."
    )
    screen: bool | None = Field(
        default=None,
        description="On an isolation group: a pair of suspects with no healthy node to pair with, each "
        "re-tested with its two neighbours on a ring.",
    )


class IsolationSuspect(NvcreModel):
    name: str
    group: str = Field(description="The failed group it was a member of.")
    entry: FailedNode = Field(description="What that group's failure said of it.")


class IsolationLink(NvcreModel):
    """A failed group whose every member passed with partners of its own domain: its link."""

    domains: list[str]
    group: str
    nodes: list[str]
    message: str


class IsolationRetest(NvcreModel):
    """One re-test of the last round: a suspect with its healthy partners."""

    suspect: str
    partners: list[str]
    job_name: str | None = None
    passed: bool


class IsolationStatus(NvcreModel):
    iteration: int = Field(description="The iteration whose failed groups are (or were last) isolated.")
    stage: Literal["Running", "Complete"]
    suspects: list[IsolationSuspect] | None = None
    groups: list[GroupStatus] | None = Field(
        default=None, description="While Running: the iteration's own groups, restored when the round ends."
    )
    failed_nodes: list[str] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Failed again, every round.",
    )
    cleared_nodes: list[str] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Passed with healthy partners, every round (succeeded unless failed elsewhere).",
    )
    links: list[IsolationLink] | None = None
    retests: list[IsolationRetest] | None = Field(default=None, description="The last round's re-tests.")
    message: str | None = None


class OrchestrationStatus(NvcreModel):
    total_nodes: int
    nodes_per_job: int
    total_groups: int
    current_iteration: int | None = None
    completed_iterations: int | None = None
    iteration_history: list[IterationRecord] | None = None
    detected_platform: str | None = None
    detected_gpu_architecture: str | None = Field(default=None, alias="detectedGPUArchitecture")
    excluded_nodes: list[str] | None = None
    exclusion_reason: str | None = None
    applied_overrides: list[AppliedOverride] | None = None
    diagnose: DiagnoseStatus | None = None
    isolation: IsolationStatus | None = None
    groups: list[GroupStatus] | None = None
    placement: Placement | None = None
    gpu_products: list[str] | None = None


class NodeIteration(NvcreModel):
    iteration_number: int
    tflops: str | None = None
    duration: str | None = None
    memory_used_gb: str | None = Field(default=None, alias="memoryUsedGB")
    status: str


class NodeResult(NvcreModel):
    domain: str | None = None
    group: str | None = None
    status: str | None = None
    iterations: list[NodeIteration] | None = None


class DomainResult(NvcreModel):
    node_count: int | None = None
    status: str | None = None
    average_tflops: str | None = None


class WorkflowStatus(NvcreModel):
    conditions: list[Condition] | None = None
    namespace: str | None = None
    succeeded_nodes_ref: TypedLocalObjectReference | None = None
    failed_nodes_ref: TypedLocalObjectReference | None = None
    failed_node_count: int | None = Field(default=None, description="Nodes its failed-nodes ConfigMap names.")
    dependency_refs: list[DependencyRef] | None = None
    orchestration: OrchestrationStatus | None = None
    node_results: dict[str, NodeResult] | None = None
    domain_results: dict[str, DomainResult] | None = None
    provenance: Provenance | None = Field(
        default=None, description="The digest of this spec and the images its pods really ran."
    )


class Workflow(Resource):
    """Runs one category or one WorkloadRun across node groups."""

    KIND = Kind.WORKFLOW
    SHORT_NAMES = ("nvwf",)
    COLUMNS = (
        *state_columns("Workflow"),
        Column(
            "Nodes", ".status.orchestration.totalNodes", "Nodes taking part (after exclusions).", "integer"
        ),
        Column(
            "Groups",
            ".status.orchestration.totalGroups",
            "Node groups, one Job each per iteration.",
            "integer",
        ),
        Column("Nodes/Job", ".status.orchestration.nodesPerJob", "Nodes of each group's Job.", "integer"),
        Column(
            "Failed-Nodes", ".status.failedNodeCount", "Nodes its failed-nodes ConfigMap names.", "integer"
        ),
        Column(
            "Iteration",
            ".status.orchestration.currentIteration",
            "The iteration running now (of spec.orchestration.iterations).",
            "integer",
            priority=1,
        ),
        Column("Platform", ".status.orchestration.detectedPlatform", "The nodes' platform.", priority=1),
        Column(
            "GPU", ".status.orchestration.detectedGPUArchitecture", "The nodes' GPU architecture.", priority=1
        ),
        AGE,
        MESSAGE,
    )

    spec: WorkflowSpec
    status: WorkflowStatus | None = None
