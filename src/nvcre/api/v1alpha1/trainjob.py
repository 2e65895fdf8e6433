"""The TrainJob spec a Job carries (``spec.workload.trainJob``), as far as nvcre writes it.

The shape is Kubeflow Trainer's (trainer.kubeflow.org/v1alpha1 ``TrainJobSpec``, checked against
the vendored upstream schema); it lives here because the Job kind embeds it. The TrainJob object
itself is modelled in ``nvcre.api.trainer``, which builds on this package and never the reverse.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.api.v1alpha1.schema import EnvVar, ResourceRequirements


class RuntimeRef(NvcreModel):
    name: str = Field(min_length=1)
    api_group: str | None = None
    kind: str | None = None


class Trainer(NvcreModel):
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    num_nodes: int | None = None
    num_proc_per_node: int | None = None
    resources_per_node: ResourceRequirements | None = None


class TrainJobSpec(NvcreModel):
    runtime_ref: RuntimeRef
    trainer: Trainer | None = None
    initializer: dict[str, Any] | None = None
    runtime_patches: list[dict[str, Any]] | None = Field(
        default=None, description="Patches of the runtime keyed by manager."
    )
    suspend: bool | None = None
    managed_by: str | None = None
    active_deadline_seconds: int | None = None
