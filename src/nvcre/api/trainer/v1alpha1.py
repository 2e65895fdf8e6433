"""TrainJob and TrainingRuntime, as far as nvcre writes them.

Pod templates, JobSet specs and runtime patches stay plain data: the render and override
engines treat them as Kubernetes objects to merge, and the API server checks them against
Trainer's own CRDs. The TrainJob spec is the one the Job kind embeds
(``nvcre.api.v1alpha1.trainjob``): this package builds on ``nvcre.api.v1alpha1``, never the reverse.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from nvcre.api.v1alpha1.constants import TRAINER_GROUP, TRAINER_VERSION
from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.trainjob import TrainJobSpec


class TrainerResource(Resource):
    GROUP: ClassVar[str] = TRAINER_GROUP
    VERSION: ClassVar[str] = TRAINER_VERSION


class TrainJob(TrainerResource):
    KIND = "TrainJob"
    PLURAL = "trainjobs"

    spec: TrainJobSpec
    status: dict[str, Any] | None = None


class TorchPolicy(NvcreModel):
    num_proc_per_node: int | str | None = None


class MPIPolicy(NvcreModel):
    mpi_implementation: str | None = Field(default=None, alias="mpiImplementation")
    num_proc_per_node: int | None = None
    ssh_auth_mount_path: str | None = None
    run_launcher_as_node: bool | None = None


class MLPolicy(NvcreModel):
    num_nodes: int | None = None
    torch: TorchPolicy | None = None
    mpi: MPIPolicy | None = None


class JobSetTemplate(NvcreModel):
    model_config = ConfigDict(extra="allow")

    metadata: dict[str, Any] | None = None
    spec: dict[str, Any] = Field(default_factory=dict, description="A JobSet spec.")


class TrainingRuntimeSpec(NvcreModel):
    ml_policy: MLPolicy | None = None
    pod_group_policy: dict[str, Any] | None = None
    template: JobSetTemplate


class TrainingRuntime(TrainerResource):
    KIND = "TrainingRuntime"
    PLURAL = "trainingruntimes"

    spec: TrainingRuntimeSpec
