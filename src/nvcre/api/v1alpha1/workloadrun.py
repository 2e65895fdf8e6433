"""WorkloadRun: the ad-hoc entry point, one Workflow without the catalog."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from nvcre.api.v1alpha1.common import (
    ISOLATION,
    QUANTITY_SIZE_PATTERN,
    BandwidthMeasurementConfig,
    GangSchedulerSpec,
    GoodputMeasurementConfig,
    LocalObjectReference,
    MaxNodes,
    NicResourceName,
    OverrideSpec,
    Placement,
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
from nvcre.api.v1alpha1.schema import (
    EXACTLY_ONE,
    IMMUTABLE_SPEC,
    Container,
    EnvVar,
    ResourceRequirements,
    Volume,
    VolumeMount,
    cel_config,
)


class TorchFramework(NvcreModel):
    model_config = cel_config(
        ("!(has(self.script) && has(self.module))", "script and module are mutually exclusive"),
        ("has(self.script) || has(self.module)", "either script or module must be set"),
    )

    script: str | None = Field(default=None, min_length=1, description="Script passed to torchrun.")
    module: str | None = Field(default=None, min_length=1, description="Module run with torchrun -m.")
    args: list[str] | None = None


class MPIFramework(NvcreModel):
    binary: str = Field(min_length=1, description="Program mpirun starts on every rank.")
    args: list[str] | None = None
    mpi_args: list[str] | None = Field(default=None, description="Extra mpirun arguments; they win.")
    mpi_implementation: str = "OpenMPI"
    mpirun_path: str = Field(min_length=1)


class ExecFramework(NvcreModel):
    command: list[str] = Field(min_length=1)
    args: list[str] | None = None


class FrameworkSpec(NvcreModel):
    """Exactly one of torch, mpi or exec."""

    model_config = EXACTLY_ONE

    torch: TorchFramework | None = None
    mpi: MPIFramework | None = None
    exec: ExecFramework | None = None


class ConfigSpec(NvcreModel):
    """Files mounted at /config (mode 0755)."""

    model_config = cel_config(
        ("!(has(self.inline) && has(self.configMapRef))", "inline and configMapRef are mutually exclusive")
    )

    inline: dict[str, str] | None = Field(
        default=None, description="File name to content; creates <run>-config."
    )
    config_map_ref: LocalObjectReference | None = None


class CheckpointSpec(NvcreModel):
    storage_size: str = Field(pattern=QUANTITY_SIZE_PATTERN)
    storage_class_name: str | None = None
    max_restarts: int | None = Field(default=None, ge=0)


class WorkloadRunOrchestration(NvcreModel):
    test_scale: Literal["intra-node", "intra-rack", "full-scale"] | None = None
    repeat_count: int | None = Field(default=None, ge=1)
    max_concurrent: int | None = Field(default=None, ge=0)
    timeout_per_job: str | None = Field(default=None, description="Go duration; 24h when empty or invalid.")
    placement: Placement | None = Field(default=None, description="Pinned (default) or Unpinned.")
    isolation: Toggle | None = Field(default=None, description=ISOLATION)


class WorkloadRunSpec(NvcreModel):
    model_config = IMMUTABLE_SPEC

    target: TargetSpec | None = None
    image: str = Field(min_length=1)
    framework: FrameworkSpec
    num_nodes: int = Field(ge=1, description="Nodes per job group (Pinned) or of the one job (Unpinned).")
    config: ConfigSpec | None = None
    gpus_per_node: int | None = Field(default=None, ge=1)
    mlnx_per_node: int | None = Field(default=None, ge=0)
    nic_resource_name: NicResourceName | None = None
    image_pull_secrets: list[LocalObjectReference] | None = None
    env: list[EnvVar] | None = None
    volumes: list[Volume] | None = None
    volume_mounts: list[VolumeMount] | None = None
    enable_mnnvl: bool | None = Field(default=None, alias="enableMNNVL")
    checkpoint: CheckpointSpec | None = None
    resources: ResourceRequirements | None = None
    init_containers: list[Container] | None = None
    orchestration: WorkloadRunOrchestration | None = None
    thresholds: Thresholds | None = None
    goodput_measurement: GoodputMeasurementConfig | None = None
    bandwidth_measurement: BandwidthMeasurementConfig | None = None
    overrides: list[OverrideSpec] | None = None
    gang_scheduler: GangSchedulerSpec | None = None
    workload_metadata: WorkloadMetadata | None = None
    max_nodes: MaxNodes = None
    deadline: RunDeadline = None


class WorkloadRunStatus(NvcreModel):
    conditions: list[Condition] | None = None
    workflow_ref: WorkflowReference | None = None
    detected_platform: str | None = None
    detected_gpu_architecture: str | None = Field(default=None, alias="detectedGPUArchitecture")
    resolved_gpus_per_node: int | None = None
    succeeded_nodes_ref: TypedLocalObjectReference | None = None
    failed_nodes_ref: TypedLocalObjectReference | None = None
    failed_node_count: int | None = Field(default=None, description="Nodes its failed-nodes ConfigMap names.")
    provenance: Provenance | None = Field(
        default=None, description="Its Workflow's: the spec's digest and the images its pods really ran."
    )


class WorkloadRun(Resource):
    """Runs a distributed workload once across GPU nodes."""

    KIND = Kind.WORKLOAD_RUN
    SHORT_NAMES = ("nvwr",)
    COLUMNS = (
        *state_columns("WorkloadRun"),
        Column("Nodes", ".spec.numNodes", "Nodes per Job (Pinned) or of the one Job (Unpinned).", "integer"),
        Column(
            "Platform", ".status.detectedPlatform", "The platform the nodes run on (from their providerID)."
        ),
        Column("GPU", ".status.detectedGPUArchitecture", "The GPU architecture of the nodes."),
        Column(
            "Failed-Nodes", ".status.failedNodeCount", "Nodes its failed-nodes ConfigMap names.", "integer"
        ),
        Column("Workflow", ".status.workflowRef.name", "The Workflow it runs.", priority=1),
        AGE,
        MESSAGE,
    )

    spec: WorkloadRunSpec
    status: WorkloadRunStatus | None = None
