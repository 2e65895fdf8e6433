"""Every fixed string of the nvcre.nvidia.com/v1alpha1 API in one place.

Groups are plain classes of ``Final`` string constants (not enums), so values drop into
pydantic ``str`` fields, label maps and JSON unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final


def members(vocabulary: type) -> tuple[str, ...]:
    """The values a class of constants declares, in its order: a registry that cannot miss one."""
    return tuple(value for name, value in vars(vocabulary).items() if name.isupper())


# --- API group ---------------------------------------------------------------------------------

GROUP: Final = "nvcre.nvidia.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
CATEGORY: Final = "nvcre"
"""The CRDs' category: ``kubectl get nvcre`` lists the objects of every kind of the group."""

MANAGED_BY_VALUE: Final = "nvcre"
"""Value of the ``app.kubernetes.io/managed-by`` label on everything the controller creates."""


class Kind:
    CERTIFICATION: Final = "Certification"
    WORKLOAD_RUN: Final = "WorkloadRun"
    WORKFLOW: Final = "Workflow"
    JOB: Final = "Job"
    GOODPUT_MEASUREMENT: Final = "GoodputMeasurement"
    BANDWIDTH_MEASUREMENT: Final = "BandwidthMeasurement"
    C2C_MEASUREMENT: Final = "C2CMeasurement"
    LOG_PROFILE: Final = "LogProfile"
    NODE_RECORD: Final = "NodeRecord"
    REPORT_EXPORT_POLICY: Final = "ReportExportPolicy"
    REPORT_EXPORT: Final = "ReportExport"


PLURALS: Final[Mapping[str, str]] = MappingProxyType(
    {
        Kind.CERTIFICATION: "certifications",
        Kind.WORKLOAD_RUN: "workloadruns",
        Kind.WORKFLOW: "workflows",
        Kind.JOB: "jobs",
        Kind.GOODPUT_MEASUREMENT: "goodputmeasurements",
        Kind.BANDWIDTH_MEASUREMENT: "bandwidthmeasurements",
        Kind.C2C_MEASUREMENT: "c2cmeasurements",
        Kind.LOG_PROFILE: "logprofiles",
        Kind.NODE_RECORD: "noderecords",
        Kind.REPORT_EXPORT_POLICY: "reportexportpolicies",
        Kind.REPORT_EXPORT: "reportexports",
    }
)

CLUSTER_SCOPED_KINDS: Final = frozenset({Kind.LOG_PROFILE, Kind.NODE_RECORD})
KINDS_WITHOUT_STATUS: Final = frozenset({Kind.LOG_PROFILE, Kind.REPORT_EXPORT_POLICY})

# --- Kubeflow Trainer --------------------------------------------------------------------------

TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINER_VERSION: Final = "v1alpha1"
TRAINER_API_VERSION: Final = f"{TRAINER_GROUP}/{TRAINER_VERSION}"


class TrainerKind:
    TRAIN_JOB: Final = "TrainJob"
    TRAINING_RUNTIME: Final = "TrainingRuntime"
    CLUSTER_TRAINING_RUNTIME: Final = "ClusterTrainingRuntime"


class TrainJobCondition:
    """Condition types read from a TrainJob's status."""

    COMPLETE: Final = "Complete"
    FAILED: Final = "Failed"


class TrainerFramework:
    """Values of the ``trainer.kubeflow.org/framework`` label on a generated TrainingRuntime."""

    TORCH: Final = "torch"
    MPI: Final = "mpi"


class ReplicatedJob:
    """Replicated-job names inside a TrainingRuntime / JobSet."""

    NODE: Final = "node"
    LAUNCHER: Final = "launcher"


TRAINJOB_ANCESTOR_STEP_TRAINER: Final = "trainer"
"""``trainer.kubeflow.org/trainjob-ancestor-step`` value on the torch ``node`` / MPI ``launcher`` job."""
WORKLOAD_CONTAINER_NAME: Final = "node"

