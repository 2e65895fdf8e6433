"""GoodputMeasurement and BandwidthMeasurement: results read from a Job's logs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from nvcre.api.v1alpha1.common import SAMPLE_INTERVAL_DESCRIPTION, SampleInterval, TypedLocalObjectReference
from nvcre.api.v1alpha1.constants import Kind
from nvcre.api.v1alpha1.meta import Condition, NvcreModel
from nvcre.api.v1alpha1.printing import AGE, JOB, Column, measurement_columns
from nvcre.api.v1alpha1.resource import Resource


class MeasurementSpec(NvcreModel):
    """What every measurement kind's spec holds: its Job, the LogProfile that reads the Job's logs,
    and the sampling options copied from the Job's config."""

    job_ref: TypedLocalObjectReference | None = None
    log_profile_ref: str = Field(min_length=1)
    sample_interval: SampleInterval | None = Field(default=None, description=SAMPLE_INTERVAL_DESCRIPTION)
    allow_missing_data: bool | None = Field(default=None, description="Copied from the Job's config.")


class GoodputMeasurementSpec(MeasurementSpec):
    pass


class PendingInterruption(NvcreModel):
    """An interruption whose next run has not logged its first step yet (survives restarts)."""

    t_checkpoint: str | None = Field(default=None, description="Time of the last checkpoint before it.")
    t_interrupt: str | None = Field(default=None, description="When the workload stopped.")
    checkpoint_step: int | None = Field(default=None, description="Step of the last checkpoint before it.")
    last_step: int | None = Field(default=None, description="Last step logged before it.")
    t_ch: str | None = Field(default=None, description="Work lost since the last checkpoint, seconds.")
    reason: str | None = Field(default=None, description="JobFailed or WorkloadRestarted.")


class GoodputMeasurementStatus(NvcreModel):
    """Numeric results are strings with 6 decimals, as in the reference; steps are integers."""

    result: str | None = Field(
        default=None, description="Goodput 0..1: (t_w - t_ch - t_rm - t_re - t_save) / (t_w - t_re)."
    )
    current_step: int | None = Field(default=None, description="Latest training step logged.")
    highest_step: int | None = Field(default=None, description="Highest step ever logged (across restarts).")
    training_time_sec: str | None = Field(
        default=None, description="t_w: from the first step to the end, seconds."
    )
    lost_work_time_sec: str | None = Field(
        default=None, description="t_ch: work lost to interruptions, seconds."
    )
    reschedule_time_sec: str | None = Field(default=None, description="t_re: waiting for a new run, seconds.")
    resume_time_sec: str | None = Field(
        default=None, description="t_rm: start-up until the first step, seconds."
    )
    checkpoint_save_time_sec: str | None = Field(
        default=None, description="t_save: checkpoint saves, seconds."
    )
    interruption_count: int | None = Field(default=None, description="Failures and restarts counted.")
    last_checkpoint_step: int | None = Field(default=None, description="Step of the last checkpoint saved.")
    last_checkpoint_time: str | None = Field(default=None, description="When the last checkpoint was saved.")
    start_time: str | None = Field(
        default=None, description="When the measurement started (reset by a restart)."
    )
    completion_time: str | None = Field(default=None, description="The Job's terminal condition time.")
    training_start_time: str | None = Field(
        default=None,
        description="Log time of the first training step: the origin of t_w (beyond the reference).",
    )
    last_step_timestamp: str | None = Field(
        default=None, description="Log time of the last non-warm-up step (stall detection)."
    )
    avg_step_time_sec: str | None = Field(
        default=None, description="Mean seconds per step, warm-up excluded."
    )
    log_interval: int | None = Field(
        default=None, description="The profile's logInterval (scales the stall threshold)."
    )
    warmup_base_step: int | None = Field(default=None, description="First step of the current run.")
    warmup_time_sec: str | None = Field(default=None, description="Seconds of warm-up steps.")
    non_warmup_time_sec: str | None = Field(default=None, description="Seconds of steady steps.")
    last_non_warmup_step: int | None = Field(
        default=None, description="Watermark of the accumulated step time."
    )
    prior_warmup_time_sec: str | None = Field(default=None, description="warmupTimeSec of the earlier runs.")
    prior_non_warmup_time_sec: str | None = Field(
        default=None, description="nonWarmupTimeSec of the earlier runs."
    )
    avg_tflops_per_gpu: str | None = Field(
        default=None, alias="avgTFLOPSPerGPU", description="Mean TFLOP/s per GPU, warm-up included."
    )
    application_start_time: str | None = Field(default=None, description="The run's start line.")
    application_stop_time: str | None = Field(default=None, description="Last read that saw log lines.")
    pending_interruption: PendingInterruption | None = None
    conditions: list[Condition] | None = None


