"""Minimal valid manifests of each kind (:mod:`nvcre.testing.builders`), and ``at`` to derive a
variant, for rejection tests.

The same documents feed the offline validation tests and the admission tests on the real API
server, so both layers are held to one set of cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre.testing.builders import (
    BandwidthMeasurement,
    Certification,
    Job,
    LogProfile,
    Workflow,
    WorkloadRun,
    at,
)

RUN: dict[str, Any] = WorkloadRun().obj()
CERT: dict[str, Any] = Certification().obj()
JOB: dict[str, Any] = Job().obj()
WORKFLOW: dict[str, Any] = Workflow().obj()
PROFILE: dict[str, Any] = LogProfile().obj()
BANDWIDTH: dict[str, Any] = BandwidthMeasurement().obj()


LABELS_33 = {f"l{i}": "v" for i in range(33)}
"""One label more than a workload's labels may hold."""
NINE_MACROS = " && ".join(["[1].all(x, x > 0)"] * 9)
"""Nine comprehension macro calls: one more than an expression may make."""
WRONG_KEY = {"busBandwithGBps": "value >= 400"}
UNKNOWN_KEY = (
    "; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]"
)
BAD_SAMPLE_INTERVAL = "sampleInterval must be at least 5s"


@dataclass(frozen=True)
class Rejection:
    """A manifest the API server and ``nvcrectl validate`` both reject, with text both messages hold."""

    id: str
    document: dict[str, Any]
    path: str
    """The field path the API server names."""
    text: str
    offline_path: str | None = None
    """The path ``nvcrectl validate`` names, where it differs: a map entry is ``map["key"]``."""
    offline_text: str | None = None
    """The text ``nvcrectl validate``'s message holds, where it differs (the API server's
    messages say ``should have at least ...`` where the offline ones say ``at least ...``)."""

    def admission(self) -> tuple[str, dict[str, Any], str, str]:
        return (self.id, self.document, self.path, self.text)

    def offline(self) -> tuple[str, dict[str, Any], str, str]:
        return (self.id, self.document, self.offline_path or self.path, self.offline_text or self.text)


LONG_PREFIX = ".".join(["a" * 63] * 4)[:254] + "/q"
"""A label key whose DNS prefix is 254 characters, one past the limit."""

