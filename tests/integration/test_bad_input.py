"""Bad input ends a Workflow Failed with a message naming the field; the manager never crashes.

Each case runs against the module's shared ``nvcre-manager`` process: the bad Workflow fails
with a reason and a message naming the offending field, the process keeps its pid (no crash, no
restart), a good Workflow created afterwards still completes, and the failed one is left alone
(no hot loop of status writes).
The good Workflow's TrainJob is ended by hand: what is proven is the manager surviving bad input.
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client
from prometheus_client.parser import text_string_to_metric_families

from nvcre import resources
from nvcre.conditions import condition_of
from nvcre.testing.builders import pool_spec
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import POOL_LABEL, finish_trainjob, pool_name, workflow


def trio(kube: Client, namespace: str, name: str) -> dict[str, Any] | None:
    obj = kube.get(resources.Workflow, name, namespace=namespace).to_dict()
    true = [
        c
        for c in (obj.get("status") or {}).get("conditions") or ()
        if c["type"] in ("InProgress", "Succeeded", "Failed") and c["status"] == "True"
    ]
    return true[0] if true else None


def wait_trio(kube: Client, namespace: str, name: str, type_: str, timeout: float = 60) -> dict[str, Any]:
    return wait_for(
        lambda: (c := trio(kube, namespace, name)) and c["type"] == type_ and c,
        timeout,
        what=f"Workflow {namespace}/{name} {type_}=True",
    )


def counters(manager: ManagerProcess, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(sorted(sample.labels.values())): sample.value
        for family in text_string_to_metric_families(manager.metrics())
        for sample in family.samples
        if sample.name == name
    }


THIRTY = "[" + ",".join(["1"] * 30) + "]"
OVER_BUDGET = f"{THIRTY}.all(a, {THIRTY}.all(b, a == b))"
"""Within every compile-time limit (1.2 KB less than the API server allows), 900 evaluations of
its body: past the 2,000-step budget of an override expression, evaluated in the manager's loop."""

BAD = [
    pytest.param(
        {
            "overrides": [
                {
                    "when": {},
                    "jobTemplatePatch": [
                        {"op": "replace", "path": "/spec/workload/trainJob/trainer/nope", "value": 1}
                    ],
                }
            ]
        },
        "OverrideError",
        "spec.overrides[0].jobTemplatePatch[0]",
        id="override-json-patch-path",
    ),
    pytest.param(
        {
            "overrides": [
                {"when": {"expression": OVER_BUDGET}, "jobTemplate": {"metadata": {"labels": {"a": "b"}}}}
            ]
        },
        "OverrideError",
        "spec.overrides[0].when.expression: evaluating CEL expression",
        id="override-expression-over-budget",
    ),
    pytest.param(
        {"job_spec": {"checkpoint": {"pvcName": "ckpt"}}},
        "CheckpointPVCMissing",
        'Checkpoint requires PVC "ckpt" in dependencies',
        id="checkpoint-without-pvc",
    ),
    pytest.param(
        {
            "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "team-a"},
            "job_spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": "team-b"}}},
        },
        "GangSchedulingConflict",
        'spec.jobTemplate.spec.workloadMetadata.labels["kai.scheduler/queue"]',
        id="gang-queue-conflict",
    ),
    pytest.param(
        {"orchestration": {"target": {"nodeSelector": {POOL_LABEL: "no-such-pool"}}}},
        "NodeDiscoveryError",
        "No target nodes found matching orchestration target",
        id="no-target-nodes",
    ),
    pytest.param(
        {
            "dependencies": [
                {"apiVersion": "widgets.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
            ]
        },
        "DependencyCreationError",
        "Widget/w",
        id="unknown-dependency-kind",
    ),
]


@pytest.mark.parametrize(("spec", "reason", "names"), BAD)
def test_bad_input_fails_the_workflow_and_never_the_manager(
    kube: Client,
    namespace: str,
    gpu_nodes: Any,
    manager: ManagerProcess,
    spec: dict[str, Any],
    reason: str,
    names: str,
) -> None:
    pid = manager.pid
    pool = pool_name()
    gpu_nodes(2, pool_spec(pool))
    kube.create(resources.Workflow.from_dict(workflow("bad", namespace, pool, 0, **spec)))

    failed = wait_trio(kube, namespace, "bad", "Failed")
    assert failed["reason"] == reason
    assert names in failed["message"], failed["message"]
    assert manager.running() and manager.pid == pid, "the manager must not crash or restart"
    assert not list(kube.list(resources.Job, namespace=namespace)), "a failed build launches nothing"
    # Its last write: nothing was launched, so nothing is left to release.
    settled = wait_for(
        lambda: (
            (w := kube.get(resources.Workflow, "bad", namespace=namespace).to_dict())
            and (condition_of(w, "ResourcesReleased") or {}).get("status") == "True"
            and w["metadata"]["resourceVersion"]
        ),
        60,
        what="the bad Workflow ResourcesReleased",
    )

    # The same process keeps serving other objects.
    kube.create(resources.Workflow.from_dict(workflow("good", namespace, pool, 0)))
    wait_for(
        lambda: kube.get(resources.TrainJob, "good-job-workload", namespace=namespace),
        60,
        what="the good Workflow's TrainJob",
        ignore=(Exception,),
    )
    finish_trainjob(kube, namespace, "good-job-workload", succeeded=True)
    wait_trio(kube, namespace, "good", "Succeeded")

    assert manager.running() and manager.pid == pid
    assert kube.get(resources.Workflow, "bad", namespace=namespace).metadata.resourceVersion == settled, (
        "a Failed Workflow is terminal: no further writes"
    )
    reconciles = counters(manager, "controller_runtime_reconcile_total")
    assert reconciles.get(("success", "workflow"), 0) > 0
    assert reconciles.get(("job", "success"), 0) > 0
