"""The report-export rules: which Certifications a policy selects, the export's name, the
signature, and what one delivery attempt does to the export's status."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nvcre.decide import reportexport as rx
from nvcre.naming import short_hash

AT = datetime(2026, 12, 5, 1, 0, 0, tzinfo=UTC)
RETRY = {"initialBackoff": "10s", "maxBackoff": "30s", "maxAttempts": 4, "maxElapsedTime": "1h"}


def _cert(
    labels: dict[str, str] | None = None, *, ended: bool = True, namespace: str = "team-a"
) -> dict[str, Any]:
    conditions = [{"type": "Succeeded", "status": "True", "lastTransitionTime": "2026-12-05T00:00:00Z"}]
    return {
        "metadata": {"name": "nightly", "namespace": namespace, "uid": "u-1", "labels": labels or {}},
        "status": {"conditions": conditions if ended else []},
    }


def _policy(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "db", "namespace": "nvcre", "uid": "p-1", "generation": 2},
        "spec": {"source": {"namespaces": ["team-a"]}, "webhook": {"url": "https://x"}, **spec},
    }


def test_a_policy_exports_the_ended_certifications_of_its_namespaces_with_its_labels() -> None:
    assert rx.exportable(_policy(), _cert(), AT)
    assert not rx.exportable(_policy(), _cert(ended=False), AT)
    assert not rx.exportable(_policy(), _cert(namespace="team-b"), AT)
    assert not rx.exportable(_policy(suspend=True), _cert(), AT)
    labelled = _policy(source={"namespaces": ["team-a"], "selector": {"matchLabels": {"export": "yes"}}})
    assert rx.exportable(labelled, _cert({"export": "yes"}), AT)
    assert not rx.exportable(labelled, _cert({"export": "no"}), AT)
    expression = _policy(
        source={
            "namespaces": ["team-a"],
            "selector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        }
    )
    assert rx.exportable(expression, _cert({"tier": "gold"}), AT)
    assert not rx.exportable(expression, _cert(), AT)


def test_the_export_is_named_after_policy_namespace_certification_and_uid_and_freezes_the_policy() -> None:
    body = rx.export_body(_policy(retry=RETRY), _cert())
    assert body["metadata"] == {"name": "db-team-a-nightly-" + short_hash("u-1"), "namespace": "nvcre"}
    assert body["spec"]["sourceRef"] == {
        "kind": "Certification",
        "namespace": "team-a",
        "name": "nightly",
        "uid": "u-1",
    }
    assert body["spec"]["policyRef"] == {"name": "db", "uid": "p-1", "generation": 2}
    assert body["spec"]["retry"] == RETRY
    assert body["spec"]["reportID"] == "u-1"  # the Certification's UID, whichever policy sends it
    assert "clusterID" not in body["spec"]  # the manager has no --cluster-id
    assert rx.identity_headers(body) == {"X-Nvcre-Report-ID": "u-1"}
    labelled = rx.export_body(_policy(), _cert(), "lab-east")
    assert labelled["spec"]["clusterID"] == "lab-east"
    assert rx.identity_headers(labelled) == {"X-Nvcre-Report-ID": "u-1", "X-Nvcre-Cluster-ID": "lab-east"}
    older = {"spec": {"sourceRef": {"uid": "u-0"}}}  # made before exports had a reportID
    assert rx.identity_headers(older) == {"X-Nvcre-Report-ID": "u-0"}
    assert "results" not in body["spec"]  # every result
    picky = _policy(source={"namespaces": ["team-a"], "results": ["FAILED"]})
    assert rx.export_body(picky, _cert())["spec"]["results"] == ["FAILED"]
    long = _cert()
    long["metadata"]["name"] = "n" * 80
    assert len(rx.export_name(_policy(), long)) == 63


def test_the_snapshot_is_the_compact_sorted_json_and_its_signature_is_the_hmac() -> None:
    frozen = rx.snapshot({"result": "PASSED", "name": "nightly"})
    assert frozen.body == b'{"name":"nightly","result":"PASSED"}'
    assert json.loads(gzip.decompress(frozen.gzipped)) == {"name": "nightly", "result": "PASSED"}
    assert frozen.result == "PASSED"
    # RFC 4231 test case 2
    assert rx.signature(b"Jefe", b"what do ya want for nothing?") == (
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )
    with pytest.raises(rx.SnapshotTooLarge, match="more than"):
        rx.snapshot({"blob": "x" * rx.MAX_PAYLOAD_BYTES})


def test_backoff_doubles_from_the_initial_up_to_the_max() -> None:
    assert [rx.backoff(RETRY, n) for n in (1, 2, 3, 4)] == [10.0, 20.0, 30.0, 30.0]


def _after(status: dict[str, Any], code: int | None, at: datetime = AT) -> dict[str, Any]:
    """``status`` after one attempt, written as the controller writes it (None: removed)."""
    changes = rx.after_attempt({"retry": RETRY}, status, rx.Attempt(at, code, f"HTTP {code}"))
    out = dict(status)
    rx.apply(out, changes)
    return out


@pytest.mark.parametrize("code", [500, 503, 429, None])
def test_a_5xx_429_or_no_answer_is_retried_after_the_backoff(code: int | None) -> None:
    status = _after({}, code)
    assert status["phase"] == "Retrying"
    assert status["attempts"] == 1 and status["nextAttemptTime"] == "2026-12-05T01:00:10Z"
    assert status["reason"] == ("ConnectionError" if code is None else "HTTPError")


@pytest.mark.parametrize("code", [400, 401, 404, 301])
def test_any_other_answer_fails_at_once(code: int) -> None:
    status = _after({}, code)
    assert (status["phase"], status["attempts"], status["completionTime"]) == (
        "Failed",
        1,
        "2026-12-05T01:00:00Z",
    )
    assert status["message"] == f"HTTP {code} (not retried: the webhook refused the report)"


def test_a_2xx_delivers_and_attempts_count_up_to_max_attempts() -> None:
    status = _after(_after({}, 500), 200, AT + timedelta(seconds=10))
    assert status["phase"] == "Delivered" and status["attempts"] == 2
    assert "nextAttemptTime" not in status
    assert status["firstAttemptTime"] == "2026-12-05T01:00:00Z"
    assert status["completionTime"] == status["lastAttemptTime"] == "2026-12-05T01:00:10Z"
    failing: dict[str, Any] = {}
    for n in range(4):
        failing = _after(failing, 502, AT + timedelta(seconds=30 * n))
    assert (failing["phase"], failing["reason"], failing["attempts"]) == ("Failed", "RetriesExhausted", 4)


def test_retries_stop_once_the_next_would_pass_max_elapsed_time() -> None:
    late = _after({"attempts": 1, "firstAttemptTime": "2026-12-05T00:00:00Z"}, 500, AT - timedelta(seconds=5))
    assert late["phase"] == "Failed" and late["reason"] == "RetriesExhausted"


def test_wait_seconds_until_the_next_attempt() -> None:
    assert rx.wait_seconds({"nextAttemptTime": "2026-12-05T01:00:10Z"}, AT) == 10.0
    assert rx.wait_seconds({"nextAttemptTime": "2026-12-05T00:59:00Z"}, AT) == 0.0
    assert rx.wait_seconds({}, AT) == 0.0


def test_cancel_stops_a_report_not_delivered_yet() -> None:
    retrying = {"phase": "Retrying", "attempts": 2, "nextAttemptTime": "2026-12-05T01:05:00Z"}
    cancelled = dict(retrying)
    rx.apply(cancelled, rx.control({"cancel": True}, retrying, AT) or {})
    assert cancelled == {
        "phase": "Cancelled",
        "reason": "Cancelled",
        "message": "spec.cancel is true: the report is not sent",
        "attempts": 2,
        "completionTime": "2026-12-05T01:00:00Z",
    }
    assert rx.control({"cancel": True}, {"phase": "Delivered"}, AT) is None
    assert rx.control({}, retrying, AT) is None


def test_a_new_retry_nonce_starts_a_new_cycle_of_a_failed_export() -> None:
    failed = _after(_after({"snapshotRef": {"name": "s"}}, 500), 400, AT + timedelta(seconds=10))
    assert failed["phase"] == "Failed"
    assert rx.control({"retryNonce": "a"}, {**failed, "observedRetryNonce": "a"}, AT) is None
    again = dict(failed)
    rx.apply(again, rx.control({"retryNonce": "a"}, failed, AT + timedelta(minutes=1)) or {})
    assert (again["phase"], again["cycleAttempts"], again["observedRetryNonce"]) == ("Retrying", 0, "a")
    assert "completionTime" not in again and again["cycleStartedAt"] == "2026-12-05T01:01:00Z"
    assert rx.wait_seconds(again, AT) == 0.0
    retried = _after(again, 503, AT + timedelta(minutes=1))
    # the cycle's first failure waits the initial backoff; attempts count every cycle
    assert (retried["attempts"], retried["cycleAttempts"]) == (3, 1)
    assert retried["nextAttemptTime"] == "2026-12-05T01:01:10Z"


def test_a_report_of_a_result_the_export_does_not_send_is_skipped() -> None:
    now = AT
    spec = {"results": ["FAILED"]}
    assert rx.skipped(spec, "FAILED", now) is None
    assert rx.skipped({}, "PASSED", now) is None  # all results when unset
    assert rx.skipped(spec, "PASSED", now) == {
        "phase": "Skipped",
        "reason": "ResultNotSelected",
        "message": "the report's result PASSED is not one the policy sends (FAILED)",
        "result": "PASSED",
        "completionTime": "2026-12-05T01:00:00Z",
    }
    assert "Skipped" in rx.TERMINAL_PHASES


# --- retention ---------------------------------------------------------------------------------


def test_an_ended_export_expires_a_retention_after_its_completion_by_how_it_ended() -> None:
    done = "2026-12-05T01:00:00Z"
    kept = {"retention": {"succeeded": "2h", "failed": "48h"}}
    assert rx.expiry(kept, {"phase": "Delivered", "completionTime": done}) == AT + timedelta(hours=2)
    assert rx.expiry(kept, {"phase": "Skipped", "completionTime": done}) == AT + timedelta(hours=2)
    assert rx.expiry(kept, {"phase": "Failed", "completionTime": done}) == AT + timedelta(hours=48)
    assert rx.expiry(kept, {"phase": "Cancelled", "completionTime": done}) == AT + timedelta(hours=48)
    # the defaults: a week after a delivery, 30 days after a failure
    assert rx.expiry({}, {"phase": "Delivered", "completionTime": done}) == AT + timedelta(days=7)
    assert rx.expiry({}, {"phase": "Failed", "completionTime": done}) == AT + timedelta(days=30)
    for running in ("SnapshotReady", "Retrying", None):
        assert rx.expiry(kept, {"phase": running, "completionTime": done}) is None


def test_a_policy_exports_only_certifications_that_ended_within_its_shorter_retention() -> None:
    ended_at = datetime(2026, 12, 5, 0, 0, 0, tzinfo=UTC)  # _cert()'s Succeeded time
    policy = _policy(retention={"succeeded": "3h", "failed": "720h"})
    assert rx.exportable(policy, _cert(), ended_at + timedelta(hours=2, minutes=59))
    assert not rx.exportable(policy, _cert(), ended_at + timedelta(hours=3))
    assert rx.exportable(_policy(), _cert(), ended_at + timedelta(days=6, hours=23))  # 168h default
    assert not rx.exportable(_policy(), _cert(), ended_at + timedelta(days=7))
    body = rx.export_body(policy, _cert())
    assert body["spec"]["retention"] == {"succeeded": "3h", "failed": "720h"}  # frozen with it