class GoodputMeasurement(Resource):
    """Goodput of a training Job, computed from its logs."""

    KIND = Kind.GOODPUT_MEASUREMENT
    SHORT_NAMES = ("nvgp",)
    COLUMNS = (
        *measurement_columns(),
        Column("Goodput", ".status.result", "Goodput, 0..1: productive training time over wall time."),
        Column("Step", ".status.currentStep", "The latest training step logged.", "integer"),
        Column("Step-Time-S", ".status.avgStepTimeSec", "Mean seconds per steady (non-warm-up) step."),
        Column("Interruptions", ".status.interruptionCount", "Failures and restarts counted.", "integer"),
        Column(
            "TFLOPS/GPU", ".status.avgTFLOPSPerGPU", "Mean TFLOP/s per GPU, warm-up included.", priority=1
        ),
        JOB,
        AGE,
    )

    spec: GoodputMeasurementSpec
    status: GoodputMeasurementStatus | None = None


class BandwidthMeasurementSpec(MeasurementSpec):
    test_type: str | None = None
    expected_transport: str | None = None


class BandwidthResult(NvcreModel):
    size_bytes: int
    alg_bw: str = Field(
        alias="algBW",
        description="Out-of-place algorithm bandwidth, GB/s, averaged over the samples (a table "
        "printing only its in-place half gives that half here).",
    )
    bus_bw: str = Field(alias="busBW", description="Out-of-place bus bandwidth, GB/s, likewise.")
    samples: int
    in_place_alg_bw: str | None = Field(
        default=None,
        alias="inPlaceAlgBW",
        description="In-place algorithm bandwidth, GB/s, averaged; absent when the table has no in-place half.",
    )
    in_place_bus_bw: str | None = Field(
        default=None, alias="inPlaceBusBW", description="In-place bus bandwidth, GB/s, likewise."
    )
    wrong: int | None = Field(
        default=None,
        ge=0,
        description="This size's #wrong total over both halves and every sample; absent when no "
        "#wrong cell was a number (N/A, or a table with the old error column).",
    )
    max_error: str | None = Field(
        default=None,
        description="The largest value of the old float error/res column at this size, as printed "
        "(a deviation, not a count: the Out of bounds footer carries the verdict).",
    )


class OutOfBounds(NvcreModel):
    count: int = Field(ge=0, description="Values out of bounds, as the footer says (summed over tables).")
    status: Literal["OK", "FAILED"] = Field(description="FAILED when any table's footer says so.")


class FailureLines(NvcreModel):
    count: int = Field(ge=0, description="NCCL, CUDA and launcher failure lines in the log.")
    lines: list[str] = Field(description="The first 5, each cut to 300 characters.")


class TableLayout(NvcreModel):
    """The header of the table being read, kept between provisional samples."""

    columns: str = Field(description="The column names of its header line.")
    halves: str = Field(description="Which half comes first: out-of-place and/or in-place.")


class RowProgress(NvcreModel):
    """How far the run has got: its newest table row and the pace of its rows (stall detection)."""

    rows: int | None = Field(default=None, ge=0, description="Table rows read so far.")
    last_row_time: str | None = Field(default=None, description="Kubelet time of the newest row.")
    last_row_bytes: int | None = Field(default=None, ge=0, description="The newest row's message size.")
    expected_row_sec: str | None = Field(
        default=None,
        description="How long its next row should take: the time between the newest two rows, scaled by "
        "the growth of their size.",
    )
    read_time: str | None = Field(default=None, description="When the log was last read successfully.")
    sweeps: int | None = Field(
        default=None,
        ge=0,
        description="Complete sweeps so far (a row no larger than the one before starts one).",
    )
    sweep_peaks_gbps: list[str] | None = Field(
        default=None,
        alias="sweepPeaksGBps",
        description="The peak out-of-place bus bandwidth (GB/s) of each of the last two complete sweeps.",
    )
    sweep_peak_gbps: str | None = Field(
        default=None, alias="sweepPeakGBps", description="The peak bus bandwidth of the sweep in progress."
    )


