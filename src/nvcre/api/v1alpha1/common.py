"""Types shared by several kinds: targets, gang scheduling, workload labels, overrides, refs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from nvcre.api.v1alpha1.constants import THRESHOLD_KEYS
from nvcre.api.v1alpha1.limits import (
    EXPRESSION_MAX_LENGTH,
    EXPRESSION_MAX_MACROS,
    GO_DURATION_PATTERN,
    MACRO_CALL,
    MACROS_MESSAGE,
    MIN_SAMPLE_INTERVAL,
    SAMPLE_INTERVAL_MESSAGE,
    THRESHOLD_EXPRESSION_MAX_LENGTH,
)
from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.api.v1alpha1.schema import Json, JsonObject, NodeSelectorRequirement, cel

IntOrString = Annotated[int | str, WithJsonSchema({"x-kubernetes-int-or-string": True})]

LABEL_VALUE_PATTERN = r"^$|^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
QUEUE_PATTERN = r"^$|^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$"
QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
)
LABEL_KEY_CEL_PATTERN = (
    "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    "[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
)
NIC_RESOURCE_PATTERN = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"[a-zA-Z0-9]([-A-Za-z0-9_.]{0,61}[a-zA-Z0-9])?$"
)
QUANTITY_SIZE_PATTERN = r"^([0-9]+(\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei)?$"
SHORT_DURATION_PATTERN = r"^([0-9]+(h|m|s|ms))+$"

NIC_RESOURCE_CEL = cel(
    (
        "!self.contains('kubernetes.io/') && !self.startsWith('k8s.io/') && !self.contains('.k8s.io/')",
        "nicResourceName must not use the reserved kubernetes.io or k8s.io domains",
    )
)

NicResourceName = Annotated[
    str, Field(max_length=253, pattern=NIC_RESOURCE_PATTERN, json_schema_extra=NIC_RESOURCE_CEL)
]

WorkloadLabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]

MACRO_COUNT_RULE = (
    f"self.findAll('{MACRO_CALL}').size() <= {EXPRESSION_MAX_MACROS}",
    f"expression {MACROS_MESSAGE}",
)
"""The structure of a CEL expression the API server can measure: its macro calls, counted in its
text (nesting and cost are measured by nvcre: ``nvcrectl validate``, and when it compiles)."""


def expression_schema(max_length: int, *, count_macros: bool = True) -> dict[str, object]:
    """A CEL expression string: 1 to ``max_length`` characters and, with ``count_macros``, at
    most 8 macro calls (a rule the API server cannot afford on a list without ``maxItems``)."""
    schema: dict[str, object] = {"type": "string", "minLength": 1, "maxLength": max_length}
    return schema | cel(MACRO_COUNT_RULE) if count_macros else schema


VALID_THRESHOLD_KEYS = f"valid keys: [{', '.join(THRESHOLD_KEYS)}]"
"""Both the API server's message for an unknown threshold key and nvcre's (which names the key:
the API server cannot afford to, the keys of a map having no length bound) end with this."""
_KEY_LIST = ", ".join(f"'{key}'" for key in THRESHOLD_KEYS)
Thresholds = Annotated[
    dict[str, str],
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": len(THRESHOLD_KEYS),
            "additionalProperties": expression_schema(THRESHOLD_EXPRESSION_MAX_LENGTH),
            **cel((f"self.all(k, k in [{_KEY_LIST}])", f"unknown threshold key(s); {VALID_THRESHOLD_KEYS}")),
        }
    ),
]
"""Threshold key (one of :data:`THRESHOLD_KEYS`) to a CEL expression over the double ``value``."""

RegressionFraction = Annotated[
    float | None,
    Field(
        ge=0,
        le=1,
        description=(
            "Fail a node whose group measures more than this fraction worse than the node's own "
            "baseline: the median of its latest baselineResults passing results of the same "
            "category and shape, from its NodeRecord (docs/fleet-memory.md). 0.1 when unset; 0 "
            "turns it off."
        ),
    ),
]
BaselineResults = Annotated[
    int | None,
    Field(
        ge=1,
        le=20,
        description=(
            "How many of a node's latest passing results make its baseline; a node with fewer is "
            "not judged against its past. 5 when unset."
        ),
    ),
]

SampleInterval = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": 64,
            "pattern": GO_DURATION_PATTERN,
            **cel(
                (
                    f"!self.matches('{GO_DURATION_PATTERN}') || duration(self) >= duration('{MIN_SAMPLE_INTERVAL}')",
                    SAMPLE_INTERVAL_MESSAGE,
                )
            ),
        }
    ),
]
"""How often a running Job's logs are sampled: a Go duration of at least 5s."""
SAMPLE_INTERVAL_DESCRIPTION = f"Duration, at least {MIN_SAMPLE_INTERVAL}; 60s when unset."

