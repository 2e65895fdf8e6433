"""The validation contract of the CRDs, proven on the real API server.

Every rejected case asserts the API server's own cause: the field path and the message a user
reads from ``kubectl apply``. Each rejection has accepted neighbours, so a rule that rejects too
much fails here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from lightkube import ApiError, Client

from nvcre import resources
from nvcre.testing.builders import LogProfile
from nvcre.testing.rejections import ACCEPTED_BOTH, CERT, JOB, REJECTED_BOTH, RUN, WORKFLOW, at

KINDS = {
    "WorkloadRun": resources.WorkloadRun,
    "Certification": resources.Certification,
    "Job": resources.Job,
    "Workflow": resources.Workflow,
    "BandwidthMeasurement": resources.BandwidthMeasurement,
}


def create(kube: Client, namespace: str, doc: dict[str, Any]) -> Any:
    body = at(doc, "metadata.namespace", namespace)
    return kube.create(KINDS[doc["kind"]].from_dict(body))


def update(
    kube: Client, namespace: str, doc: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> None:
    live = kube.get(KINDS[doc["kind"]], doc["metadata"]["name"], namespace=namespace).to_dict()
    live.setdefault("apiVersion", doc["apiVersion"])
    live.setdefault("kind", doc["kind"])
    change(live)
    kube.replace(KINDS[doc["kind"]].from_dict(live))


def causes(error: ApiError) -> list[tuple[str, str]]:
    details = error.status.details
    return [(c.field or "", c.message or "") for c in (details.causes if details and details.causes else [])]


def assert_rejected(call: Callable[[], object], field: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status.code == 422, caught.value.status.message
    found = causes(caught.value)
    assert any(f == field and message in m for f, m in found), f"expected {field}: {message!r}; got {found}"


CREATE_REJECTED = [case.admission() for case in REJECTED_BOTH]  # `nvcrectl validate` rejects them alike


@pytest.mark.parametrize(
    ("doc", "field", "message"), [c[1:] for c in CREATE_REJECTED], ids=[c[0] for c in CREATE_REJECTED]
)
def test_create_rejected(kube: Client, namespace: str, doc: dict[str, Any], field: str, message: str) -> None:
    assert_rejected(lambda: create(kube, namespace, doc), field, message)


ACCEPTED = [
    ("mlnx-zero", at(RUN, "spec.mlnxPerNode", 0)),
    ("nic-rdma-ib", at(RUN, "spec.nicResourceName", "rdma/ib")),
    ("queue-empty", at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queue": ""})),
    ("queue-key-empty", at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queueLabelKey": ""})),
    (
        "runai",
        at(
            RUN,
            "spec.gangScheduler",
            {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue", "queue": "team-a"},
        ),
    ),
    (
        "labels-32-empty-values",
        at(RUN, "spec.workloadMetadata", {"labels": {f"l{i}": "" for i in range(32)}}),
    ),
    ("torch-module", at(RUN, "spec.framework", {"torch": {"module": "pkg.train"}})),
    ("cert-diagnose", at(CERT, "spec.testScale", "diagnose")),
    (
        "cert-patterns",
        at(at(at(CERT, "spec.timeoutPerJob", "2h30m"), "spec.maxBytes", "32G"), "spec.storageSize", "500Gi"),
    ),
    ("cert-source-repo", at(CERT, "spec.sourceRepo", "https://git.example.com/r.git")),
    ("cert-request-without-limit", at(CERT, "spec.resources", {"requests": {"cpu": "8", "memory": "32Gi"}})),
    ("cert-resources-within", at(CERT, "spec.resources", {"requests": {"cpu": "4"}, "limits": {"cpu": 6}})),
    *ACCEPTED_BOTH,
]


@pytest.mark.parametrize("doc", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_neighbours(kube: Client, namespace: str, doc: dict[str, Any]) -> None:
    create(kube, namespace, doc)


def _spec(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(live: dict[str, Any]) -> None:
        node = live["spec"]
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if value == "<delete>":
            node.pop(last, None)
        else:
            node[last] = value

    return change


JOB_WITH_EVERYTHING = at(
    at(
        at(JOB, "spec.workloadMetadata", {"labels": {"team": "a"}}),
        "spec.nodeHealthMonitor",
        {"cel": {"expression": "node.spec.unschedulable == true"}},
    ),
    "spec.goodputMeasurement",
    {"logProfileRef": "megatron-training"},
)
JOB_WITH_EVERYTHING = at(
    JOB_WITH_EVERYTHING,
    "spec.bandwidthMeasurement",
    {"logProfileRef": "nccl-bandwidth", "testType": "all_reduce"},
)
GANG = {"schedulerName": "kai-scheduler", "queue": "team-a", "queueLabelKey": "kai.scheduler/queue"}
WORKFLOW_GANG = at(WORKFLOW, "spec.gangScheduler", GANG)
WORKFLOW_LABELS = at(WORKFLOW, "spec.jobTemplate.spec.workloadMetadata", {"labels": {"team": "a"}})

UPDATE_REJECTED = [
    ("run-spec-frozen", RUN, _spec("numNodes", 8), "spec", "spec is immutable after creation"),
    ("cert-spec-frozen", CERT, _spec("nodesPerJob", 4), "spec", "spec is immutable after creation"),
    (
        "job-add-metadata",
        JOB,
        _spec("workloadMetadata", {"labels": {"a": "b"}}),
        "spec",
        "workloadMetadata cannot be added or removed after creation",
    ),
    (
        "job-remove-metadata",
        JOB_WITH_EVERYTHING,
        _spec("workloadMetadata", "<delete>"),
        "spec",
        "workloadMetadata cannot be added or removed after creation",
    ),
    (
        "job-change-label",
        JOB_WITH_EVERYTHING,
        _spec("workloadMetadata.labels.team", "b"),
        "spec.workloadMetadata",
        "workloadMetadata is immutable",
    ),
    (
        "job-add-label-key",
        JOB_WITH_EVERYTHING,
        _spec("workloadMetadata.labels.extra", "x"),
        "spec.workloadMetadata",
        "workloadMetadata is immutable",
    ),
    (
        "job-add-bandwidth",
        JOB,
        _spec("bandwidthMeasurement", {"logProfileRef": "nccl-bandwidth"}),
        "spec",
        "nodeHealthMonitor, goodputMeasurement, and bandwidthMeasurement cannot be added or removed after creation",
    ),
    (
        "job-remove-goodput",
        JOB_WITH_EVERYTHING,
        _spec("goodputMeasurement", "<delete>"),
        "spec",
        "nodeHealthMonitor, goodputMeasurement, and bandwidthMeasurement cannot be added or removed after creation",
    ),
    (
        "job-add-health",
        JOB,
        _spec("nodeHealthMonitor", {"cel": {"expression": "true"}}),
        "spec",
        "nodeHealthMonitor, goodputMeasurement, and bandwidthMeasurement cannot be added or removed after creation",
    ),
    (
        "job-change-health",
        JOB_WITH_EVERYTHING,
        _spec("nodeHealthMonitor.cel.expression", "false"),
        "spec.nodeHealthMonitor",
        "nodeHealthMonitor is immutable",
    ),
    (
        "job-change-bandwidth",
        JOB_WITH_EVERYTHING,
        _spec("bandwidthMeasurement.testType", "all_gather"),
        "spec.bandwidthMeasurement",
        "bandwidthMeasurement is immutable",
    ),
    (
        "job-change-goodput",
        JOB_WITH_EVERYTHING,
        _spec("goodputMeasurement.sampleInterval", "30s"),
        "spec.goodputMeasurement",
        "goodputMeasurement is immutable",
    ),
    (
        "job-change-workload",
        JOB,
        _spec("workload.trainJob.trainer.image", "other"),
        "spec.workload",
        "workload is immutable",
    ),
    (
        "workflow-remove-gang",
        WORKFLOW_GANG,
        _spec("gangScheduler", "<delete>"),
        "spec",
        "gangScheduler cannot be added or removed after creation",
    ),
    (
        "workflow-add-gang",
        WORKFLOW,
        _spec("gangScheduler", GANG),
        "spec",
        "gangScheduler cannot be added or removed after creation",
    ),
    (
        "workflow-change-queue",
        WORKFLOW_GANG,
        _spec("gangScheduler.queue", "team-b"),
        "spec.gangScheduler",
        "gangScheduler is immutable",
    ),
    (
        "workflow-template-labels",
        WORKFLOW_LABELS,
        _spec("jobTemplate.spec.workloadMetadata.labels.team", "b"),
        "spec.jobTemplate.spec.workloadMetadata",
        "workloadMetadata is immutable",
    ),
    (
        "workflow-template-workload",
        WORKFLOW,
        _spec("jobTemplate.spec.workload.trainJob.trainer.numNodes", 4),
        "spec.jobTemplate.spec.workload",
        "workload is immutable",
    ),
]


@pytest.mark.parametrize(
    ("doc", "change", "field", "message"),
    [c[1:] for c in UPDATE_REJECTED],
    ids=[c[0] for c in UPDATE_REJECTED],
)
def test_update_rejected(
    kube: Client,
    namespace: str,
    doc: dict[str, Any],
    change: Callable[[dict[str, Any]], None],
    field: str,
    message: str,
) -> None:
    create(kube, namespace, doc)
    assert_rejected(lambda: update(kube, namespace, doc, change), field, message)


UPDATE_ACCEPTED = [
    (
        "job-thresholds-editable",
        JOB_WITH_EVERYTHING,
        _spec("thresholds", {"busBandwidthGBps": "value >= 300"}),
    ),
    ("job-measurement-timeout-editable", JOB_WITH_EVERYTHING, _spec("measurementTimeout", "10m")),
    (
        "workflow-overrides-editable",
        WORKFLOW_GANG,
        _spec("overrides", [{"when": {}, "jobTemplate": {"metadata": {"labels": {"a": "b"}}}}]),
    ),
    ("workflow-same-gang", WORKFLOW_GANG, _spec("gangScheduler", dict(GANG))),
    ("run-metadata-editable", RUN, lambda live: live["metadata"].setdefault("labels", {}).update(x="y")),
]


@pytest.mark.parametrize(
    ("doc", "change"), [c[1:] for c in UPDATE_ACCEPTED], ids=[c[0] for c in UPDATE_ACCEPTED]
)
def test_update_accepted(
    kube: Client, namespace: str, doc: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> None:
    create(kube, namespace, doc)
    update(kube, namespace, doc, change)


def test_status_stays_writable_on_a_frozen_spec(kube: Client, namespace: str) -> None:
    live = create(kube, namespace, RUN).to_dict()
    live.update(apiVersion=RUN["apiVersion"], kind=RUN["kind"], status={"detectedPlatform": "aws"})
    kube.replace(resources.WorkloadRun.Status.from_dict(live), "run", namespace=namespace)
    assert kube.get(resources.WorkloadRun, "run", namespace=namespace).status["detectedPlatform"] == "aws"


def test_logprofile_defaults_are_materialised(kube: Client) -> None:
    profile = (
        LogProfile("admission-defaults")
        .spec(
            timestamp={"layout": "2006-01-02T15:04:05Z07:00"}, patterns={}, workerStrategy={"type": "Multi"}
        )
        .obj()
    )
    created = kube.create(resources.LogProfile.from_dict(profile))
    try:
        assert created.spec["workerStrategy"] == {
            "type": "Multi",
            "lifecyclePod": "first",
            "trainingStepPod": "first",
            "replicatedJobName": "trainer",
        }
        bad = at(at(profile, "metadata.name", "admission-bad"), "spec.workerStrategy", {"type": "single"})
        assert_rejected(
            lambda: kube.create(resources.LogProfile.from_dict(bad)),
            "spec.workerStrategy.type",
            "Unsupported value",
        )
    finally:
        kube.delete(resources.LogProfile, "admission-defaults")


@pytest.mark.parametrize(
    ("regex", "reason"),
    [
        (r"size=(?P<size>\d+", "missing closing ): `size=(?P<size>\\d+`"),
        (r"(?<=size=)(?P<size>\d+)", "invalid named capture"),  # look-behind is PCRE, not RE2
        (r"(?P<size>\d+) \1", "invalid escape sequence: `\\1`"),  # so is a back-reference
        (r"(?P<size>\d{1001})", "invalid repeat count"),
    ],
)
def test_a_logprofile_pattern_re2_cannot_compile_is_refused(kube: Client, regex: str, reason: str) -> None:
    """Refused at admission with RE2's reason and the field path; its neighbours (RE2's named
    groups in both forms, POSIX classes, \\Q..\\E, \\z) are accepted (fails on main: no rule)."""
    name = "admission-re2"
    profile: dict[str, Any] = (
        LogProfile(name)
        .spec(
            timestamp={"layout": "2006-01-02T15:04:05Z07:00"},
            patterns={
                "trainingStep": {"regex": r"\Qstep:\E (?<globalStep>[[:digit:]]+)\z"},
                "networkTransport": {"regex": r"NCCL INFO Using network (?P<transport>\S+)"},
            },
        )
        .obj()
    )
    kube.create(resources.LogProfile.from_dict(profile))
    try:
        bad = at(
            at(profile, "metadata.name", f"{name}-bad"), "spec.patterns.bandwidthResult", {"regex": regex}
        )
        assert_rejected(
            lambda: kube.create(resources.LogProfile.from_dict(bad)),
            "spec.patterns.bandwidthResult.regex",
            f"error parsing regexp: {reason}",
        )
        assert_rejected(
            lambda: kube.create(resources.LogProfile.from_dict(bad)),
            "spec.patterns.bandwidthResult.regex",
            "must be an RE2 regular expression (Go syntax)",
        )
    finally:
        kube.delete(resources.LogProfile, name)


def test_workflow_iterations_default_and_minimum(kube: Client, namespace: str) -> None:
    created = create(kube, namespace, WORKFLOW)
    assert created.spec["orchestration"]["iterations"] == 1
    assert_rejected(
        lambda: create(
            kube, namespace, at(at(WORKFLOW, "metadata.name", "wf2"), "spec.orchestration.iterations", 0)
        ),
        "spec.orchestration.iterations",
        "should be greater than or equal to 1",
    )