class BandwidthMeasurementStatus(NvcreModel):
    results: list[BandwidthResult] | None = Field(
        default=None,
        description="Per message size, the average of the out-of-place algbw/busbw rows (and of the "
        "in-place half), in order of first appearance, at most 4096 sizes. Provisional while Measuring; "
        "final (the launcher's complete log, read once) when Complete with reason JobSucceeded.",
    )
    start_time: str | None = None
    completion_time: str | None = None
    transport: list[str] | None = Field(
        default=None,
        description="The network NCCL used (its `Using network ...` lines), sorted and deduplicated.",
    )
    wrong_values: int | None = Field(
        default=None,
        ge=0,
        description="The total of nccl-tests' #wrong columns (out-of-place and in-place; N/A counts 0). "
        "Above 0, nccl-tests found corrupted results.",
    )
    last_sample_time: str | None = Field(
        default=None,
        description="Kubelet time of the last log line merged into the provisional results (the next "
        "sample reads the lines after it).",
    )
    test: str | None = Field(
        default=None,
        description="The nccl-tests binary the log names (Collective test starting line or command line).",
    )
    ranks: int | None = Field(
        default=None,
        ge=0,
        description="Ranks the log states: highest rank of its device list + 1, NCCL's nranks, or the "
        "launcher's process count x threads x GPUs.",
    )
    hosts: list[str] | None = Field(default=None, description="Host names of the device list, sorted.")
    avg_bus_bandwidth_gbps: str | None = Field(
        default=None,
        alias="avgBusBandwidthGBps",
        description="nccl-tests' own '# Avg bus bandwidth' footer, as printed (its mean over sizes).",
    )
    out_of_bounds: OutOfBounds | None = Field(
        default=None, description="The '# Out of bounds values' footer."
    )
    complete: bool | None = Field(
        default=None,
        description="Every table reached its footer and the last size of its sweep (the maxBytes of "
        "its nThread line, or the reduced one); without a sweep line, the footer alone.",
    )
    incomplete_reason: str | None = Field(default=None, description="Why complete is false.")
    failure_lines: FailureLines | None = Field(
        default=None, description="NCCL/CUDA failure lines (Test NCCL failure, Cuda failure, ...)."
    )
    sizes_dropped: int | None = Field(
        default=None,
        ge=0,
        description="Rows whose message size was not kept: at most 4096 distinct sizes are kept per "
        "measurement, the rows of any further size are only counted.",
    )
    rows_without_header: int | None = Field(
        default=None,
        ge=0,
        description="Lines shaped like table rows seen where no column header was in force: never "
        "read, since nothing names their columns.",
    )
    lines_read: int | None = Field(default=None, ge=0, description="Lines the final read went through.")
    log_tail: list[Annotated[str, Field(max_length=300)]] | None = Field(
        default=None,
        max_length=5,
        description="The log's last non-blank lines (kubelet time stripped), quoted when it gave no final data.",
    )
    table_layout: TableLayout | None = Field(
        default=None,
        description="While Measuring: the header of the table being read, so the next sample reads "
        "its rows (the header was in an earlier sample). Removed by the terminal write.",
    )
    progress: RowProgress | None = Field(
        default=None,
        description="Written by each sample that read the log: the newest row and the pace of rows; a "
        "run silent for 10 times its expected row time (at least 120s; 600s before the first row) "
        "fails WorkloadStalled.",
    )
    conditions: list[Condition] | None = None


class BandwidthMeasurement(Resource):
    """NCCL bus and algorithm bandwidth per message size, parsed from a Job's logs."""

    KIND = Kind.BANDWIDTH_MEASUREMENT
    SHORT_NAMES = ("nvbw",)
    COLUMNS = (
        *measurement_columns(),
        Column("Test", ".status.test", "The nccl-tests binary its log names (all_reduce_perf, ...)."),
        Column("Ranks", ".status.ranks", "Ranks of the run.", "integer"),
        Column(
            "BusBW-GB/s", ".status.avgBusBandwidthGBps", "nccl-tests' '# Avg bus bandwidth' footer, GB/s."
        ),
        Column(
            "Log-Complete", ".status.complete", "Every table reached its footer and last size.", "boolean", 1
        ),
        Column("Incomplete-Reason", ".status.incompleteReason", "Why the log is not complete.", priority=1),
        JOB,
        AGE,
    )

    spec: BandwidthMeasurementSpec
    status: BandwidthMeasurementStatus | None = None
