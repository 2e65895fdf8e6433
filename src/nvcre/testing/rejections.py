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

    def admission(self) -> tuple[str, dict[str, Any], str, str]:
        return (self.id, self.document, self.path, self.text)

    def offline(self) -> tuple[str, dict[str, Any], str, str]:
        return (self.id, self.document, self.offline_path or self.path, self.text)


REJECTED_BOTH = [
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
]

ACCEPTED_BOTH = [
    # (id, document): near misses both layers accept.
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