MaxNodes = Annotated[
    int | None,
    Field(
        ge=0,
        description=(
            "The most nodes the run may take: a target that resolves to more is refused before any "
            "Workflow exists (Failed, TooManyNodes). 0: no limit. When unset, the manager's "
            "--max-nodes-per-run applies."
        ),
    ),
]
DEADLINE_MESSAGE = "deadline must be longer than 0s"
RunDeadline = Annotated[
    str | None,
    Field(
        pattern=SHORT_DURATION_PATTERN,
        max_length=64,
        description=(
            "The whole run's deadline, a duration counted from its creation (90m, 2h). When it "
            "passes nothing more starts, what runs is deleted and the run ends Failed, "
            "DeadlineExceeded; what was judged before keeps its result."
        ),
        json_schema_extra=cel(("duration(self) > duration('0s')", DEADLINE_MESSAGE)),
    ),
]


class LocalObjectReference(NvcreModel):
    name: str | None = None


class TypedLocalObjectReference(NvcreModel):
    api_group: str | None = None
    kind: str
    name: str


class WorkflowReference(NvcreModel):
    name: str
    namespace: str | None = None


class WorkloadReference(NvcreModel):
    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = Field(
        default=None,
        description="The UID of the object referred to, telling it from a later one of that name.",
    )


class TaintSelector(NvcreModel):
    """A taint every target node must carry; a matching toleration is injected."""

    key: str = Field(min_length=1)
    value: str | None = None
    effect: str | None = None


class TargetSpec(NvcreModel):
    """Which nodes are eligible (a set predicate, never a count)."""

    node_selector: dict[str, str] | None = None
    match_expressions: list[NodeSelectorRequirement] | None = None
    node_names: list[str] | None = Field(
        default=None, description="Explicit node names; when set, nodeSelector is ignored."
    )
    taint_selectors: list[TaintSelector] | None = None


class GangSchedulerSpec(NvcreModel):
    """Opts workload pods into a gang-aware scheduler such as KAI or Run:ai."""

    scheduler_name: str = Field(min_length=1, description="Scheduler injected into every workload pod.")
    queue: str | None = Field(
        default=None,
        max_length=63,
        pattern=QUEUE_PATTERN,
        description="Scheduler queue; the controller uses default-queue when unset.",
    )
    queue_label_key: str | None = Field(
        default=None,
        max_length=317,
        pattern="^$|" + QUALIFIED_NAME_PATTERN,
        description="Label key the queue is written under; kai.scheduler/queue when unset or empty.",
        json_schema_extra=cel(
            (
                "self.contains('/') ? self.split('/')[0].size() <= 253 : true",
                "queueLabelKey prefix must be at most 253 characters",
            ),
            (
                "self != 'app.kubernetes.io/managed-by' && !self.startsWith('nvcre.nvidia.com/')",
                "queueLabelKey must not use the controller-owned key app.kubernetes.io/managed-by "
                "or any key under the nvcre.nvidia.com/ prefix",
            ),
        ),
    )


class WorkloadMetadata(NvcreModel):
    """Labels for the workload object (the TrainJob), never for its pods."""

    labels: dict[str, WorkloadLabelValue] | None = Field(
        default=None,
        max_length=32,
        description="Labels on the submitted workload object; at most 32.",
        json_schema_extra=cel(
            (
                "self.all(k, k != 'app.kubernetes.io/managed-by' && !k.startsWith('nvcre.nvidia.com/'))",
                "labels must not set the controller-owned keys app.kubernetes.io/managed-by "
                "or any key under the nvcre.nvidia.com/ prefix",
            ),
            (
                f"self.all(k, k.matches('{LABEL_KEY_CEL_PATTERN}'))",
                "each label key must be a valid Kubernetes label key: an optional DNS-subdomain prefix "
                "followed by '/', then a name of at most 63 characters beginning and ending with an "
                "alphanumeric character",
            ),
            (
                "self.all(k, k.contains('/') ? k.split('/')[0].size() <= 253 : true)",
                "each label key prefix must be at most 253 characters",
            ),
        ),
    )


Toggle = Literal["On", "Off"]
"""A feature that is on unless turned ``Off`` (isolation, the early verdict)."""
EARLY_VERDICT = (
    "On (the default): a running group whose last two complete sweeps each peaked more than 10% "
    "short of its busBandwidthGBps threshold (or expected floor) fails at once, its workload "
    "stopped, instead of running its last sweep (docs/measurements.md#early-verdict). Off: every "
    "group runs to its end."
)

