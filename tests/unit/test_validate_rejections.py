"""Invalid manifests are rejected offline with the field path a user can act on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nvcre.cel import compile_expression
from nvcre.testing.rejections import (
    ACCEPTED_BOTH,
    BANDWIDTH,
    CERT,
    JOB,
    NINE_MACROS,
    PROFILE,
    REJECTED_BOTH,
    RUN,
    WORKFLOW,
    at,
)
from nvcre.validation import rules
from nvcre.validation.manifests import SCHEMAS, check_object

TEN = "[" + ", ".join("0123456789") + "]"
NESTED_THREE = f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, value > 0.0)))"
HUNDRED = "[" + ", ".join(["1"] * 100) + "]"
HUNDRED_SQUARED = f"{HUNDRED}.all(a, {HUNDRED}.all(b, a == b))"

CASES = [
    # (id, document, expected path, text in the message)
    ("run-empty-image", at(RUN, "spec.image", ""), "spec.image", "at least 1 chars"),
    ("run-nodes-string", at(RUN, "spec.numNodes", "four"), "spec.numNodes", "must be of type integer"),
    (
        "run-torch-empty-script",
        at(RUN, "spec.framework", {"torch": {"script": ""}}),
        "spec.framework.torch.script",
        "at least 1 chars",
    ),
    (
        "run-mlnx-negative",
        at(RUN, "spec.mlnxPerNode", -1),
        "spec.mlnxPerNode",
        "greater than or equal to 0",
    ),
    (
        "run-queue-too-long",
        at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queue": "q" * 64}),
        "spec.gangScheduler.queue",
        "Too long",
    ),
    (
        "run-label-value-pattern",
        at(RUN, "spec.workloadMetadata", {"labels": {"a": "-x"}}),
        'spec.workloadMetadata.labels["a"]',
        "should match",
    ),
    (
        "run-placement-enum",
        at(RUN, "spec.orchestration", {"placement": "pinned"}),
        "spec.orchestration.placement",
        "Unsupported value",
    ),
    (
        "run-repeat-zero",
        at(RUN, "spec.orchestration", {"repeatCount": 0}),
        "spec.orchestration.repeatCount",
        "greater than or equal to 1",
    ),
    (
        "run-checkpoint-size",
        at(RUN, "spec.checkpoint", {"storageSize": "10TB"}),
        "spec.checkpoint.storageSize",
        "should match",
    ),
    (
        "run-checkpoint-no-size",
        at(RUN, "spec.checkpoint", {}),
        "spec.checkpoint.storageSize",
        "Required value",
    ),
    (
        "run-env-unknown-field",
        at(RUN, "spec.env", [{"name": "A", "valeu": "b"}]),
        "spec.env[0].valeu",
        "Unknown field",
    ),
    ("run-env-no-name", at(RUN, "spec.env", [{"value": "b"}]), "spec.env[0].name", "Required value"),
    (
        "run-volume-mount-no-path",
        at(RUN, "spec.volumeMounts", [{"name": "d"}]),
        "spec.volumeMounts[0].mountPath",
        "Required value",
    ),
    (
        "run-init-container-no-name",
        at(RUN, "spec.initContainers", [{"image": "x"}]),
        "spec.initContainers[0].name",
        "Required value",
    ),
    ("run-unknown-spec-field", at(RUN, "spec.numnodes", 2), "spec.numnodes", "Unknown field"),
    (
        "run-measurement-no-profile",
        at(RUN, "spec.bandwidthMeasurement", {"testType": "all_reduce"}),
        "spec.bandwidthMeasurement.logProfileRef",
        "Required value",
    ),
    (
        "run-override-no-when",
        at(RUN, "spec.overrides", [{"jobTemplate": {}}]),
        "spec.overrides[0].when",
        "Required value",
    ),
    (
        "run-target-expression-operator",
        at(RUN, "spec.target", {"matchExpressions": [{"operator": "In"}]}),
        "spec.target.matchExpressions[0].key",
        "Required value",
    ),
    ("cert-no-target", at(CERT, "spec.target", "<delete>"), "spec.target", "Required value"),
    (
        "cert-category-no-variant",
        at(CERT, "spec.categories", [{"domain": "d"}]),
        "spec.categories[0].variant",
        "Required value",
    ),
    (
        "cert-category-twice-alike",
        at(CERT, "spec.categories", [{"domain": "d", "variant": "v"}, {"domain": "d", "variant": "v"}]),
        "spec.categories[1]",
        'categories d/v (spec.categories[0]) and d/v (spec.categories[1]) would both run as Workflow "',
    ),
    ("cert-max-steps", at(CERT, "spec.maxSteps", -2), "spec.maxSteps", "greater than or equal to -1"),
    ("cert-image-long", at(CERT, "spec.image", "i" * 513), "spec.image", "Too long"),
    ("cert-test-scale", at(CERT, "spec.testScale", "everything"), "spec.testScale", "Unsupported value"),
    (
        "cert-resources-long",
        at(CERT, "spec.resources", {"limits": {"cpu": "1" * 33}}),
        "spec.resources.limits.cpu",
        "Too long",
    ),
    (
        "cert-category-option",
        at(CERT, "spec.categories", [{"domain": "d", "variant": "v", "options": {"nodesPerJob": 0}}]),
        "spec.categories[0].options.nodesPerJob",
        "greater than or equal to 1",
    ),
    ("job-no-workload", at(JOB, "spec.workload", "<delete>"), "spec.workload", "Required value"),
    (
        "job-trainjob-no-runtime",
        at(JOB, "spec.workload", {"trainJob": {}}),
        "spec.workload.trainJob.runtimeRef",
        "Required value",
    ),
    (
        "job-health-expression-empty",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": ""}}),
        "spec.nodeHealthMonitor.cel.expression",
        "at least 1 chars",
    ),
    (
        "job-stall-multiplier",
        at(JOB, "spec.stallMultiplier", 0),
        "spec.stallMultiplier",
        "greater than or equal to 1",
    ),
    (
        "workflow-no-orchestration",
        at(WORKFLOW, "spec.orchestration", "<delete>"),
        "spec.orchestration",
        "Required value",
    ),
    (
        "workflow-iterations-zero",
        at(WORKFLOW, "spec.orchestration", {"iterations": 0}),
        "spec.orchestration.iterations",
        "greater than or equal to 1",
    ),
    (
        "workflow-topology-key",
        at(WORKFLOW, "spec.orchestration", {"topology": {"topologyKey": ""}}),
        "spec.orchestration.topology.topologyKey",
        "at least 1 chars",
    ),
    (
        "workflow-dependency-kind",
        at(WORKFLOW, "spec.dependencies", [{"apiVersion": "v1", "metadata": {"name": "x"}}]),
        "spec.dependencies[0].kind",
        "must not be empty",
    ),
    (
        "profile-worker-enum",
        at(PROFILE, "spec.workerStrategy", {"type": "single"}),
        "spec.workerStrategy.type",
        "Unsupported value",
    ),
    ("profile-no-layout", at(PROFILE, "spec.timestamp", {}), "spec.timestamp.layout", "Required value"),
    (
        "profile-unit-enum",
        at(PROFILE, "spec.patterns", {"trainingStep": {"regex": "x", "units": {"t": "h"}}}),
        'spec.patterns.trainingStep.units["t"]',
        "Unsupported value",
    ),
    (
        "bandwidth-empty-profile",
        at(BANDWIDTH, "spec.logProfileRef", ""),
        "spec.logProfileRef",
        "at least 1 chars",
    ),
    # What only nvcre's own code finds (the API server cannot compile CEL or regular expressions):
    # before, each of these passed validation and failed only once the workload had run.
    (
        "run-threshold-syntax",
        at(RUN, "spec.thresholds", {"busBandwidthGBps": "value >="}),
        'spec.thresholds["busBandwidthGBps"]',
        'Invalid value: "value >=": syntax error at line 1, column 7',
    ),
    (
        "run-threshold-not-boolean",
        at(RUN, "spec.thresholds", {"goodputRatio": "value * 2.0"}),
        'spec.thresholds["goodputRatio"]',
        "must evaluate to bool, got double",
    ),
    (
        "run-threshold-typo",
        at(RUN, "spec.thresholds", {"goodputRatio": "vlaue > 0.9"}),
        'spec.thresholds["goodputRatio"]',
        "undeclared reference to 'vlaue'",
    ),
    (
        "run-threshold-string-comparison",
        at(RUN, "spec.thresholds", {"avgStepTimeSec": "value < '3'"}),
        'spec.thresholds["avgStepTimeSec"]',
        "no matching overload for '<' applied to (double, string)",
    ),
    (
        "run-threshold-nested-macros",
        at(RUN, "spec.thresholds", {"busBandwidthGBps": NESTED_THREE}),
        'spec.thresholds["busBandwidthGBps"]',
        "comprehension macros nested 3 deep, at most 2",
    ),
    (
        "cert-category-threshold-not-boolean",
        at(
            CERT,
            "spec.categories",
            [{"domain": "d", "variant": "v", "options": {"thresholds": {"goodputRatio": "value"}}}],
        ),
        'spec.categories[0].options.thresholds["goodputRatio"]',
        "must evaluate to bool, got double",
    ),
    (
        "workflow-template-threshold-syntax",
        at(WORKFLOW, "spec.jobTemplate.spec.thresholds", {"busBandwidthGBps": "value >"}),
        'spec.jobTemplate.spec.thresholds["busBandwidthGBps"]',
        "syntax error",
    ),
    (
        "job-health-syntax",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": "node.spec.unschedulable =="}}),
        "spec.nodeHealthMonitor.cel.expression",
        "syntax error",
    ),
    (
        "job-health-not-boolean",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": "node.metadata.name"}}),
        "spec.nodeHealthMonitor.cel.expression",
        "must evaluate to bool, got string",
    ),
    (
        "job-health-typo",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": "nodes.spec.unschedulable"}}),
        "spec.nodeHealthMonitor.cel.expression",
        "undeclared reference to 'nodes'",
    ),
    (
        "job-health-over-budget",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": HUNDRED_SQUARED}}),
        "spec.nodeHealthMonitor.cel.expression",
        "exceeded the evaluation budget of 10000 steps",
    ),
    (
        "job-health-reduce",
        at(JOB, "spec.nodeHealthMonitor", {"cel": {"expression": "[1, 2].reduce(r, i, 'a', r + r) == ''"}}),
        "spec.nodeHealthMonitor.cel.expression",
        "reduce() is not a CEL macro",
    ),
    (
        "run-when-typo",
        at(RUN, "spec.overrides", [{"when": {"expression": "platfrom == 'aws'"}, "jobTemplate": {}}]),
        "spec.overrides[0].when.expression",
        "undeclared reference to 'platfrom'",
    ),
    (
        "run-when-nine-macros",
        at(RUN, "spec.overrides", [{"when": {"expression": NINE_MACROS}, "jobTemplate": {}}]),
        "spec.overrides[0].when.expression",
        "calls 9 comprehension macros (all, exists, exists_one, map, filter), at most 8",
    ),
    (
        "workflow-override-threshold-key",
        at(
            WORKFLOW,
            "spec.overrides",
            [{"when": {}, "jobTemplate": {"spec": {"thresholds": {"busBW": "value > 1"}}}}],
        ),
        "spec.overrides[0].jobTemplate.spec.thresholds",
        "unknown threshold key(s) [busBW]",
    ),
    (
        "workflow-dependency-when-syntax",
        at(
            WORKFLOW,
            "spec.dependencies",
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "c"},
                    "when": {"expression": "("},
                }
            ],
        ),
        "spec.dependencies[0].when.expression",
        "syntax error",
    ),
    (
        "run-bandwidth-profile-without-rows",
        at(RUN, "spec.bandwidthMeasurement", {"logProfileRef": "megatron-training"}),
        "spec.bandwidthMeasurement.logProfileRef",
        'LogProfile "megatron-training" has no spec.patterns.bandwidthResult (nor spec.reader: NcclTests), '
        "which this measurement reads",
    ),
    (
        "goodput-profile-without-steps",
        at(at(BANDWIDTH, "kind", "GoodputMeasurement"), "spec.logProfileRef", "nccl-bandwidth"),
        "spec.logProfileRef",
        'LogProfile "nccl-bandwidth" has no spec.patterns.trainingStep',
    ),
    (
        "profile-regex-does-not-compile",
        at(PROFILE, "spec.patterns", {"trainingStep": {"regex": "iteration (?P<iteration>[0-9]+"}}),
        "spec.patterns.trainingStep.regex",
        "missing )",
    ),
    (
        "profile-bandwidth-groups",
        at(PROFILE, "spec.patterns", {"bandwidthResult": {"regex": "(?P<size>[0-9]+)"}}),
        "spec.patterns.bandwidthResult.regex",
        "must capture the named group(s) ['algBW', 'busBW']",
    ),
    *(case.offline() for case in REJECTED_BOTH),
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
        at(RUN, "spec.mlnxPerNode", 0),
        at(RUN, "spec.nicResourceName", "rdma/ib"),
        at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queue": ""}),
        at(RUN, "spec.gangScheduler", {"schedulerName": "kai", "queueLabelKey": ""}),
        at(RUN, "spec.gangScheduler", {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue"}),
        at(RUN, "spec.workloadMetadata", {"labels": {f"l{i}": "" for i in range(32)}}),
        at(RUN, "spec.framework", {"torch": {"module": "pkg.train"}}),
        at(CERT, "spec.testScale", "diagnose"),
        at(
            CERT,
            "spec.categories",
            [{"domain": "d", "variant": "v"}, {"domain": "d", "variant": "v", "options": {"nodesPerJob": 2}}],
        ),
        at(CERT, "spec.timeoutPerJob", "2h30m"),
        at(CERT, "spec.maxBytes", "32G"),
        at(CERT, "spec.storageSize", "500Gi"),
        at(CERT, "spec.sourceRepo", "https://git.example.com/r.git"),
        at(CERT, "spec.resources", {"requests": {"cpu": 4, "memory": "32Gi"}}),
        at(PROFILE, "spec.workerStrategy", {"type": "Multi"}),
        WORKFLOW,
        JOB,
        *(document for _, document in ACCEPTED_BOTH),
        at(
            JOB,
            "spec.nodeHealthMonitor",
            {"cel": {"expression": "'gpud.nvidia.com/unhealthy' in node.metadata.labels"}},
        ),
        at(
            JOB,
            "spec.nodeHealthMonitor",
            {"cel": {"expression": "node.metadata.labels['gpud.nvidia.com/state'] == 'unhealthy'"}},
        ),
        at(RUN, "spec.goodputMeasurement", {"logProfileRef": "nemo-training", "sampleInterval": "30s"}),
        at(WORKFLOW, "spec.overrides", [{"when": {"expression": "config.a.b == 1"}, "jobTemplate": {}}]),
    ],
    ids=lambda d: d["kind"],
)
def test_accepted_neighbours(document: dict[str, Any]) -> None:
    report = check_object(document, "test.yaml", 0)
    assert report.ok, [str(f) for f in report.findings]


def test_logprofile_worker_strategy_defaults() -> None:
    report = check_object(at(PROFILE, "spec.workerStrategy", {"type": "Multi"}), "p.yaml", 0)
    assert report.resource is not None
    strategy = report.resource.to_dict()["spec"]["workerStrategy"]
    assert strategy == {
        "type": "Multi",
        "lifecyclePod": "first",
        "trainingStepPod": "first",
        "replicatedJobName": "trainer",
    }


def test_every_crd_rule_is_evaluated_offline_or_checked_there_by_nvcres_own_code() -> None:
    """A CEL rule a future CRD change adds with a function the offline engine lacks would pass
    every file silently: each rule compiles here, or is a transition rule, or is one of those
    nvcre checks offline by its own code."""
    found: list[str] = []
    messages: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for validation in node.get("x-kubernetes-validations") or ():
                found.append(str(validation["rule"]))
                messages.extend(
                    [validation["messageExpression"]] if "messageExpression" in validation else []
                )
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    for path in sorted(SCHEMAS.glob("*.json")):
        walk(json.loads(path.read_text()))
    evaluated = [rule for rule in found if rules.offline(rule)]
    assert len(evaluated) >= 25, evaluated
    for rule in evaluated:
        compile_expression(rule)  # raises CELError on a function it does not know
    assert messages, "no rule states its values"
    for expression in messages:
        compile_expression(expression)
    assert {r for r in found if not rules.offline(r) and "oldSelf" not in r} == {
        "''.matches(self) || !''.matches(self)",
        "self.findAll('[.][[:space:]]*(all|exists|exists_one|map|filter)[[:space:]]*[(]').size() <= 8",
    }


def test_a_message_expression_states_the_values_and_its_failure_falls_back_to_the_message() -> None:
    schema = {
        "x-kubernetes-validations": [
            {
                "rule": "self.a <= self.b",
                "message": "a must not exceed b",
                "messageExpression": "'a ' + string(self.a)",
            },
            {
                "rule": "self.a <= self.b",
                "message": "the fallback",
                "messageExpression": "'c ' + string(self.c)",
            },
        ]
    }
    assert rules.violations(schema, {"a": 3, "b": 2}) == [
        'Invalid value: "object": a 3',
        'Invalid value: "object": the fallback',
    ]