# --- labels, annotations, finalizers -----------------------------------------------------------

RESERVED_LABEL_PREFIX: Final = f"{GROUP}/"


class Label:
    MANAGED_BY: Final = "app.kubernetes.io/managed-by"
    WORKLOAD_RUN: Final = "nvcre.nvidia.com/workload-run"
    """Workflow created by a WorkloadRun -> run name."""
    CERTIFICATION: Final = "nvcre.nvidia.com/certification"
    """Workflow created by a Certification -> certification name."""
    CATEGORY_DOMAIN: Final = "nvcre.nvidia.com/category-domain"
    CATEGORY_VARIANT: Final = "nvcre.nvidia.com/category-variant"
    WORKFLOW: Final = "nvcre.nvidia.com/workflow"
    """Job and every dependency object created by a Workflow -> Workflow name."""
    GROUP: Final = "nvcre.nvidia.com/group"
    """Job -> group name (``group-0``, ``group-1-overflow``, ...)."""
    JOB: Final = "nvcre.nvidia.com/job"
    """TrainJob, workload pod templates, measurements, Job-scoped dependency copies -> owning
    Job name."""
    JOB_UID: Final = "nvcre.nvidia.com/job-uid"
    """Goodput/BandwidthMeasurement -> Job UID (retried groups reuse Job names)."""
    APP: Final = "app"
    """Generated TrainingRuntime, inline ConfigMap, checkpoint PVC -> WorkloadRun name."""
    TRAINER_FRAMEWORK: Final = "trainer.kubeflow.org/framework"
    TRAINJOB_ANCESTOR_STEP: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
    # results-archive evidence
    ARCHIVE_EVIDENCE_KIND: Final = "nvcre.nvidia.com/archive-evidence-kind"
    CERTIFICATION_UID: Final = "nvcre.nvidia.com/certification-uid"
    WORKFLOW_UID: Final = "nvcre.nvidia.com/workflow-uid"


class Annotation:
    REQUESTED_TEST_SCALE: Final = "nvcre.nvidia.com/requested-test-scale"
    """Certification-generated Workflow -> the requested ``testScale`` (only when set)."""
    GROUP_NODES: Final = "nvcre.nvidia.com/group-nodes"
    """Job -> comma-joined, sorted node names of its group."""
    GROUP_DOMAINS: Final = "nvcre.nvidia.com/group-domains"
    """Job -> comma-joined topology domains its group spans (absent when none is known)."""
    WORKFLOW_UID: Final = "nvcre.nvidia.com/workflow-uid"
    """Dependency objects (and PVs behind owned PVCs) -> Workflow UID, the proof of ownership."""
    RUNTIME_COPY: Final = "nvcre.nvidia.com/runtime-copy"
    """A Workflow's Job -> its Job-scoped TrainingRuntime copy, created after the Job (with the
    Job as owner): the Job controller creates the TrainJob once its cache holds the copy."""
    JOB_UID: Final = Label.JOB_UID
    """Where the measurement's Job UID was before it became a label; read for compatibility."""
    DETECTED_GPU_ARCHITECTURE: Final = "nvcrectl.nvidia.com/detected-gpu-architecture"
    DETECTED_PLATFORM: Final = "nvcrectl.nvidia.com/detected-platform"
    """Both only on Workflows rendered offline by ``nvcrectl workloadrun render``."""
    APPLIED_OVERRIDES: Final = "nvcrectl.nvidia.com/applied-overrides"
    """Offline renders: JSON list of the matched overrides ({index, when, patches, noOp} summaries)."""
    ARCHIVE_EVIDENCE_VERSION: Final = "nvcre.nvidia.com/archive-evidence-version"
    ARCHIVE_THRESHOLD_DECISION: Final = "nvcre.nvidia.com/archive-threshold-decision"


