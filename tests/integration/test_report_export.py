"""ReportExportPolicy / ReportExport on the real API server with the real manager: an ended
Certification's JSON report reaches a local HTTPS webhook (its CA in the policy), signed with the
policy's Secret; a webhook that answers 500 twice is retried until its 200; one that answers 400
is not retried, and the export says why (a new retryNonce sends it again); a cancelled export is
not sent again.

The Certifications run through the real controllers on kwok GPU nodes; the test plays Kubeflow
Trainer (it ends the one category's TrainJob).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap, Event, Secret
from lightkube.types import PatchType

from nvcre import resources
from nvcre.api.v1alpha1.reportexport import CLUSTER_HEADER, DELIVERY_HEADER, REPORT_HEADER, SIGNATURE_HEADER
from nvcre.cli.report_io import read_certification_report
from nvcre.naming import certification_workflow_name
from nvcre.report.jsonreport import to_json
from nvcre.testing.builders import new_pool
from nvcre.testing.inspect import get, recorded_workflows
from nvcre.testing.waiting import wait_for
from nvcre.testing.webhook import Webhook, policy, run_certification

SIGNING_KEY = b"report-signing-key-123"
TOKEN = "bearer-token-456"


def _events(kube: Client, namespace: str, export: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the events on ``export``, once there is one (it is written
    just after the status that ended the export)."""

    def found() -> list[tuple[str, str, str]] | None:
        events = [
            (str(e.type), str(e.reason), str(e.message))
            for e in kube.list(Event, namespace=namespace)
            if e.involvedObject.uid == export["metadata"]["uid"]
        ]
        return events or None

    return wait_for(found, 30, what=f"an event on {export['metadata']['name']}")


def _patch_spec(kube: Client, name: str, namespace: str, spec: dict[str, Any]) -> None:
    kube.patch(resources.ReportExport, name, {"spec": spec}, namespace=namespace, patch_type=PatchType.MERGE)


def _refused_change(kube: Client, name: str, namespace: str, spec: dict[str, Any]) -> str:
    """What the API server says refusing ``spec`` as a change of export ``name``'s spec."""
    with pytest.raises(ApiError) as refused:
        _patch_spec(kube, name, namespace, spec)
    return str(refused.value.status.message)


IMMUTABLE = "delivery inputs are immutable; only cancel and retryNonce may change"


def _export(kube: Client, namespace: str, phases: tuple[str, ...], other_than: str = "") -> dict[str, Any]:
    """The namespace's one ReportExport (whose UID is not ``other_than``), once its phase is one
    of ``phases``."""

    def done() -> dict[str, Any] | None:
        found = [
            e.to_dict()
            for e in kube.list(resources.ReportExport, namespace=namespace)
            if e.metadata and e.metadata.uid != other_than
        ]
        if len(found) == 1 and (found[0].get("status") or {}).get("phase") in phases:
            return found[0]
        return None

    return wait_for(done, 90, what=f"a ReportExport in {namespace} in phase {phases}")


