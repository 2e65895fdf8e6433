"""The report builders and renderers (cli.md 4.5) on the objects nvcre writes."""

from __future__ import annotations

from typing import Any

from nvcre.report.build import CertificationObjects, WorkflowObjects, certification_report
from nvcre.report.text import render_text

SPEC_EXAMPLE = """\
╔════════════════════════════════════════════════════════════════╗
║                      Certification Report                      ║
╚════════════════════════════════════════════════════════════════╝

  Name:      cert-threshold
  Platform:  onprem
  GPU:       h100
  Nodes:     2

┌────────────────────────────────────────────────────────────────┐
│  training/nemotron5-8b                                         │
├────────────────────────────────────────────────────────────────┤
│  Status:    Failed                                             │
│  Reason:    1 groups failed across 1 iterations                │
│  Runtime:   10m 0s                                             │
│  Scale:     full-scale                                         │
│  Nodes/Job: 2                                                  │
│  Jobs:      1                                                  │
│                                                                │
│  Failed Groups:                                                │
│      ✗  group-0 (2 nodes)                                      │
│         Threshold "goodputRatio" violated: measured 0.8800,... │
│           - node001                                            │
│           - node002                                            │
└────────────────────────────────────────────────────────────────┘

┌────────────────────────────────────────────────────────────────┐
│  Summary                                                       │
├────────────────────────────────────────────────────────────────┤
│  Categories:   0/1 passed                                      │
│  Failed Nodes: none                                            │
│  Result:       FAILED                                          │
└────────────────────────────────────────────────────────────────┘
"""


def _condition(kind: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": at}


def _spec_example() -> CertificationObjects:
    """The objects behind cli.md 4.5's example (failed nodes not recorded, as in the reference)."""
    cert = {
        "metadata": {"name": "cert-threshold", "namespace": "ns"},
        "spec": {"categories": [{"domain": "training", "variant": "nemotron5-8b"}]},
        "status": {
            "conditions": [_condition("Failed", "WorkflowFailed", "x", "2026-01-01T00:10:00Z")],
            "categoryStatuses": [
                {
                    "domain": "training",
                    "variant": "nemotron5-8b",
                    "status": "Failed",
                    "workflowRef": {"name": "wf"},
                }
            ],
        },
    }
    workflow = {
        "metadata": {"name": "wf", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"orchestration": {}},
        "status": {
            "conditions": [
                _condition(
                    "Failed",
                    "JobValidationFailed",
                    "1 groups failed across 1 iterations",
                    "2026-01-01T00:10:00Z",
                )
            ],
            "orchestration": {
                "totalNodes": 2,
                "nodesPerJob": 2,
                "totalGroups": 1,
                "detectedPlatform": "onprem",
                "detectedGPUArchitecture": "h100",
                "groups": [
                    {
                        "name": "group-0",
                        "nodes": ["node001", "node002"],
                        "phase": "Failed",
                        "jobRef": {"name": "wf-job"},
                    }
                ],
            },
        },
    }
    job = {
        "metadata": {"name": "wf-job", "labels": {"nvcre.nvidia.com/group": "group-0"}},
        "spec": {"thresholds": {"goodputRatio": "value >= 0.95"}},
        "status": {
            "conditions": [
                _condition(
                    "ValidationFailed",
                    "ThresholdViolated",
                    'Threshold "goodputRatio" violated: measured 0.8800, expression: value >= 0.95',
                    "2026-01-01T00:10:00Z",
                )
            ]
        },
    }
    return CertificationObjects(cert, [WorkflowObjects(workflow, [job])])


def test_the_spec_example_renders_exactly() -> None:
    assert render_text(certification_report(_spec_example())) == SPEC_EXAMPLE
