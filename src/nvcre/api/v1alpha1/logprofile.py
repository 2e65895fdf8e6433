"""LogProfile (cluster-scoped): how to read events out of a workload's logs."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from nvcre.api.v1alpha1.constants import Kind
from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.api.v1alpha1.printing import AGE, Column
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.schema import cel


class TimestampSpec(NvcreModel):
    layout: str = Field(min_length=1, description="Go time layout of the log timestamp.")


MAX_PATTERN_LENGTH = 4096
"""The longest ``regex`` (the built-in patterns are under 500 characters)."""
RE2_RULE = (
    # matches() compiles its argument with Go's RE2: a pattern it cannot compile is an evaluation
    # error, which the API server reports with RE2's reason (and `x || !x` cannot hide it).
    "''.matches(self) || !''.matches(self)",
    "must be an RE2 regular expression (Go syntax)",
)


class EventPattern(NvcreModel):
    regex: str = Field(
        min_length=1,
        max_length=MAX_PATTERN_LENGTH,
        description="RE2 regular expression (Go syntax) with named groups (?P<name>...) or (?<name>...).",
        json_schema_extra=cel(RE2_RULE),
    )
    example: str | None = None
    units: dict[str, Literal["s", "ms", "us"]] | None = None


class LogPatterns(NvcreModel):
    training_step: EventPattern | None = None
    checkpoint_save: EventPattern | None = None
    checkpoint_done: EventPattern | None = None
    checkpoint_restore: EventPattern | None = None
    checkpoint_loaded: EventPattern | None = None
    checkpoint_time: EventPattern | None = Field(
        default=None,
        description="A line stating how long a checkpoint save (`saveDuration`) or load (`loadDuration`) "
        "took, e.g. Megatron's `save-checkpoint ...: (min, max)` timer; it times a save whose lines "
        "show no time.",
    )
    application_start: EventPattern | None = None
    wall_clock: EventPattern | None = Field(
        default=None,
        description="A line whose only use is the wall-clock `timestamp` it shows (Megatron's "
        "`[after training is done] datetime: ...`): the end of a log read without kubelet timestamps.",
    )
    warmup_step: EventPattern | None = None
    bandwidth_result: EventPattern | None = None
    network_transport: EventPattern | None = Field(
        default=None, description="NCCL's `Using network ...` line; must capture `transport`."
    )


class WorkerStrategy(NvcreModel):
    type: Literal["Single", "Multi"]
    lifecycle_pod: Literal["first", "last"] = "first"
    training_step_pod: Literal["first", "last"] = "first"
    replicated_job_name: str = "trainer"


class LogProfileSpec(NvcreModel):
    reader: Literal["Patterns", "NcclTests"] | None = Field(
        default=None,
        description="How bandwidth rows are read: Patterns (default) with patterns.bandwidthResult, "
        "or NcclTests, nvcre's nccl-tests table reader (headers, both halves, footers, ranks, "
        "completeness; bandwidthResult is not used).",
    )
    timestamp: TimestampSpec
    patterns: LogPatterns
    worker_strategy: WorkerStrategy | None = None
    container_name: str | None = None
    warmup_steps: int | None = None
    log_interval: int | None = None


class LogProfile(Resource):
    """Regular expressions that turn log lines into training and bandwidth events."""

    KIND = Kind.LOG_PROFILE
    SHORT_NAMES = ("nvlp",)
    COLUMNS = (
        Column(
            "Reader",
            ".spec.reader",
            "NcclTests: nccl-tests' tables (bandwidth); Patterns (when empty): its regexes (goodput, "
            "or bandwidth rows by bandwidthResult).",
        ),
        Column(
            "Workers", ".spec.workerStrategy.type", "Single: one pod's log is read; Multi: each worker's."
        ),
        Column(
            "Replicated-Job",
            ".spec.workerStrategy.replicatedJobName",
            "The TrainJob's replicated job whose pods are read.",
        ),
        Column("Container", ".spec.containerName", "The container whose log is read.", priority=1),
        AGE,
    )
    NAMESPACED: ClassVar[bool] = False
    HAS_STATUS: ClassVar[bool] = False

    spec: LogProfileSpec