class Finalizer:
    CERTIFICATION: Final = "nvcre.nvidia.com/certification-finalizer"
    WORKFLOW: Final = "nvcre.nvidia.com/workflow-finalizer"
    JOB: Final = "nvcre.nvidia.com/finalizer"
    BANDWIDTH_MEASUREMENT: Final = "nvcre.nvidia.com/bandwidthmeasurement-finalizer"
    # WorkloadRun has none: it relies on owner-reference garbage collection.


class NodeLabel:
    """Well-known Node labels and resources read by discovery."""

    GPU_PRESENT: Final = "nvidia.com/gpu.present"
    GPU_PRODUCT: Final = "nvidia.com/gpu.product"
    GPU_COUNT: Final = "nvidia.com/gpu.count"
    GPU_CLIQUE: Final = "nvidia.com/gpu.clique"
    """The label GPU feature discovery puts on nodes of one multi-node NVLink domain (GB200/GB300)."""
    HOSTNAME: Final = "kubernetes.io/hostname"
    GPU_RESOURCE: Final = "nvidia.com/gpu"
    UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"


# --- reserved label keys (enforced by CEL on user input) ---------------------------------------

RESERVED_LABEL_KEYS: Final = frozenset({Label.MANAGED_BY})
_CONTROLLER_OWNED_KEYS: Final = f"{Label.MANAGED_BY} or any key under the {RESERVED_LABEL_PREFIX} prefix"
RESERVED_LABELS_MESSAGE: Final = f"labels must not set the controller-owned keys {_CONTROLLER_OWNED_KEYS}"
RESERVED_QUEUE_LABEL_KEY_MESSAGE: Final = (
    f"queueLabelKey must not use the controller-owned key {_CONTROLLER_OWNED_KEYS}"
)


# --- defaults ----------------------------------------------------------------------------------