ALLOW_MISSING_DATA = (
    "When true, a measurement that ends without final data (log unreadable, nothing recognised, "
    "an incomplete table) is informational: it does not fail the Job (MeasurementUnavailable) "
    "unless a threshold needs its value. Default false: no data is not a pass."
)


class GoodputMeasurementConfig(NvcreModel):
    log_profile_ref: str = Field(min_length=1)
    sample_interval: SampleInterval | None = Field(default=None, description=SAMPLE_INTERVAL_DESCRIPTION)
    allow_missing_data: bool | None = Field(default=None, description=ALLOW_MISSING_DATA)


class BandwidthMeasurementConfig(NvcreModel):
    log_profile_ref: str = Field(min_length=1)
    sample_interval: SampleInterval | None = Field(default=None, description=SAMPLE_INTERVAL_DESCRIPTION)
    test_type: str | None = Field(default=None, description="NCCL test name, e.g. all_reduce.")
    expected_transport: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "The network NCCL must use, as its `Using network` line names it (e.g. `IB`, "
            "`AWS Libfabric`); any other (or none) fails validation with reason UnexpectedTransport."
        ),
    )
    allow_missing_data: bool | None = Field(default=None, description=ALLOW_MISSING_DATA)
    early_verdict: Toggle | None = Field(default=None, description=EARLY_VERDICT)


class StringMatchSpec(NvcreModel):
    equals: str | None = None
    in_: list[str] | None = Field(default=None, alias="in")
    not_in: list[str] | None = None


class IntMatchSpec(NvcreModel):
    equals: int | None = None
    greater_than: int | None = None
    less_than: int | None = None


class TopologyMatchSpec(NvcreModel):
    mode: str | None = None
    domain_count: IntMatchSpec | None = None


class WhenSpec(NvcreModel):
    """Conditions under which an override applies; empty matches always."""

    gpu_architecture: StringMatchSpec | None = None
    platform: StringMatchSpec | None = None
    workload_kind: str | None = None
    topology: TopologyMatchSpec | None = None
    config: Json = None
    expression: (
        Annotated[str, WithJsonSchema(expression_schema(EXPRESSION_MAX_LENGTH, count_macros=False))] | None
    ) = Field(
        default=None,
        description="CEL over gpuArchitecture, platform, workloadKind, topology and config.",
    )


class TopologySpec(NvcreModel):
    topology_key: str = Field(min_length=1)
    strict_domain: bool | None = None


ISOLATION = (
    "After an iteration with failed groups, re-test each member of a failed group (not named by a "
    "hardware report) once with healthy partners from the passing groups, and fail only the members "
    "that fail again (docs/controllers.md#isolation). On when unset; never in diagnose mode."
)


class DiagnoseSpec(NvcreModel):
    min_group_size: int = Field(default=2, ge=1)
    topology_key: str | None = None
    max_rounds: int | None = Field(
        default=None,
        ge=1,
        description="No round starts after this many; the diagnosis then ends Failed with its suspects.",
    )
    deadline: str | None = Field(
        default=None,
        pattern=SHORT_DURATION_PATTERN,
        description=(
            "The whole diagnosis, from its first round; once passed, running rounds are stopped "
            "and it ends Failed with its suspects."
        ),
    )


class ExecutionSpec(NvcreModel):
    max_concurrent: int = Field(default=0, ge=0, description="Groups running at once; 0 is unlimited.")
    timeout_per_job: str | None = Field(default=None, description="Duration measured from workload start.")
    retry_failed_groups: int = Field(default=0, ge=0)


Placement = Literal["Pinned", "Unpinned"]


class OrchestrationOverrideSpec(NvcreModel):
    target: TargetSpec | None = None
    topology: TopologySpec | None = None
    execution: ExecutionSpec | None = None
    iterations: int | None = Field(default=None, ge=1)
    placement: Placement | None = None


class OverrideSpec(NvcreModel):
    """A conditional patch of a Workflow's job template, dependencies or orchestration."""

    when: WhenSpec
    job_template: JsonObject | None = Field(default=None, description="Strategic merge patch.")
    job_template_patch: Json = Field(
        default=None, description="RFC 6902 JSON patch, applied after the merge."
    )
    dependencies: list[JsonObject] | None = Field(
        default=None, description="Objects merged into dependencies by apiVersion, kind and name."
    )
    orchestration: OrchestrationOverrideSpec | None = None
