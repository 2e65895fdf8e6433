"""WorkloadRun -> Workflow (with its TrainingRuntime, ConfigMap and PVC dependencies).

``build_workflow`` is the one entry point; the controller and ``nvcrectl workloadrun render``
call it unchanged. Modules: ``detection`` (platform, architecture, GPU/NIC counts for the run),
``frameworks`` (trainer command and runtime shapes), ``jobtemplate`` (TrainJob, labels,
checkpoint, measurements), ``env`` (NCCL defaults, merge, ``mpirun -x`` forwarding), ``volumes``
(placement and reserved names), ``resources`` (GPU requests), ``placement`` (placement, test
scale, orchestration), ``scheduling`` (gang intent on the runtime), ``platform_overrides`` (the
override table, data in ``platform_overrides.yaml`` and ``nccl_env.yaml``).
"""

from nvcre.render.workloadrun.build import Detection, WorkloadRunRender, build_workflow
from nvcre.render.workloadrun.errors import BuildError

__all__ = ["BuildError", "Detection", "WorkloadRunRender", "build_workflow"]