class Default:
    """Every default value of the API and the controllers, in one place."""

    NAMESPACE: Final = "nvcre"
    QUEUE: Final = "default-queue"
    QUEUE_LABEL_KEY: Final = "kai.scheduler/queue"
    RUNAI_QUEUE_LABEL_KEY: Final = "runai/queue"
    NODE_HEALTH_EXPRESSION: Final = (
        "node.spec.unschedulable == true"
        " || node.status.conditions.exists(c, (c.type == 'Ready' && c.status != 'True')"
        " || (c.type == 'NVSentinelGPUHealthy' && c.status == 'False'))"
        " || 'gpud.nvidia.com/unhealthy' in node.metadata.labels"
        " || node.spec.taints.exists(t, t.effect in ['NoSchedule', 'NoExecute']"
        " && t.key.matches('(?i)gpu[._/-]?health'))"
    )
    """A node is unhealthy when it is cordoned, NotReady (the node controller's ``False`` or
    ``Unknown``), NVSentinel's GPU condition is False, gpud labelled it unhealthy, or a taint
    whose key names GPU health (``gpu.health/error``, ``nvidia.com/gpu-health``) keeps pods off."""
    WORKLOAD_RUN_TIMEOUT_PER_JOB: Final = "24h"
    MEASUREMENT_TIMEOUT: Final = "5m"
    FINAL_READ_GRACE_SECONDS: Final = 120.0
    """A succeeded Job's complete log is retried for max(measurementTimeout, this) before its
    measurement ends LogsUnavailable; the verdict waits for the measurement at least as long."""
    REQUEUE_SECONDS: Final = 15.0
    REQUEUE_IMMEDIATE_SECONDS: Final = 0.05
    NODE_DISCOVERY_TIMEOUT_SECONDS: Final = 300.0
    MAX_NODES_PER_RUN: Final = 0
    """The manager's node limit of a run that sets no ``spec.maxNodes``; 0: none."""
    POD_DRAIN_GRACE_SECONDS: Final = 300.0
    RELEASE_TIMEOUT_SECONDS: Final = 600.0
    """nvcre-manager's ``--release-timeout``: how long after a run ended its pods, JobSets,
    TrainJobs and Job-scoped TrainingRuntime copies may take to go before ``ResourcesReleased``
    says ``ReleaseTimedOut``."""
    RELEASE_RECHECK_SECONDS: Final = 5.0
    """How often an ended run that is still releasing looks again (besides its pods' events)."""
    SAMPLE_INTERVAL_SECONDS: Final = 60.0
    """A GoodputMeasurement's ``sampleInterval`` when unset (or unparseable)."""
    STARTUP_STALL_SECONDS: Final = 1200
    """A Job's ``startupStallTimeoutSeconds`` when unset (20 minutes)."""
    TOPOLOGY_KEY: Final = NodeLabel.GPU_CLIQUE
    """A WorkloadRun's ``orchestration.topologyKey`` when unset."""
    MAX_CONCURRENT_RECONCILES: Final = 10
    MEASUREMENT_MAX_CONCURRENT_RECONCILES: Final = 5
    MAX_WORKLOAD_LABELS: Final = 32
    # Certification category options (spec/catalog.md) when a category leaves them unset
    TEST_SCALE: Final = "full-scale"
    MAX_BYTES: Final = "16G"
    EXPECTED_FLOOR_FRACTION: Final = 0.8
    """A Certification's default floor: this fraction of the expected-performance figure."""
    OUTLIER_FRACTION: Final = 0.9
    """A Workflow's ``outlierFraction`` when unset: a group below this fraction of its peers'
    median bandwidth (or slower than their median step time / this) is an outlier."""
    REGRESSION_FRACTION: Final = 0.1
    """A Workflow's ``regressionFraction`` when unset: a node whose group measures more than this
    fraction worse than the node's own baseline regressed."""
    BASELINE_RESULTS: Final = 5
    """A Workflow's ``baselineResults`` when unset: the baseline is the median of this many of the
    node's latest passing results of the same category and shape (fewer: not judged)."""
    STALE_AFTER_DAYS: Final = 30
    """A node whose last pass is more than this many days old is stale: no longer counted as
    certified (``nvcrectl fleet``, docs/fleet-memory.md)."""
    NODE_RECORD_RETENTION_DAYS: Final = 90
    """nvcre-manager's ``--node-record-retention``: the record of a Node that is gone is deleted
    this many days after its newest result (docs/fleet-memory.md#retention)."""
    NUM_ITERATIONS: Final = 100
    NUM_CYCLES: Final = 10
    DIAGNOSE_NUM_ITERATIONS: Final = 5
    DIAGNOSE_NUM_CYCLES: Final = 1
    MIN_GROUP_SIZE: Final = 2
    MAX_STEPS: Final = 50
    EXIT_DURATION_MINS: Final = 30
    SAVE_INTERVAL: Final = 250
    SAVE_RETAIN_INTERVAL: Final = 1000
    SAVE_TOP_K: Final = 1
    STORAGE_SIZE: Final = "10Ti"


# --- node-result ConfigMaps --------------------------------------------------------------------

SUCCEEDED_NODES_KEY: Final = "succeeded-nodes.csv.gz"
"""``binaryData`` key: gzip of comma-joined, sorted node names."""
FAILED_NODES_KEY: Final = "failed-nodes.json.gz"
"""``binaryData`` key: gzip of a JSON array of ``{"name", "reason", "message"}``."""

# --- conditions --------------------------------------------------------------------------------


class ConditionStatus:
    TRUE: Final = "True"
    FALSE: Final = "False"
    UNKNOWN: Final = "Unknown"


