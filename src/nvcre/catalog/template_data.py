"""What catalog templates can read.

Every field's zero value (0, "", False, empty) is what the load-time validation render uses, so
each template must render with it. The values a real build uses are resolved by
:mod:`nvcre.catalog.options`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TemplateData:
    # spec-level only
    image_pull_secrets: list[dict[str, str]] = field(default_factory=list)
    storage_class_name: str = ""
    # sizes
    nodes_per_job: int = 0
    gpus_per_node: int = 0
    mlnx_per_node: int = 0
    nic_resource_name: str = ""
    rdma_device_access: str = ""
    """``hostPath`` (device nodes from the host) or ``devicePlugin``/empty (the default)."""
    gke_tcpxo_networks: list[str] = field(default_factory=list)
    """GCP H100: the GKE networks of the pod's eth1..eth8 (detected, else the defaults)."""
    tcpxo_cuda_major: int = 0
    """GCP H100: the CUDA major of the node's TCPXO plugin (0: not detected, read as 12)."""
    enable_mnnvl: bool = False
    gang_scheduler: bool = False
    """A gang scheduler admits the workload; runtimes start every pod at once."""
    # training
    enable_checkpoint: bool = False
    max_steps: int = 0
    exit_duration_mins: int = 0
    startup_stall_timeout_seconds: int = 0
    save_interval: int = 0
    save_retain_interval: int = 0
    save_top_k: int = 0
    storage_size: str = ""
    tp: int = 0
    pp: int = 0
    ep: int = 0
    training_cpu_limit: str = ""
    training_memory_limit: str = ""
    training_cpu_request: str = ""
    training_memory_request: str = ""
    source_repo: str = ""
    # architecture
    gpu_architecture: str = ""
    config_arch: str = ""
    # entry
    entry_name: str = ""
    # orchestration and NCCL test parameters
    test_scale: str = ""
    max_bytes: str = ""
    num_iterations: int = 0
    num_cycles: int = 0
    max_concurrent: int = 0
    min_group_size: int = 0
    timeout_per_job: str = ""
    timeout_seconds: int = 0
    """``timeout_per_job`` in seconds: the in-container ``timeout`` guard of mpirun."""
    measurement_timeout: str = ""
    thresholds: dict[str, str] = field(default_factory=dict)
    expected_floor_fraction: float = 0.0
    """Judge keys no threshold names against this fraction of the expected-performance table."""
    regression_fraction: float | None = None
    """``regressionFraction`` of the Workflow (None: not rendered, the Workflow's default holds)."""
    baseline_results: int | None = None
    """``baselineResults`` of the Workflow (None: not rendered)."""
    allow_missing_data: bool = False
    isolation: str = "On"
    """``Off`` renders ``orchestration.isolation: Off`` (On is the Workflow's default)."""
    early_verdict: str = "On"
    """``Off`` renders ``bandwidthMeasurement.earlyVerdict: Off`` (On is the Job's default)."""

    def context(self, *, entry_dir: str) -> dict[str, Any]:
        """Template variables: every field, ``entry_dir`` (for ``include_file``) and ``mnnvl``

        (``"1"``/``"0"``, the value of ``NCCL_MNNVL_ENABLE``)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["thresholds"] = dict(sorted(self.thresholds.items()))
        data["entry_dir"] = entry_dir
        data["mnnvl"] = "1" if self.enable_mnnvl else "0"
        return data