REJECTED_BOTH = [
    # The CRDs' CEL rules (nvcre.validation.rules evaluates them offline)
    Rejection(
        "torch-script-and-module",
        at(RUN, "spec.framework", {"torch": {"script": "a.py", "module": "m"}}),
        "spec.framework.torch",
        "script and module are mutually exclusive",
    ),
    Rejection(
        "torch-neither",
        at(RUN, "spec.framework", {"torch": {"args": ["x"]}}),
        "spec.framework.torch",
        "either script or module must be set",
    ),
    Rejection(
        "config-both",
        at(RUN, "spec.config", {"inline": {"a.sh": "echo"}, "configMapRef": {"name": "cm"}}),
        "spec.config",
        "inline and configMapRef are mutually exclusive",
    ),
    Rejection(
        "nic-kubernetes-io",
        at(RUN, "spec.nicResourceName", "kubernetes.io/rdma"),
        "spec.nicResourceName",
        "nicResourceName must not use the reserved kubernetes.io or k8s.io domains",
    ),
    Rejection(
        "nic-k8s-io-subdomain",
        at(RUN, "spec.nicResourceName", "foo.k8s.io/x"),
        "spec.nicResourceName",
        "nicResourceName must not use the reserved kubernetes.io or k8s.io domains",
    ),
    Rejection(
        "queue-key-reserved-prefix",
        at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queueLabelKey": "nvcre.nvidia.com/queue"}),
        "spec.gangScheduler.queueLabelKey",
        "queueLabelKey must not use the controller-owned key app.kubernetes.io/managed-by or any key under the nvcre.nvidia.com/ prefix",
    ),
    Rejection(
        "queue-key-managed-by",
        at(
            RUN,
            "spec.gangScheduler",
            {"schedulerName": "kai", "queueLabelKey": "app.kubernetes.io/managed-by"},
        ),
        "spec.gangScheduler.queueLabelKey",
        "queueLabelKey must not use the controller-owned key",
    ),
    Rejection(
        "queue-key-long-prefix",
        at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queueLabelKey": LONG_PREFIX}),
        "spec.gangScheduler.queueLabelKey",
        "queueLabelKey prefix must be at most 253 characters",
    ),
    Rejection(
        "label-reserved",
        at(RUN, "spec.workloadMetadata", {"labels": {"nvcre.nvidia.com/x": "y"}}),
        "spec.workloadMetadata.labels",
        "labels must not set the controller-owned keys app.kubernetes.io/managed-by or any key under the nvcre.nvidia.com/ prefix",
    ),
    Rejection(
        "label-managed-by",
        at(RUN, "spec.workloadMetadata", {"labels": {"app.kubernetes.io/managed-by": "me"}}),
        "spec.workloadMetadata.labels",
        "labels must not set the controller-owned keys",
    ),
    Rejection(
        "label-key-grammar",
        at(RUN, "spec.workloadMetadata", {"labels": {"bad key": "v"}}),
        "spec.workloadMetadata.labels",
        "each label key must be a valid Kubernetes label key",
    ),
    Rejection(
        "label-key-long-prefix",
        at(RUN, "spec.workloadMetadata", {"labels": {LONG_PREFIX: "v"}}),
        "spec.workloadMetadata.labels",
        "each label key prefix must be at most 253 characters",
    ),
    Rejection(
        "cert-requests-above-limits",
        at(CERT, "spec.resources", {"requests": {"cpu": "8"}, "limits": {"cpu": "4"}}),
        "spec.resources",
        "requests.cpu must not exceed limits.cpu (requests.cpu 8, limits.cpu 4)",
    ),
    Rejection(
        "cert-memory-above-limits",
        at(CERT, "spec.resources", {"requests": {"memory": "64Gi"}, "limits": {"memory": "32Gi"}}),
        "spec.resources",
        "requests.memory must not exceed limits.memory (requests.memory 64Gi, limits.memory 32Gi)",
    ),
    Rejection(
        "cert-negative-memory",
        at(CERT, "spec.resources", {"limits": {"memory": "-1Gi"}}),
        "spec.resources.limits.memory",
        "memory must be a non-negative quantity",
    ),
    Rejection(
        "cert-category-label-reserved",
        at(
            CERT,
            "spec.categories",
            [
                {
                    "domain": "d",
                    "variant": "v",
                    "options": {"workloadMetadata": {"labels": {"nvcre.nvidia.com/a": "b"}}},
                }
            ],
        ),
        "spec.categories[0].options.workloadMetadata.labels",
        "labels must not set the controller-owned keys",
    ),
    Rejection("run-threshold-key", at(RUN, "spec.thresholds", WRONG_KEY), "spec.thresholds", UNKNOWN_KEY),
    Rejection(
        "cert-category-threshold-key",
        at(CERT, "spec.categories", [{"domain": "d", "variant": "v", "options": {"thresholds": WRONG_KEY}}]),
        "spec.categories[0].options.thresholds",
        UNKNOWN_KEY,
    ),
    Rejection("cert-threshold-key", at(CERT, "spec.thresholds", WRONG_KEY), "spec.thresholds", UNKNOWN_KEY),
    Rejection("job-threshold-key", at(JOB, "spec.thresholds", WRONG_KEY), "spec.thresholds", UNKNOWN_KEY),
    Rejection(
        "workflow-performance-threshold-key",
        at(
            WORKFLOW,
            "spec.validation",
            {"performance": {"enabled": True, "thresholds": {"thresholds": WRONG_KEY}}},
        ),
        "spec.validation.performance.thresholds.thresholds",
        UNKNOWN_KEY,
    ),
    Rejection(
        "run-sample-interval-1ns",
        at(RUN, "spec.bandwidthMeasurement", {"logProfileRef": "nccl-bandwidth", "sampleInterval": "1ns"}),
        "spec.bandwidthMeasurement.sampleInterval",
        BAD_SAMPLE_INTERVAL,
    ),
    Rejection(
        "workflow-sample-interval-4s",
        at(
            WORKFLOW,
            "spec.jobTemplate.spec.goodputMeasurement",
            {"logProfileRef": "nemo-training", "sampleInterval": "4.9s"},
        ),
        "spec.jobTemplate.spec.goodputMeasurement.sampleInterval",
        BAD_SAMPLE_INTERVAL,
    ),
    Rejection(
        "job-sample-interval-not-a-duration",
        at(JOB, "spec.goodputMeasurement", {"logProfileRef": "megatron-training", "sampleInterval": "soon"}),
        "spec.goodputMeasurement.sampleInterval",
        "should match",
    ),
    Rejection(
        "bandwidth-sample-interval-1s",
        at(BANDWIDTH, "spec.sampleInterval", "1s"),
        "spec.sampleInterval",
        BAD_SAMPLE_INTERVAL,
    ),
    Rejection(
        "job-health-nine-macros",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": NINE_MACROS}}),
        "spec.nodeHealthMonitor.cel.expression",
        "comprehension macros",
    ),
    Rejection(
        "job-health-too-long",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": "true || " * 256 + "true"}}),
        "spec.nodeHealthMonitor.cel.expression",
        "Too long",
    ),
    Rejection(
        "run-when-too-long",
        at(RUN, "spec.overrides", [{"when": {"expression": "true || " * 256 + "true"}, "jobTemplate": {}}]),
        "spec.overrides[0].when.expression",
        "Too long",
    ),
    Rejection(
        "run-threshold-too-long",
        at(RUN, "spec.thresholds", {"busBandwidthGBps": "value >= " + "1" * 250}),
        "spec.thresholds.busBandwidthGBps",
        "Too long",
        'spec.thresholds["busBandwidthGBps"]',
    ),
    Rejection(
        "run-threshold-nine-macros",
        at(RUN, "spec.thresholds", {"busBandwidthGBps": NINE_MACROS}),
        "spec.thresholds[busBandwidthGBps]",
        "comprehension macros",
        'spec.thresholds["busBandwidthGBps"]',
    ),
    Rejection(
        "run-framework-empty",
        at(RUN, "spec.framework", {}),
        "spec.framework",
        "should have at least 1 properties",
        offline_text="at least 1 properties",
    ),
    Rejection(
        "run-framework-two",
        at(RUN, "spec.framework", {"torch": {"script": "a.py"}, "exec": {"command": ["x"]}}),
        "spec.framework",
        "Too many: 2: must have at most 1 item",
        offline_text="must have at most 1 item",
    ),
    Rejection("run-no-image", at(RUN, "spec.image", "<delete>"), "spec.image", "Required value"),
    Rejection(
        "run-deadline-zero",
        at(RUN, "spec.deadline", "0s"),
        "spec.deadline",
        "deadline must be longer than 0s",
    ),
    Rejection("cert-deadline-fraction", at(CERT, "spec.deadline", "1.5h"), "spec.deadline", "should match"),
    Rejection(
        "cert-max-nodes-negative",
        at(CERT, "spec.maxNodes", -1),
        "spec.maxNodes",
        "should be greater than or equal to 0",
        offline_text="greater than or equal to 0",
    ),
    Rejection(
        "run-zero-nodes",
        at(RUN, "spec.numNodes", 0),
        "spec.numNodes",
        "should be greater than or equal to 1",
        offline_text="greater than or equal to 1",
    ),
    Rejection(
        "run-mpi-no-mpirun",
        at(RUN, "spec.framework.mpi.mpirunPath", "<delete>"),
        "spec.framework.mpi.mpirunPath",
        "Required value",
    ),
    Rejection(
        "run-exec-empty-command",
        at(RUN, "spec.framework", {"exec": {"command": []}}),
        "spec.framework.exec.command",
        "should have at least 1 items",
        offline_text="at least 1 items",
    ),
    Rejection(
        "run-gpus-zero",
        at(RUN, "spec.gpusPerNode", 0),
        "spec.gpusPerNode",
        "should be greater than or equal to 1",
        offline_text="greater than or equal to 1",
    ),
    Rejection(
        "run-nic-no-slash", at(RUN, "spec.nicResourceName", "ib"), "spec.nicResourceName", "should match"
    ),
    Rejection(
        "run-nic-long-name",
        at(RUN, "spec.nicResourceName", "rdma/" + "a" * 64),
        "spec.nicResourceName",
        "should match",
    ),
    Rejection(
        "run-queue-key-grammar",
        at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queueLabelKey": "bad key"}),
        "spec.gangScheduler.queueLabelKey",
        "should match",
    ),
    Rejection(
        "run-queue-pattern",
        at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queue": "-team"}),
        "spec.gangScheduler.queue",
        "should match",
    ),
    Rejection(
        "run-gang-no-scheduler",
        at(RUN, "spec.gangScheduler", {}),
        "spec.gangScheduler.schedulerName",
        "Required value",
    ),
    Rejection(
        "run-gang-empty-scheduler",
        at(RUN, "spec.gangScheduler", {"schedulerName": ""}),
        "spec.gangScheduler.schedulerName",
        "should be at least 1 chars long",
        offline_text="at least 1 chars",
    ),
    Rejection(
        "run-labels-33",
        at(RUN, "spec.workloadMetadata", {"labels": LABELS_33}),
        "spec.workloadMetadata.labels",
        "must have at most 32 items",
        offline_text="at most 32",
    ),
    Rejection(
        "run-label-value-long",
        at(RUN, "spec.workloadMetadata", {"labels": {"a": "v" * 64}}),
        "spec.workloadMetadata.labels.a",
        "Too long",
        offline_path='spec.workloadMetadata.labels["a"]',
    ),
    Rejection(
        "run-test-scale-diagnose",
        at(RUN, "spec.orchestration", {"testScale": "diagnose"}),
        "spec.orchestration.testScale",
        "Unsupported value",
    ),
    Rejection(
        "cert-no-categories",
        at(CERT, "spec.categories", []),
        "spec.categories",
        "should have at least 1 items",
        offline_text="at least 1 items",
    ),
    Rejection(
        "cert-65-categories",
        at(CERT, "spec.categories", [{"domain": "d", "variant": "v"}] * 65),
        "spec.categories",
        "must have at most 64 items",
        offline_text="at most 64 items",
    ),
    Rejection(
        "cert-rdma-case",
        at(CERT, "spec.rdmaDeviceAccess", "HostPath"),
        "spec.rdmaDeviceAccess",
        'supported values: "hostPath", "devicePlugin"',
        offline_text='"hostPath", "devicePlugin"',
    ),
    Rejection(
        "cert-source-repo-git",
        at(CERT, "spec.sourceRepo", "git://h/r.git"),
        "spec.sourceRepo",
        "should match",
    ),
    Rejection(
        "cert-source-repo-shell",
        at(CERT, "spec.sourceRepo", "https://h/r.git;rm -rf /"),
        "spec.sourceRepo",
        "should match",
    ),
    Rejection(
        "cert-timeout-days", at(CERT, "spec.timeoutPerJob", "1d"), "spec.timeoutPerJob", "should match"
    ),
    Rejection("cert-max-bytes", at(CERT, "spec.maxBytes", "16GB"), "spec.maxBytes", "should match"),
    Rejection("cert-storage-size", at(CERT, "spec.storageSize", "10TB"), "spec.storageSize", "should match"),
    Rejection(
        "job-empty-workload",
        at(JOB, "spec.workload", {}),
        "spec.workload",
        "should have at least 1 properties",
        offline_text="at least 1 properties",
    ),
]