class ConditionType:
    # the exclusive execution trio (Certification, WorkloadRun, Workflow, Job)
    IN_PROGRESS: Final = "InProgress"
    SUCCEEDED: Final = "Succeeded"
    FAILED: Final = "Failed"
    # additive
    VALIDATION_FAILED: Final = "ValidationFailed"
    HARDWARE_FAILED: Final = "HardwareFailed"
    # measurements
    MEASURING: Final = "Measuring"
    COMPLETE: Final = "Complete"
    # ReportExport
    SNAPSHOT_READY: Final = "SnapshotReady"
    # additive, once the run has ended (Workflow, WorkloadRun, Certification)
    RESOURCES_RELEASED: Final = "ResourcesReleased"


EXCLUSIVE_CONDITION_TYPES: Final = (ConditionType.IN_PROGRESS, ConditionType.SUCCEEDED, ConditionType.FAILED)
"""Exactly one of these is True; the order is the order they are written in."""
TERMINAL_CONDITION_TYPES: Final = (ConditionType.SUCCEEDED, ConditionType.FAILED)


class Reason:
    """Reasons shared by every tier."""

    NOT_APPLICABLE: Final = "NotApplicable"
    """Inactive trio members on Certification, Workflow and Job."""
    SUPERSEDED: Final = "Superseded"
    """Inactive trio members on WorkloadRun."""


class WorkflowOwnerReason:
    """Reasons of the kinds that render a Workflow and mirror its end (WorkloadRun, Certification)."""

    WORKFLOW_CREATED: Final = "WorkflowCreated"
    WORKFLOW_SUCCEEDED: Final = "WorkflowSucceeded"
    WORKFLOW_FAILED: Final = "WorkflowFailed"
    WORKFLOW_VALIDATION_FAILED: Final = "WorkflowValidationFailed"
    WORKFLOW_DELETED: Final = "WorkflowDeleted"
    WORKFLOW_NAME_COLLISION: Final = "WorkflowNameCollision"
    BUILD_FAILED: Final = "BuildFailed"
    THRESHOLD_VIOLATION: Final = "ThresholdViolation"
    """``ValidationFailed=True`` mirrored from the Workflow."""
    TOO_MANY_NODES: Final = "TooManyNodes"
    """Failed before any Workflow exists: the target resolves to more nodes than the run's limit."""
    DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
    """Failed: the run's ``spec.deadline`` passed; what was judged before it keeps its result."""


class CertificationReason(WorkflowOwnerReason):
    WAITING_FOR_NODES: Final = "WaitingForNodes"
    WORKFLOW_RUNNING: Final = "WorkflowRunning"
    ALL_WORKFLOWS_SUCCEEDED: Final = "AllWorkflowsSucceeded"
    CATEGORY_NOT_FOUND: Final = "CategoryNotFound"
    WORKFLOW_CREATION_ERROR: Final = "WorkflowCreationError"


class WorkloadRunReason(WorkflowOwnerReason):
    """A WorkloadRun has no reasons of its own: it runs one Workflow and mirrors it."""


class ReleaseReason:
    """``ResourcesReleased`` reasons (Workflow, WorkloadRun, Certification)."""

    RELEASING: Final = "Releasing"
    """False: a pod, JobSet, TrainJob or Job-scoped TrainingRuntime copy of the run remains."""
    RELEASED: Final = "Released"
    """True: none remains."""
    RELEASE_TIMED_OUT: Final = "ReleaseTimedOut"
    """False, with a Warning event of this reason: some remain ``--release-timeout`` after the
    run ended (the message names what is stuck and its finalizers)."""
    WORKFLOW_DELETED: Final = "WorkflowDeleted"
    """Unknown (an owner): a Workflow of the run was deleted before it said its resources were
    released, so none can be proven gone."""