def test_an_ended_certifications_report_reaches_the_webhook_signed(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    webhook = Webhook([200])
    kube.create(
        Secret.from_dict(
            {
                "metadata": {"name": "report-key", "namespace": namespace},
                "stringData": {"key": SIGNING_KEY.decode(), "token": TOKEN},
            }
        )
    )
    with webhook.serving():
        kube.create(
            resources.ReportExportPolicy.from_dict(
                policy(
                    "signed",
                    namespace,
                    webhook,
                    signingSecretRef={"name": "report-key", "key": "key"},
                    bearerTokenSecretRef={"name": "report-key", "key": "token"},
                )
            )
        )
        cert = run_certification(kube, namespace, new_pool(gpu_nodes, 2)[0], "exported", "signed")
        export = _export(kube, namespace, ("Delivered", "Failed"))
        (received,) = webhook.requests()

    status = export["status"]
    assert status["phase"] == "Delivered", status
    assert status["attempts"] == 1 and status["lastHTTPStatus"] == 200
    assert export["spec"]["sourceRef"] == {
        "kind": "Certification",
        "namespace": namespace,
        "name": "exported",
        "uid": cert["metadata"]["uid"],
    }
    report = json.loads(received.body)
    assert report["name"] == "exported" and report["kind"] == "Certification"
    assert status["result"] == report["result"] == "PASSED"
    assert status["sha256"] == hashlib.sha256(received.body).hexdigest()
    assert status["payloadBytes"] == len(received.body)
    expected = "sha256=" + hmac.new(SIGNING_KEY, received.body, hashlib.sha256).hexdigest()
    assert received.headers[SIGNATURE_HEADER] == expected
    assert received.headers["Authorization"] == f"Bearer {TOKEN}"
    assert received.headers[DELIVERY_HEADER] == export["metadata"]["uid"]
    assert received.headers[REPORT_HEADER] == cert["metadata"]["uid"] == export["spec"]["reportID"]
    assert CLUSTER_HEADER not in received.headers  # this manager has no --cluster-id
    assert received.headers["Content-Type"] == "application/json"
    snapshot = get(kube, ConfigMap, status["snapshotRef"]["name"], namespace)
    assert snapshot["metadata"]["ownerReferences"][0]["uid"] == export["metadata"]["uid"]
    assert _events(kube, namespace, export) == [("Normal", "Delivered", "HTTP 200 after 1 attempt(s)")]
    # The key and the token are only in their Secret: not in the export, its snapshot, any
    # event or the manager's log.
    shown = json.dumps([export, snapshot, [e.to_dict() for e in kube.list(Event, namespace=namespace)]])
    assert SIGNING_KEY.decode() not in shown and TOKEN not in shown
    log = manager.log_tail(100_000)
    assert SIGNING_KEY.decode() not in log and TOKEN not in log


def test_a_webhook_answering_500_twice_gets_the_report_on_the_third_attempt(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    webhook = Webhook([500, 500, 200])
    with webhook.serving():
        kube.create(resources.ReportExportPolicy.from_dict(policy("flaky", namespace, webhook)))
        run_certification(kube, namespace, new_pool(gpu_nodes, 2)[0], "retried", "flaky")
        export = _export(kube, namespace, ("Delivered", "Failed"))
        received = webhook.requests()

    status = export["status"]
    assert status["phase"] == "Delivered", status
    assert status["attempts"] == 3 and status["lastHTTPStatus"] == 200
    assert status["message"] == "HTTP 200 after 3 attempt(s)"
    assert _events(kube, namespace, export) == [("Normal", "Delivered", "HTTP 200 after 3 attempt(s)")]
    assert len(received) == 3
    assert len({r.body for r in received}) == 1  # the frozen report, sent again unchanged
    assert SIGNATURE_HEADER not in received[0].headers  # no signing Secret: unsigned
    assert status["firstAttemptTime"] <= status["lastAttemptTime"] == status["completionTime"]


def test_a_webhook_answering_400_is_not_retried_and_the_export_says_why(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    webhook = Webhook([400, 200])
    with webhook.serving():
        kube.create(resources.ReportExportPolicy.from_dict(policy("refusing", namespace, webhook)))
        run_certification(kube, namespace, new_pool(gpu_nodes, 2)[0], "refused", "refusing")
        export = _export(kube, namespace, ("Delivered", "Failed"))
        status = export["status"]
        assert status["phase"] == "Failed", status
        assert status["reason"] == "HTTPError"
        assert status["attempts"] == 1 and status["lastHTTPStatus"] == 400
        assert status["message"] == (
            f"POST {webhook.url}: HTTP 400: answered 400 (not retried: the webhook refused the report)"
        )
        assert "nextAttemptTime" not in status
        assert len(webhook.requests()) == 1
        assert _events(kube, namespace, export) == [("Warning", "HTTPError", status["message"])]

        # A new retryNonce sends it again: the webhook answers 200 now.
        name = export["metadata"]["name"]
        _patch_spec(kube, name, namespace, {"retryNonce": "after-the-fix"})
        resent = _export(kube, namespace, ("Delivered",))
        assert resent["metadata"]["uid"] == export["metadata"]["uid"]
        assert (resent["status"]["attempts"], resent["status"]["cycleAttempts"]) == (2, 1)
        assert resent["status"]["observedRetryNonce"] == "after-the-fix"
        assert len(webhook.requests()) == 2

        # Deleted, the export is made anew, and sent once more.
        kube.delete(resources.ReportExport, name, namespace=namespace)
        again = _export(kube, namespace, ("Delivered",), other_than=export["metadata"]["uid"])
        assert again["metadata"]["name"] == name
        assert again["status"]["attempts"] == 1 and len(webhook.requests()) == 3


def test_a_cancelled_export_is_not_sent_again_and_its_delivery_inputs_are_immutable(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    webhook = Webhook([503])
    with webhook.serving():
        down = policy("down", namespace, webhook)
        down["spec"]["retry"] = {"initialBackoff": "1h", "maxBackoff": "1h"}
        kube.create(resources.ReportExportPolicy.from_dict(down))
        run_certification(kube, namespace, new_pool(gpu_nodes, 2)[0], "cancelled", "down")
        export = _export(kube, namespace, ("Retrying",))
        name = export["metadata"]["name"]
        assert export["status"]["attempts"] == 1 and export["status"]["lastHTTPStatus"] == 503
        assert export["status"]["message"] == (
            f"POST {webhook.url}: HTTP 503: answered 503 (attempt 1; next in 3600s)"
        )

        assert IMMUTABLE in _refused_change(
            kube, name, namespace, {"webhook": {"url": "https://elsewhere.example.com/"}}
        )
        assert export["spec"]["retention"] == {"succeeded": "168h", "failed": "720h"}  # the policy's
        assert IMMUTABLE in _refused_change(kube, name, namespace, {"retention": {"failed": "1h"}})

        _patch_spec(kube, name, namespace, {"cancel": True})
        cancelled = _export(kube, namespace, ("Cancelled",))
        assert cancelled["status"]["reason"] == "Cancelled"
        assert cancelled["status"]["attempts"] == 1 and "nextAttemptTime" not in cancelled["status"]
        assert _events(kube, namespace, cancelled) == [
            ("Normal", "Cancelled", "spec.cancel is true: the report is not sent")
        ]
        assert len(webhook.requests()) == 1


def test_a_report_whose_result_the_policy_does_not_send_is_skipped_not_sent(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    webhook = Webhook([200])
    with webhook.serving():
        failures = policy("failures-only", namespace, webhook)
        failures["spec"]["source"]["results"] = ["FAILED", "INCOMPLETE"]
        kube.create(resources.ReportExportPolicy.from_dict(failures))
        run_certification(kube, namespace, new_pool(gpu_nodes, 2)[0], "passes", "failures-only")
        export = _export(kube, namespace, ("Skipped", "Delivered", "Failed"))
        assert webhook.requests() == []

    status = export["status"]
    message = "the report's result PASSED is not one the policy sends (FAILED, INCOMPLETE)"
    assert (status["phase"], status["reason"], status["message"]) == ("Skipped", "ResultNotSelected", message)
    assert status["result"] == "PASSED" and "snapshotRef" not in status and "attempts" not in status
    assert export["spec"]["results"] == ["FAILED", "INCOMPLETE"]
    assert _events(kube, namespace, export) == [("Normal", "ResultNotSelected", message)]
    assert IMMUTABLE in _refused_change(kube, export["metadata"]["name"], namespace, {"results": ["PASSED"]})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"webhook": {"url": "ftp://x"}}, "spec.webhook.url"),
        ({"webhook": {"url": "https://x", "timeout": "500ms"}}, "timeout must be between 1s and 5m"),
        (
            {"webhook": {"url": "https://x"}, "retry": {"initialBackoff": "10m", "maxBackoff": "1m"}},
            "maxBackoff must not be less than initialBackoff",
        ),
        ({"webhook": {"url": "https://x"}, "source": {"namespaces": []}}, "spec.source.namespaces"),
        ({"webhook": {"url": "https://x"}, "source": {"results": ["SOMETIMES"]}}, "spec.source.results[0]"),
        (
            {"webhook": {"url": "https://x"}, "retention": {"succeeded": "30m"}},
            "succeeded retention must be between 1h and 365 days",
        ),
        (
            {"webhook": {"url": "https://x"}, "retention": {"failed": "9000h"}},
            "failed retention must be between 1h and 365 days",
        ),
    ],
)
def test_a_bad_policy_is_refused_naming_the_field(
    kube: Client, namespace: str, change: dict[str, Any], message: str
) -> None:
    body: dict[str, Any] = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "ReportExportPolicy",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {**change, "source": {"namespaces": [namespace], **change.get("source", {})}},
    }
    with pytest.raises(ApiError) as refused:
        kube.create(resources.ReportExportPolicy.from_dict(body))
    assert message in str(refused.value.status.message)


