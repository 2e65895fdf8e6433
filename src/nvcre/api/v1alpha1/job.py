"""Job: one workload (a Kubeflow TrainJob) on one node group, with its health and measurements."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from nvcre.api.v1alpha1.common import (
    BandwidthMeasurementConfig,
    GoodputMeasurementConfig,
    Thresholds,
    WorkloadMetadata,
    WorkloadReference,
    expression_schema,
)
from nvcre.api.v1alpha1.constants import Kind, Label
from nvcre.api.v1alpha1.limits import EXPRESSION_MAX_LENGTH, MAX_IMAGES
from nvcre.api.v1alpha1.meta import Condition, NvcreModel
from nvcre.api.v1alpha1.printing import AGE, MESSAGE, Column, label_path, state_columns
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.schema import EXACTLY_ONE, TrainJobSpecSchema, cel, cel_config
from nvcre.api.v1alpha1.trainjob import TrainJobSpec


def immutable(what: str) -> dict[str, Any]:
    return cel(("self == oldSelf", f"{what} is immutable"))


class WorkloadSpec(NvcreModel):
    """The workload to create; exactly one variant (today only trainJob)."""

    model_config = EXACTLY_ONE

    train_job: Annotated[TrainJobSpec, TrainJobSpecSchema] | None = None


class CELHealthCheck(NvcreModel):
    expression: Annotated[str, WithJsonSchema(expression_schema(EXPRESSION_MAX_LENGTH))] = Field(
        description="CEL over `node`; true means the node is unhealthy."
    )


class NodeHealthMonitorSpec(NvcreModel):
    cel: CELHealthCheck


class JobCheckpointSpec(NvcreModel):
    pvc_name: str = Field(min_length=1)
    max_restarts: int | None = None


class ExpectedFigure(NvcreModel):
    key: str = Field(min_length=1, max_length=64, description="The threshold key, e.g. busBandwidthGBps.")
    value: str = Field(min_length=1, max_length=32, description="The expected value, decimal text.")
    source: str = Field(max_length=512, description="Where the figure was published.")
    row: str = Field(max_length=256, description="The table row it comes from.")


class ExpectedPerformance(NvcreModel):
    floor_fraction: float = Field(ge=0, le=1, description="The floor is this fraction of each figure.")
    table_version: str | None = Field(default=None, max_length=32)
    figures: list[ExpectedFigure] | None = Field(default=None, max_length=8)


class JobSpec(NvcreModel):
    model_config = cel_config(
        (
            "has(self.workloadMetadata) == has(oldSelf.workloadMetadata)",
            "workloadMetadata cannot be added or removed after creation",
        ),
        (
            "has(self.nodeHealthMonitor) == has(oldSelf.nodeHealthMonitor)"
            " && has(self.goodputMeasurement) == has(oldSelf.goodputMeasurement)"
            " && has(self.bandwidthMeasurement) == has(oldSelf.bandwidthMeasurement)",
            "nodeHealthMonitor, goodputMeasurement, and bandwidthMeasurement cannot be added or removed after creation",
        ),
    )

    workload: WorkloadSpec = Field(json_schema_extra=immutable("workload"))
    workload_metadata: WorkloadMetadata | None = Field(
        default=None, json_schema_extra=immutable("workloadMetadata")
    )
    node_health_monitor: NodeHealthMonitorSpec | None = Field(
        default=None, json_schema_extra=immutable("nodeHealthMonitor")
    )
    checkpoint: JobCheckpointSpec | None = None
    stall_multiplier: int | None = Field(default=None, ge=1)
    startup_stall_timeout_seconds: int | None = Field(default=None, ge=1)
    scheduling_stall_grace_seconds: int | None = Field(default=None, ge=1)
    goodput_measurement: GoodputMeasurementConfig | None = Field(
        default=None, json_schema_extra=immutable("goodputMeasurement")
    )
    bandwidth_measurement: BandwidthMeasurementConfig | None = Field(
        default=None, json_schema_extra=immutable("bandwidthMeasurement")
    )
    thresholds: Thresholds | None = Field(default=None, description="Metric name to CEL over `value`.")
    measurement_timeout: str | None = Field(default=None, description="Duration; 5m when unset.")
    expected_performance: ExpectedPerformance | None = Field(
        default=None,
        description=(
            "What the group's hardware should measure (the catalog's expected-performance table), "
            "written by the Workflow: a key no threshold names fails below floorFraction of its figure."
        ),
    )


FailedNodeReason = Literal["HardwareFailureDetected", "ThresholdViolation", "WorkloadFailed"]


class FailedNode(NvcreModel):
    name: str
    reason: FailedNodeReason = Field(
        description="The reference's failed-node reason, which consumers of the results match on."
    )
    cause: str | None = Field(
        default=None,
        max_length=64,
        description="Why nvcre failed the node, finer than reason (e.g. BandwidthOutlier, JobTimedOut).",
    )
    message: str | None = None


class FailureLog(NvcreModel):
    pod_name: str
    node_name: str
    exit_code: int
    reason: str | None = None
    tail: str | None = Field(default=None, max_length=32768)


class ContainerImage(NvcreModel):
    image: str = Field(max_length=512, description="The image as the pod spec names it.")
    image_id: str = Field(
        alias="imageID", max_length=512, description="The digest the kubelet resolved it to (imageID)."
    )


class JobStatus(NvcreModel):
    conditions: list[Condition] | None = None
    failed_nodes: list[FailedNode] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "reason"]},
    )
    workload_ref: WorkloadReference | None = None
    workload_start_time: str | None = None
    scheduling_blocked_since: str | None = None
    scheduling_resumed_time: str | None = None
    restart_count: int | None = None
    failure_log: FailureLog | None = None
    images: list[ContainerImage] | None = Field(
        default=None,
        max_length=MAX_IMAGES,
        description="The images its workload's containers ran, by digest (from the pods' statuses).",
    )


class Job(Resource):
    """Creates and watches one workload on one node group."""

    KIND = Kind.JOB
    SHORT_NAMES = ("nvjob",)
    COLUMNS = (
        *state_columns("Job"),
        Column("Group", label_path(Label.GROUP), "The Workflow's node group it runs."),
        Column("Nodes", ".spec.workload.trainJob.trainer.numNodes", "Nodes of its TrainJob.", "integer"),
        Column("Restarts", ".status.restartCount", "Checkpoint restarts so far.", "integer"),
        Column("Workflow", label_path(Label.WORKFLOW), "The Workflow it belongs to.", priority=1),
        AGE,
        MESSAGE,
    )

    spec: JobSpec
    status: JobStatus | None = None