class WorkflowReason:
    GROUPS_PARTITIONED: Final = "GroupsPartitioned"
    JOB_CREATED: Final = "JobCreated"
    JOB_RUNNING: Final = "JobRunning"
    ITERATION_COMPLETED: Final = "IterationCompleted"
    ISOLATING: Final = "IsolatingFailures"
    """An iteration's failed groups' members are being re-tested with healthy partners."""
    ISOLATION_COMPLETED: Final = "IsolationCompleted"
    JOB_COMPLETED: Final = "JobCompleted"
    OVERRIDE_ERROR: Final = "OverrideError"
    CHECKPOINT_PVC_MISSING: Final = "CheckpointPVCMissing"
    NODE_DISCOVERY_ERROR: Final = "NodeDiscoveryError"
    HETEROGENEOUS_PLATFORM: Final = "HeterogeneousPlatform"
    PARTITION_ERROR: Final = "PartitionError"
    DEPENDENCY_CREATION_ERROR: Final = "DependencyCreationError"
    DEPENDENCY_NAME_COLLISION: Final = "DependencyNameCollision"
    JOB_NAME_COLLISION: Final = "JobNameCollision"
    JOB_CREATION_ERROR: Final = "JobCreationError"
    GANG_SCHEDULING_CONFLICT: Final = "GangSchedulingConflict"
    ITERATIONS_FAILED: Final = "IterationsFailed"
    JOB_FAILED: Final = "JobFailed"
    JOB_HARDWARE_FAILED: Final = "JobHardwareFailed"
    JOB_VALIDATION_FAILED: Final = "JobValidationFailed"
    """Failed reason when a threshold miss is the only cause, and the ValidationFailed reason."""
    JOB_TIMED_OUT: Final = "JobTimedOut"
    """Written by the Workflow onto the Job's Failed condition."""
    DIAGNOSE_LIMIT_REACHED: Final = "DiagnoseLimitReached"
    """A diagnosis stopped at ``diagnose.maxRounds`` or ``diagnose.deadline``."""
    DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
    """``orchestration.deadlineTime`` passed: unfinished Jobs deleted, their groups not judged."""
    TOO_MANY_NODES: Final = "TooManyNodes"
    """The target resolves to more nodes than ``orchestration.maxNodes``; no Job was created."""


class JobReason:
    WORKLOAD_CREATED: Final = "WorkloadCreated"
    WORKLOAD_ADOPTED: Final = "WorkloadAdopted"
    WORKLOAD_PENDING: Final = "WorkloadPending"
    WORKLOAD_SCHEDULING_BLOCKED: Final = "WorkloadSchedulingBlocked"
    WORKLOAD_RUNNING: Final = "WorkloadRunning"
    WORKLOAD_RESTARTING: Final = "WorkloadRestarting"
    WORKLOAD_COMPLETED: Final = "WorkloadCompleted"
    WORKLOAD_CREATION_ERROR: Final = "WorkloadCreationError"
    WORKLOAD_FAILED: Final = "WorkloadFailed"
    WORKLOAD_STALLED: Final = "WorkloadStalled"
    JOB_TIMED_OUT: Final = "JobTimedOut"
    # HardwareFailed
    HARDWARE_FAILURE_DETECTED: Final = "HardwareFailureDetected"
    # ValidationFailed
    THRESHOLDS_MET: Final = "ThresholdsMet"
    """``ValidationFailed=False``: thresholds were evaluated and passed."""
    THRESHOLD_VIOLATED: Final = "ThresholdViolated"
    """Condition reason for a violated threshold (the failed-node entry says ``ThresholdViolation``)."""
    MEASUREMENT_TIMEOUT: Final = "MeasurementTimeout"
    UNKNOWN_THRESHOLD_KEY: Final = "UnknownThresholdKey"
    INVALID_THRESHOLD_EXPRESSION: Final = "InvalidThresholdExpression"
    MEASUREMENTS_CHECKED: Final = "MeasurementsChecked"
    """``ValidationFailed=False`` of a Job that measures bandwidth and has no thresholds."""
    DATA_CORRUPTION: Final = "DataCorruption"
    """nccl-tests counted wrong values (``BandwidthMeasurement.status.wrongValues`` > 0)."""
    UNEXPECTED_TRANSPORT: Final = "UnexpectedTransport"
    """NCCL did not use ``bandwidthMeasurement.expectedTransport`` (e.g. fell back to sockets)."""
    FAILURES_LOGGED: Final = "FailuresLogged"
    """The launcher's log reports NCCL or CUDA failures (``Test NCCL failure ...``)."""
    MEASUREMENT_UNAVAILABLE: Final = "MeasurementUnavailable"
    """A measurement the Job asked for has no final data (log unreadable, no row, a table cut
    short, a launcher that printed failures); ``allowMissingData`` makes it informational."""
    BANDWIDTH_OUTLIER: Final = "BandwidthOutlier"
    """Written by the Workflow: bus bandwidth below ``outlierFraction`` of the peer groups' median."""
    STEP_TIME_OUTLIER: Final = "StepTimeOutlier"
    """Written by the Workflow: step time above the peer groups' median / ``outlierFraction``."""
    REGRESSION: Final = "Regression"
    """Written by the Workflow: a value more than ``regressionFraction`` worse than a node's own
    baseline (the median of its latest passing results in the same category and shape)."""