ACCEPTED_BOTH = [
    # (id, document): near misses both layers accept.
    ("run-limits", at(at(RUN, "spec.maxNodes", 0), "spec.deadline", "1h30m")),
    (
        "run-every-threshold-key",
        at(
            RUN,
            "spec.thresholds",
            {
                "busBandwidthGBps": "value >= 400",
                "algBandwidthGBps": "value == 487",
                "goodputRatio": "value > 0.9",
                "avgTFLOPsPerGPU": "value >= 400.0 && value <= 2000.0",
                "avgStepTimeSec": "value <= 3",
            },
        ),
    ),
    (
        "run-sample-interval-5s",
        at(RUN, "spec.bandwidthMeasurement", {"logProfileRef": "nccl-bandwidth", "sampleInterval": "5s"}),
    ),
    (
        "job-sample-interval-fraction",
        at(JOB, "spec.goodputMeasurement", {"logProfileRef": "megatron-training", "sampleInterval": "1.5m"}),
    ),
    (
        "job-health-eight-macros",
        at(
            JOB,
            "spec.nodeHealthMonitor",
            {"cel": {"expression": " || ".join(["node.spec.taints.exists(t, t.key == 'x')"] * 8)}},
        ),
    ),
    (
        "run-when-expression",
        at(
            RUN,
            "spec.overrides",
            [{"when": {"expression": "platform == 'aws' && domainCount > 1"}, "jobTemplate": {}}],
        ),
    ),
]
