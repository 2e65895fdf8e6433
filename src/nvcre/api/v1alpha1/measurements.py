"""GoodputMeasurement and BandwidthMeasurement: results read from a Job's logs."""

from __future__ import annotations

from pydantic import Field

from nvcre.api.v1alpha1.common import TypedLocalObjectReference
from nvcre.api.v1alpha1.meta import Condition, NvcreModel
from nvcre.api.v1alpha1.resource import Resource


class GoodputMeasurementSpec(NvcreModel):
    job_ref: TypedLocalObjectReference | None = None
    log_profile_ref: str = Field(min_length=1)
    sample_interval: str | None = None


class PendingInterruption(NvcreModel):
    t_checkpoint: str | None = None
    t_interrupt: str | None = None
    checkpoint_step: str | None = None
    last_step: str | None = None
    t_ch: str | None = None
    reason: str | None = None


class GoodputMeasurementStatus(NvcreModel):
    """Numeric results are strings, as in the reference."""

    result: str | None = None
    current_step: str | None = None
    highest_step: str | None = None
    training_time_sec: str | None = None
    lost_work_time_sec: str | None = None
    reschedule_time_sec: str | None = None
    resume_time_sec: str | None = None
    checkpoint_save_time_sec: str | None = None
    interruption_count: str | None = None
    last_checkpoint_step: str | None = None
    last_checkpoint_time: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    last_step_timestamp: str | None = None
    avg_step_time_sec: str | None = None
    log_interval: str | None = None
    warmup_base_step: str | None = None
    warmup_time_sec: str | None = None
    non_warmup_time_sec: str | None = None
    last_non_warmup_step: str | None = None
    prior_warmup_time_sec: str | None = None
    prior_non_warmup_time_sec: str | None = None
    avg_tflops_per_gpu: str | None = Field(default=None, alias="avgTFLOPSPerGPU")
    application_start_time: str | None = None
    application_stop_time: str | None = None
    pending_interruption: PendingInterruption | None = None
    conditions: list[Condition] | None = None


class GoodputMeasurement(Resource):
    """Goodput of a training Job, computed from its logs."""

    KIND = "GoodputMeasurement"
    PLURAL = "goodputmeasurements"

    spec: GoodputMeasurementSpec
    status: GoodputMeasurementStatus | None = None


class BandwidthMeasurementSpec(NvcreModel):
    job_ref: TypedLocalObjectReference | None = None
    log_profile_ref: str = Field(min_length=1)
    sample_interval: str | None = None
    test_type: str | None = None
    expected_transport: str | None = None


class BandwidthResult(NvcreModel):
    size_bytes: int
    alg_bw: str = Field(alias="algBW")
    bus_bw: str = Field(alias="busBW")
    samples: int


class BandwidthMeasurementStatus(NvcreModel):
    results: list[BandwidthResult] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    conditions: list[Condition] | None = None


class BandwidthMeasurement(Resource):
    """NCCL bus and algorithm bandwidth per message size, parsed from a Job's logs."""

    KIND = "BandwidthMeasurement"
    PLURAL = "bandwidthmeasurements"

    spec: BandwidthMeasurementSpec
    status: BandwidthMeasurementStatus | None = None