class FailedNodeReason:
    """``reason`` of a failed-node entry (a Job's ``status.failedNodes``, the failed-nodes
    ConfigMap): the reference's three values, which consumers of the ConfigMap match on. The
    specific cause goes in ``cause`` (:class:`FailureCause`, :mod:`nvcre.failednodes`)."""

    HARDWARE_FAILURE_DETECTED: Final = "HardwareFailureDetected"
    THRESHOLD_VIOLATION: Final = "ThresholdViolation"
    WORKLOAD_FAILED: Final = "WorkloadFailed"


FAILED_NODE_REASONS: Final = members(FailedNodeReason)


class FailureCause:
    """``cause`` of a failed-node entry: why nvcre failed the node, finer than its ``reason``.
    Mostly the reason of the Job condition that failed the group, which it then names."""

    HARDWARE_FAILURE_DETECTED: Final = JobReason.HARDWARE_FAILURE_DETECTED
    """The node-health expression matched the node while the workload ran."""
    THRESHOLD_VIOLATED: Final = JobReason.THRESHOLD_VIOLATED
    """A user's threshold was not met."""
    BELOW_EXPECTED: Final = "BelowExpected"
    """No threshold given: the measured value is below the default floor of the expected value."""
    BANDWIDTH_OUTLIER: Final = JobReason.BANDWIDTH_OUTLIER
    STEP_TIME_OUTLIER: Final = JobReason.STEP_TIME_OUTLIER
    REGRESSION: Final = JobReason.REGRESSION
    UNEXPECTED_TRANSPORT: Final = JobReason.UNEXPECTED_TRANSPORT
    DATA_CORRUPTION: Final = JobReason.DATA_CORRUPTION
    FAILURES_LOGGED: Final = JobReason.FAILURES_LOGGED
    MEASUREMENT_UNAVAILABLE: Final = JobReason.MEASUREMENT_UNAVAILABLE
    MEASUREMENT_TIMEOUT: Final = JobReason.MEASUREMENT_TIMEOUT
    UNKNOWN_THRESHOLD_KEY: Final = JobReason.UNKNOWN_THRESHOLD_KEY
    INVALID_THRESHOLD_EXPRESSION: Final = JobReason.INVALID_THRESHOLD_EXPRESSION
    WORKLOAD_FAILED: Final = JobReason.WORKLOAD_FAILED
    WORKLOAD_STALLED: Final = JobReason.WORKLOAD_STALLED
    JOB_TIMED_OUT: Final = JobReason.JOB_TIMED_OUT
    """Written by the Workflow for a group whose Job exceeded ``timeoutPerJob``."""
    JOB_DELETED: Final = "JobDeleted"
    """Written by the Workflow for a group whose Job was deleted before it finished."""
    CONFIRMED_FAULTY: Final = "ConfirmedFaulty"
    """Diagnosis: the node failed again beside a healthy reference node."""