def test_a_policys_omitted_retry_and_retention_are_defaulted(kube: Client, namespace: str) -> None:
    body = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "ReportExportPolicy",
        "metadata": {"name": "defaults", "namespace": namespace},
        "spec": {"source": {"namespaces": [namespace]}, "webhook": {"url": "https://reports.example.com/in"}},
    }
    created = kube.create(resources.ReportExportPolicy.from_dict(body)).to_dict()
    assert created["spec"]["retry"] == {
        "initialBackoff": "10s",
        "maxBackoff": "15m",
        "maxAttempts": 100,
        "maxElapsedTime": "24h",
    }
    assert created["spec"]["retention"] == {"succeeded": "168h", "failed": "720h"}
    assert created["spec"]["webhook"]["timeout"] == "10s"
    assert created["spec"]["source"]["kind"] == "Certification"


def test_the_export_is_the_report_nvcrectl_prints_node_history_included(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any
) -> None:
    """Two Certifications fail the same two nodes; the second's export is what ``nvcrectl
    certification report -o json`` prints of it, "2nd failure in 30 days" included."""
    pool, nodes = new_pool(gpu_nodes, 2)
    run_certification(kube, namespace, pool, "fails-first", "not-exported", failing=True)
    first = certification_workflow_name("fails-first", "communication", "nccl-all-reduce")
    uid = str(get(kube, resources.Workflow, first, namespace)["metadata"]["uid"])
    wait_for(
        lambda: all(uid in recorded_workflows(kube, n) for n in nodes),
        60,
        what=f"the results of {first} in the records of {nodes}",
    )
    webhook = Webhook([200])
    with webhook.serving():
        kube.create(resources.ReportExportPolicy.from_dict(policy("history", namespace, webhook)))
        run_certification(kube, namespace, pool, "fails-again", "history", failing=True)
        export = _export(kube, namespace, ("Delivered", "Failed"))
        (received,) = webhook.requests()

    assert export["status"]["phase"] == "Delivered", export["status"]
    report = json.loads(received.body)
    assert report["result"] == "FAILED"
    failures = {r["name"]: (r["failures"], r["windowDays"]) for r in report["nodeHistory"]["repeatFailures"]}
    assert failures == dict.fromkeys(nodes, (2, 30)), "the 2nd failure in 30 days"
    # Read later, the report differs only where the run moved on: its release, under way or not
    # begun when the report was frozen, has ended.
    later = to_json(read_certification_report(kube, "fails-again", namespace))
    assert later.pop("resourcesReleased")["released"] is True
    report.pop("resourcesReleased", None)
    assert report == later
