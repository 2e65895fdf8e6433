"""Invalid manifests are rejected offline with the field path a user can act on."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nvcre.validation.manifests import check_object

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
JOB: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "job"},
    "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "rt", "kind": "TrainingRuntime"}}}},
}
WORKFLOW: dict[str, Any] = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "wf"},
    "spec": {"jobTemplate": {"spec": JOB["spec"]}, "orchestration": {}},
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


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``base`` with the dotted ``path`` set (``<delete>`` removes it)."""
    doc = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    if value == "<delete>":
        del node[last]
    else:
        node[last] = value
    return doc


LABELS_33 = {f"l{i}": "v" for i in range(33)}

CASES = [
    # (id, document, expected path, text in the message)
    ("run-no-image", _with(RUN, "spec.image", "<delete>"), "spec.image", "Required value"),
    ("run-empty-image", _with(RUN, "spec.image", ""), "spec.image", "at least 1 chars"),
    ("run-zero-nodes", _with(RUN, "spec.numNodes", 0), "spec.numNodes", "greater than or equal to 1"),
    ("run-nodes-string", _with(RUN, "spec.numNodes", "four"), "spec.numNodes", "must be of type integer"),
    ("run-framework-empty", _with(RUN, "spec.framework", {}), "spec.framework", "at least 1 properties"),
    (
        "run-framework-two",
        _with(RUN, "spec.framework", {"torch": {"script": "a.py"}, "exec": {"command": ["x"]}}),
        "spec.framework",
        "must have at most 1 items",
    ),
    (
        "run-mpi-no-mpirun",
        _with(RUN, "spec.framework.mpi.mpirunPath", "<delete>"),
        "spec.framework.mpi.mpirunPath",
        "Required value",
    ),
    (
        "run-exec-empty-command",
        _with(RUN, "spec.framework", {"exec": {"command": []}}),
        "spec.framework.exec.command",
        "at least 1 items",
    ),
    (
        "run-torch-empty-script",
        _with(RUN, "spec.framework", {"torch": {"script": ""}}),
        "spec.framework.torch.script",
        "at least 1 chars",
    ),
    ("run-gpus-zero", _with(RUN, "spec.gpusPerNode", 0), "spec.gpusPerNode", "greater than or equal to 1"),
    (
        "run-mlnx-negative",
        _with(RUN, "spec.mlnxPerNode", -1),
        "spec.mlnxPerNode",
        "greater than or equal to 0",
    ),
    ("run-nic-no-slash", _with(RUN, "spec.nicResourceName", "ib"), "spec.nicResourceName", "should match"),
    (
        "run-nic-long-name",
        _with(RUN, "spec.nicResourceName", "rdma/" + "a" * 64),
        "spec.nicResourceName",
        "should match",
    ),
    (
        "run-queue-pattern",
        _with(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queue": "-team"}),
        "spec.gangScheduler.queue",
        "should match",
    ),
    (
        "run-queue-too-long",
        _with(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queue": "q" * 64}),
        "spec.gangScheduler.queue",
        "Too long",
    ),
    (
        "run-gang-no-scheduler",
        _with(RUN, "spec.gangScheduler", {}),
        "spec.gangScheduler.schedulerName",
        "Required value",
    ),
    (
        "run-gang-empty-scheduler",
        _with(RUN, "spec.gangScheduler", {"schedulerName": ""}),
        "spec.gangScheduler.schedulerName",
        "at least 1 chars",
    ),
    (
        "run-queue-key-grammar",
        _with(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queueLabelKey": "bad key"}),
        "spec.gangScheduler.queueLabelKey",
        "should match",
    ),
    (
        "run-labels-33",
        _with(RUN, "spec.workloadMetadata", {"labels": LABELS_33}),
        "spec.workloadMetadata.labels",
        "at most 32",
    ),
    (
        "run-label-value-long",
        _with(RUN, "spec.workloadMetadata", {"labels": {"a": "v" * 64}}),
        'spec.workloadMetadata.labels["a"]',
        "Too long",
    ),
    (
        "run-label-value-pattern",
        _with(RUN, "spec.workloadMetadata", {"labels": {"a": "-x"}}),
        'spec.workloadMetadata.labels["a"]',
        "should match",
    ),
    (
        "run-test-scale-diagnose",
        _with(RUN, "spec.orchestration", {"testScale": "diagnose"}),
        "spec.orchestration.testScale",
        "Unsupported value",
    ),
    (
        "run-placement-enum",
        _with(RUN, "spec.orchestration", {"placement": "pinned"}),
        "spec.orchestration.placement",
        "Unsupported value",
    ),
    (
        "run-repeat-zero",
        _with(RUN, "spec.orchestration", {"repeatCount": 0}),
        "spec.orchestration.repeatCount",
        "greater than or equal to 1",
    ),
    (
        "run-checkpoint-size",
        _with(RUN, "spec.checkpoint", {"storageSize": "10TB"}),
        "spec.checkpoint.storageSize",
        "should match",
    ),
    (
        "run-checkpoint-no-size",
        _with(RUN, "spec.checkpoint", {}),
        "spec.checkpoint.storageSize",
        "Required value",
    ),
    (
        "run-env-unknown-field",
        _with(RUN, "spec.env", [{"name": "A", "valeu": "b"}]),
        "spec.env[0].valeu",
        "Unknown field",
    ),
    ("run-env-no-name", _with(RUN, "spec.env", [{"value": "b"}]), "spec.env[0].name", "Required value"),
    (
        "run-volume-mount-no-path",
        _with(RUN, "spec.volumeMounts", [{"name": "d"}]),
        "spec.volumeMounts[0].mountPath",
        "Required value",
    ),
    (
        "run-init-container-no-name",
        _with(RUN, "spec.initContainers", [{"image": "x"}]),
        "spec.initContainers[0].name",
        "Required value",
    ),
    ("run-unknown-spec-field", _with(RUN, "spec.numnodes", 2), "spec.numnodes", "Unknown field"),
    (
        "run-measurement-no-profile",
        _with(RUN, "spec.bandwidthMeasurement", {"testType": "all_reduce"}),
        "spec.bandwidthMeasurement.logProfileRef",
        "Required value",
    ),
    (
        "run-override-no-when",
        _with(RUN, "spec.overrides", [{"jobTemplate": {}}]),
        "spec.overrides[0].when",
        "Required value",
    ),
    (
        "run-target-expression-operator",
        _with(RUN, "spec.target", {"matchExpressions": [{"operator": "In"}]}),
        "spec.target.matchExpressions[0].key",
        "Required value",
    ),
    ("cert-no-categories", _with(CERT, "spec.categories", []), "spec.categories", "at least 1 items"),
    (
        "cert-65-categories",
        _with(CERT, "spec.categories", [{"domain": "d", "variant": "v"}] * 65),
        "spec.categories",
        "at most 64 items",
    ),
    ("cert-no-target", _with(CERT, "spec.target", "<delete>"), "spec.target", "Required value"),
    (
        "cert-category-no-variant",
        _with(CERT, "spec.categories", [{"domain": "d"}]),
        "spec.categories[0].variant",
        "Required value",
    ),
    (
        "cert-rdma-case",
        _with(CERT, "spec.rdmaDeviceAccess", "HostPath"),
        "spec.rdmaDeviceAccess",
        '"hostPath", "devicePlugin"',
    ),
    (
        "cert-source-repo-git",
        _with(CERT, "spec.sourceRepo", "git://h/r.git"),
        "spec.sourceRepo",
        "should match",
    ),
    (
        "cert-source-repo-shell",
        _with(CERT, "spec.sourceRepo", "https://h/r.git;rm -rf /"),
        "spec.sourceRepo",
        "should match",
    ),
    ("cert-timeout-days", _with(CERT, "spec.timeoutPerJob", "1d"), "spec.timeoutPerJob", "should match"),
    ("cert-max-bytes", _with(CERT, "spec.maxBytes", "16GB"), "spec.maxBytes", "should match"),
    ("cert-storage-size", _with(CERT, "spec.storageSize", "10TB"), "spec.storageSize", "should match"),
    ("cert-max-steps", _with(CERT, "spec.maxSteps", -2), "spec.maxSteps", "greater than or equal to -1"),
    ("cert-image-long", _with(CERT, "spec.image", "i" * 513), "spec.image", "Too long"),
    ("cert-test-scale", _with(CERT, "spec.testScale", "everything"), "spec.testScale", "Unsupported value"),
    (
        "cert-resources-long",
        _with(CERT, "spec.resources", {"limits": {"cpu": "1" * 33}}),
        "spec.resources.limits.cpu",
        "Too long",
    ),
    (
        "cert-category-option",
        _with(CERT, "spec.categories", [{"domain": "d", "variant": "v", "options": {"nodesPerJob": 0}}]),
        "spec.categories[0].options.nodesPerJob",
        "greater than or equal to 1",
    ),
    ("job-no-workload", _with(JOB, "spec.workload", "<delete>"), "spec.workload", "Required value"),
    ("job-empty-workload", _with(JOB, "spec.workload", {}), "spec.workload", "at least 1 properties"),
    (
        "job-trainjob-no-runtime",
        _with(JOB, "spec.workload", {"trainJob": {}}),
        "spec.workload.trainJob.runtimeRef",
        "Required value",
    ),
    (
        "job-health-expression-empty",
        _with(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": ""}}),
        "spec.nodeHealthMonitor.cel.expression",
        "at least 1 chars",
    ),
    (
        "job-stall-multiplier",
        _with(JOB, "spec.stallMultiplier", 0),
        "spec.stallMultiplier",
        "greater than or equal to 1",
    ),
    (
        "workflow-no-orchestration",
        _with(WORKFLOW, "spec.orchestration", "<delete>"),
        "spec.orchestration",
        "Required value",
    ),
    (
        "workflow-iterations-zero",
        _with(WORKFLOW, "spec.orchestration", {"iterations": 0}),
        "spec.orchestration.iterations",
        "greater than or equal to 1",
    ),
    (
        "workflow-topology-key",
        _with(WORKFLOW, "spec.orchestration", {"topology": {"topologyKey": ""}}),
        "spec.orchestration.topology.topologyKey",
        "at least 1 chars",
    ),
    (
        "workflow-dependency-kind",
        _with(WORKFLOW, "spec.dependencies", [{"apiVersion": "v1", "metadata": {"name": "x"}}]),
        "spec.dependencies[0].kind",
        "must not be empty",
    ),
    (
        "profile-worker-enum",
        _with(PROFILE, "spec.workerStrategy", {"type": "single"}),
        "spec.workerStrategy.type",
        "Unsupported value",
    ),
    ("profile-no-layout", _with(PROFILE, "spec.timestamp", {}), "spec.timestamp.layout", "Required value"),
    (
        "profile-unit-enum",
        _with(PROFILE, "spec.patterns", {"trainingStep": {"regex": "x", "units": {"t": "h"}}}),
        'spec.patterns.trainingStep.units["t"]',
        "Unsupported value",
    ),
    (
        "bandwidth-empty-profile",
        _with(BANDWIDTH, "spec.logProfileRef", ""),
        "spec.logProfileRef",
        "at least 1 chars",
    ),
]


@pytest.mark.parametrize(("document", "path", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rejected_with_field_path(document: dict[str, Any], path: str, text: str) -> None:
    report = check_object(document, "test.yaml", 0)
    assert not report.ok
    matching = [f for f in report.findings if f.path == path]
    assert matching, f"no finding at {path}: {[str(f) for f in report.findings]}"
    assert any(text in f.message for f in matching), [str(f) for f in matching]


@pytest.mark.parametrize(
    "document",
    [
        _with(RUN, "spec.mlnxPerNode", 0),
        _with(RUN, "spec.nicResourceName", "rdma/ib"),
        _with(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queue": ""}),
        _with(
            RUN, "spec.gangScheduler", {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue"}
        ),
        _with(RUN, "spec.workloadMetadata", {"labels": {f"l{i}": "" for i in range(32)}}),
        _with(RUN, "spec.framework", {"torch": {"module": "pkg.train"}}),
        _with(CERT, "spec.testScale", "diagnose"),
        _with(CERT, "spec.timeoutPerJob", "2h30m"),
        _with(CERT, "spec.maxBytes", "32G"),
        _with(CERT, "spec.storageSize", "500Gi"),
        _with(CERT, "spec.sourceRepo", "https://git.example.com/r.git"),
        _with(CERT, "spec.resources", {"requests": {"cpu": 4, "memory": "32Gi"}}),
        _with(PROFILE, "spec.workerStrategy", {"type": "Multi"}),
        WORKFLOW,
        JOB,
    ],
    ids=lambda d: d["kind"],
)
def test_accepted_neighbours(document: dict[str, Any]) -> None:
    report = check_object(document, "test.yaml", 0)
    assert report.ok, [str(f) for f in report.findings]


def test_logprofile_worker_strategy_defaults() -> None:
    report = check_object(_with(PROFILE, "spec.workerStrategy", {"type": "Multi"}), "p.yaml", 0)
    assert report.resource is not None
    strategy = report.resource.to_dict()["spec"]["workerStrategy"]
    assert strategy == {
        "type": "Multi",
        "lifecyclePod": "first",
        "trainingStepPod": "first",
        "replicatedJobName": "trainer",
    }