class NodeHealthReason:
    CEL_EXPRESSION_MATCHED: Final = "CELExpressionMatched"


class ThresholdKey:
    """The keys of a ``thresholds`` map: the values a Job's final measurements give."""

    BUS_BANDWIDTH: Final = "busBandwidthGBps"
    ALG_BANDWIDTH: Final = "algBandwidthGBps"
    GOODPUT_RATIO: Final = "goodputRatio"
    AVG_TFLOPS_PER_GPU: Final = "avgTFLOPsPerGPU"
    AVG_STEP_TIME: Final = "avgStepTimeSec"


THRESHOLD_KEYS: Final = members(ThresholdKey)
"""The registry of threshold keys, in the order error messages list them."""


class FailureLogReason:
    """``Job.status.failureLog.reason`` values the controller itself writes."""

    TIMEOUT: Final = "Timeout"
    STALLED: Final = "Stalled"
    POD_NOT_FOUND: Final = "PodNotFound"
    NO_TERMINATED_CONTAINER: Final = "NoTerminatedContainer"


class MeasurementReason:
    """Goodput/Bandwidth/C2C measurement ``Measuring`` and ``Complete`` reasons."""

    JOB_RUNNING: Final = "JobRunning"
    FINAL_READ_PENDING: Final = "FinalReadPending"
    JOB_SUCCEEDED: Final = "JobSucceeded"
    """The only ``Complete`` reason whose results feed thresholds."""
    JOB_FAILED: Final = "JobFailed"
    NO_DATA_COLLECTED: Final = "NoDataCollected"
    LOGS_UNAVAILABLE: Final = "LogsUnavailable"
    LOG_PROFILE_NOT_FOUND: Final = "LogProfileNotFound"


class EventReason:
    """Reasons of events that are not condition transitions."""

    CORDONED_NODES_EXCLUDED: Final = "CordonedNodesExcluded"
    HETEROGENEOUS_GPU: Final = "HeterogeneousGPU"
    IMAGE_MISMATCH: Final = "ImageMismatch"
    INSUFFICIENT_GPU_CAPACITY: Final = "InsufficientGPUCapacity"
    GPU_ARCHITECTURE_DEFAULTS: Final = "GPUArchitectureDefaults"
    OVERRIDE_NO_OP: Final = "OverrideNoOp"
    OVERRIDE_APPLIED: Final = "OverrideApplied"
    NO_OVERRIDES_MATCHED: Final = "NoOverridesMatched"
    HETEROGENEOUS_PLATFORM_STATUS_UPDATE_FAILED: Final = "HeterogeneousPlatformStatusUpdateFailed"
    OVERRIDE_ERROR_STATUS_UPDATE_FAILED: Final = "OverrideErrorStatusUpdateFailed"
    JOB_TIMED_OUT: Final = "JobTimedOut"
    WORKLOAD_CREATION_ERROR: Final = "WorkloadCreationError"
    MEASUREMENT_CREATION_ERROR: Final = "MeasurementCreationError"
    WORKFLOW_CREATION_ERROR: Final = "WorkflowCreationError"
    BUILD_FAILED_STATUS_UPDATE_FAILED: Final = "BuildFailedStatusUpdateFailed"
    NIC_RESOURCE_DETECTION: Final = "NICResourceDetection"
    GKE_NETWORK_DETECTION: Final = "GKENetworkDetection"
    TCPXO_PLUGIN_DETECTION: Final = "TCPXOPluginDetection"
    INVALID_NODE_HEALTH_EXPRESSION: Final = "InvalidNodeHealthExpression"
    """A Job's ``nodeHealthMonitor`` expression does not compile, is not boolean or exceeds its
    evaluation budget: the monitor cannot judge its nodes (they count as healthy)."""


class EventType:
    NORMAL: Final = "Normal"
    WARNING: Final = "Warning"
