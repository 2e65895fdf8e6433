"""Certification: a suite of catalog categories run one Workflow at a time."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from nvcre.api.v1alpha1.common import (
    EARLY_VERDICT,
    ISOLATION,
    QUANTITY_SIZE_PATTERN,
    SHORT_DURATION_PATTERN,
    BaselineResults,
    GangSchedulerSpec,
    LocalObjectReference,
    MaxNodes,
    NicResourceName,
    Placement,
    RegressionFraction,
    RunDeadline,
    TargetSpec,
    Thresholds,
    Toggle,
    TypedLocalObjectReference,
    WorkflowReference,
    WorkloadMetadata,
)
from nvcre.api.v1alpha1.constants import Kind
from nvcre.api.v1alpha1.meta import Condition, NvcreModel
from nvcre.api.v1alpha1.printing import AGE, MESSAGE, Column, state_columns
from nvcre.api.v1alpha1.provenance import Provenance
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.schema import IMMUTABLE_SPEC, Rule, cel_config


def _quantity(what: str) -> Any:
    return Annotated[
        int | str,
        WithJsonSchema(
            {
                "x-kubernetes-int-or-string": True,
                "maxLength": 32,
                "x-kubernetes-validations": [
                    {
                        "rule": "quantity(string(self)).compareTo(quantity('0')) >= 0",
                        "message": f"{what} must be a non-negative quantity",
                    }
                ],
            }
        ),
    ]


def _requests_within_limits(what: str) -> Rule:
    """The CEL rule that a request of ``what`` not exceed its limit, when both are set; its
    message states both values."""
    request, limit = f"self.requests.{what}", f"self.limits.{what}"
    message = f"requests.{what} must not exceed limits.{what}"
    return (
        f"!has(self.limits) || !has(self.requests) || !has({limit}) || !has({request})"
        f" || quantity(string({request})).compareTo(quantity(string({limit}))) <= 0",
        message,
        f"'{message} (requests.{what} ' + string({request}) + ', limits.{what} ' + string({limit}) + ')'",
    )


class CPUMemory(NvcreModel):
    cpu: _quantity("cpu") | None = None  # type: ignore[valid-type]
    memory: _quantity("memory") | None = None  # type: ignore[valid-type]


class CategoryResources(NvcreModel):
    """CPU and memory for training pods; replaces the DGX-class defaults as a whole."""

    model_config = cel_config(_requests_within_limits("cpu"), _requests_within_limits("memory"))

    limits: CPUMemory | None = None
    requests: CPUMemory | None = None


TestScale = Literal["intra-node", "intra-rack", "diagnose", "full-scale"]


class CategoryOptions(NvcreModel):
    """Options valid at spec level (defaults) and per category (the per-category value wins)."""

    nodes_per_job: int | None = Field(default=None, ge=1)
    enable_checkpoint: bool | None = None
    max_steps: int | None = Field(default=None, ge=-1)
    exit_duration_mins: int | None = Field(default=None, ge=1)
    startup_stall_timeout_seconds: int | None = Field(default=None, ge=1)
    gpus_per_node: int | None = Field(default=None, ge=1)
    mlnx_per_node: int | None = Field(default=None, ge=0)
    nic_resource_name: NicResourceName | None = None
    resources: CategoryResources | None = None
    enable_mnnvl: bool | None = Field(default=None, alias="enableMNNVL")
    image: str | None = Field(default=None, min_length=1, max_length=512)
    image_pull_secrets: list[LocalObjectReference] | None = None
    storage_class_name: str | None = None
    save_interval: int | None = Field(default=None, ge=1)
    save_retain_interval: int | None = Field(default=None, ge=1)
    save_top_k: int | None = Field(default=None, ge=1, alias="saveTopK")
    storage_size: str | None = Field(default=None, pattern=QUANTITY_SIZE_PATTERN)
    max_restarts: int | None = Field(default=None, ge=0)
    repeat_count: int | None = Field(default=None, ge=1)
    test_scale: TestScale | None = None
    max_bytes: str | None = Field(default=None, pattern=r"^[0-9]+(K|M|G|T)?$")
    num_iterations: int | None = Field(default=None, ge=1)
    num_cycles: int | None = Field(default=None, ge=1)
    thresholds: Thresholds | None = None
    expected_floor_fraction: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "With no threshold for a key, fail a group below this fraction of the expected value for "
            "its hardware (docs/expected-performance.md). 0.8 when unset; 0 turns it off."
        ),
    )
    regression_fraction: RegressionFraction = None
    baseline_results: BaselineResults = None
    allow_missing_data: bool | None = Field(
        default=None,
        description=(
            "Make a measurement that ends without final data informational instead of a failure "
            "(MeasurementUnavailable). Default false."
        ),
    )
    isolation: Toggle | None = Field(default=None, description=ISOLATION)
    early_verdict: Toggle | None = Field(default=None, description=EARLY_VERDICT)
    max_concurrent: int | None = None
    min_group_size: int | None = Field(default=None, ge=1)
    timeout_per_job: str | None = Field(default=None, pattern=SHORT_DURATION_PATTERN)
    measurement_timeout: str | None = Field(default=None, pattern=SHORT_DURATION_PATTERN)
    source_repo: str | None = Field(
        default=None, max_length=2048, pattern=r"^(https|ssh)://[A-Za-z0-9._~:/@%+-]+$"
    )
    workload_metadata: WorkloadMetadata | None = None
    rdma_device_access: Literal["hostPath", "devicePlugin"] | None = None
    placement: Placement | None = None


class Category(NvcreModel):
    domain: str = Field(min_length=1)
    variant: str = Field(min_length=1)
    options: CategoryOptions | None = None


class CertificationSpec(CategoryOptions):
    model_config = IMMUTABLE_SPEC

    target: TargetSpec
    categories: list[Category] = Field(min_length=1, max_length=64)
    gang_scheduler: GangSchedulerSpec | None = None
    max_nodes: MaxNodes = None
    deadline: RunDeadline = None


CategoryPhase = Literal["Pending", "InProgress", "Succeeded", "Failed"]


class CategoryStatus(NvcreModel):
    domain: str
    variant: str
    workflow_ref: WorkflowReference | None = None
    status: CategoryPhase
    succeeded_nodes_ref: TypedLocalObjectReference | None = None
    failed_nodes_ref: TypedLocalObjectReference | None = None
    failed_node_count: int | None = Field(
        default=None, description="Nodes the category's failed-nodes ConfigMap names."
    )
    provenance: Provenance | None = Field(
        default=None,
        description="The category's Workflow's: its spec's digest and the images its pods really ran.",
    )


class CertificationStatus(NvcreModel):
    conditions: list[Condition] | None = None
    category_statuses: list[CategoryStatus] | None = None
    progress: str | None = Field(default=None, description="Categories ended of all, e.g. 2/3.")
    failed_node_count: int | None = Field(
        default=None,
        description="Failed nodes of every category, each once.",
    )


class Certification(Resource):
    """A suite of catalog categories run against a GPU node pool."""

    KIND = Kind.CERTIFICATION
    SHORT_NAMES = ("nvcert",)
    COLUMNS = (
        *state_columns("Certification"),
        Column("Progress", ".status.progress", "Categories ended of all."),
        Column(
            "Running",
            '.status.categoryStatuses[?(@.status=="InProgress")].variant',
            "The category (its variant) running now.",
        ),
        Column(
            "Failed-Category",
            '.status.categoryStatuses[?(@.status=="Failed")].variant',
            "The first category that failed (the report lists them all).",
        ),
        Column(
            "Failed-Nodes",
            ".status.failedNodeCount",
            "Failed nodes of every category, each once.",
            "integer",
        ),
        AGE,
        MESSAGE,
    )

    spec: CertificationSpec
    status: CertificationStatus | None = None
