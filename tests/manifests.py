"""Minimal valid manifests of each kind, and ``at`` to derive a variant, for rejection tests.

The same documents feed the offline validation tests and the admission tests on the real API
server, so both layers are held to one set of cases.
"""

from __future__ import annotations

import copy
from typing import Any

RUN: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "WorkloadRun",
    "metadata": {"name": "run"},
    "spec": {
        "image": "nvcr.io/nvidia/pytorch:26.01-py3",
        "framework": {"mpi": {"binary": "/bin/all_reduce_perf_mpi", "mpirunPath": "/usr/bin/mpirun"}},
        "numNodes": 2,
    },
}
CERT: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "cert"},
    "spec": {"target": {}, "categories": [{"domain": "communication", "variant": "nccl-all-reduce"}]},
}
JOB_SPEC: dict[str, Any] = {
    "workload": {
        "trainJob": {
            "runtimeRef": {"name": "rt", "kind": "TrainingRuntime"},
            "trainer": {"image": "img", "numNodes": 1},
        }
    }
}
JOB: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "job"},
    "spec": JOB_SPEC,
}
WORKFLOW: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "wf"},
    "spec": {"jobTemplate": {"spec": JOB_SPEC}, "orchestration": {}},
}
PROFILE: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "LogProfile",
    "metadata": {"name": "nccl"},
    "spec": {"timestamp": {"layout": "2006-01-02T15:04:05Z07:00"}, "patterns": {}},
}
BANDWIDTH: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "BandwidthMeasurement",
    "metadata": {"name": "bw"},
    "spec": {"logProfileRef": "nccl-bandwidth"},
}


def at(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``base`` with the dotted ``path`` set; the value ``<delete>`` removes it."""
    doc = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    if value == "<delete>":
        node.pop(last, None)
    else:
        node[last] = value
    return doc
