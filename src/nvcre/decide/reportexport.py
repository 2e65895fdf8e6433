"""Report export decisions (pure): which Certifications a policy exports, what the export is
called and carries, how the body is signed, and what one delivery attempt's outcome does to the
export's status.

A delivery is retried on a 5xx, a 429 and a connection error (or timeout), with exponential
backoff from ``retry.initialBackoff`` doubling up to ``retry.maxBackoff``, until
``retry.maxAttempts`` attempts were made or ``retry.maxElapsedTime`` has passed since the first;
any other answer (a 4xx, a redirect) ends it Failed at once: sending the same body again cannot
change it.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from nvcre.api.v1alpha1.constants import GROUP, VERSION, Kind
from nvcre.api.v1alpha1.meta import format_time, parse_time
from nvcre.api.v1alpha1.reportexport import CLUSTER_HEADER, REPORT_HEADER, Retention
from nvcre.conditions import ended
from nvcre.durations import parse_duration
from nvcre.naming import MAX_K8S_NAME_LEN, short_hash, truncate
from nvcre.orchestration.discovery import expression_holds

SNAPSHOT_KEY: Final = "report.json.gz"
"""The snapshot ConfigMap's binaryData key: the gzipped JSON report, as sent."""
MAX_PAYLOAD_BYTES: Final = 8 * 1024 * 1024
"""The largest report sent (raw JSON)."""
MAX_SNAPSHOT_BYTES: Final = 512 * 1024
"""The largest gzipped snapshot (a ConfigMap holds at most 1 MiB)."""
MAX_MESSAGE: Final = 1024
"""Characters of a webhook's answer kept in the status message."""

DELIVERED: Final = "Delivered"
FAILED: Final = "Failed"
RETRYING: Final = "Retrying"
SNAPSHOT_READY: Final = "SnapshotReady"
CANCELLED: Final = "Cancelled"
SKIPPED: Final = "Skipped"
RESULT_NOT_SELECTED: Final = "ResultNotSelected"
TERMINAL_PHASES: Final = frozenset({DELIVERED, FAILED, CANCELLED, SKIPPED})
"""Phases after which nothing is sent (a Failed export again only for a new ``retryNonce``)."""
KEPT_AS_SUCCEEDED: Final = frozenset({DELIVERED, SKIPPED})
"""Ended phases kept for ``retention.succeeded``; the others (Failed, Cancelled) for ``retention.failed``."""
DEFAULT_RETENTION: Final = Retention()

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def selects(policy: Obj, certification: Obj) -> bool:
    """Whether ``policy`` (not suspended) exports ``certification``: in one of its namespaces,
    with the labels its selector asks for."""
    spec = policy.get("spec") or {}
    if spec.get("suspend"):
        return False
    source = spec.get("source") or {}
    if _meta(certification).get("namespace") not in (source.get("namespaces") or ()):
        return False
    selector = source.get("selector") or {}
    labels = _meta(certification).get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(expression_holds(labels, e) for e in selector.get("matchExpressions") or ())


def _retention(spec: Obj) -> tuple[timedelta, timedelta]:
    """(succeeded, failed) retention of a policy's or an export's spec."""
    retention = spec.get("retention") or {}
    return (
        timedelta(seconds=_seconds(retention.get("succeeded"), DEFAULT_RETENTION.succeeded)),
        timedelta(seconds=_seconds(retention.get("failed"), DEFAULT_RETENTION.failed)),
    )


def exportable(policy: Obj, certification: Obj, now: datetime) -> bool:
    """``policy`` selects ``certification`` and it has ended (its report is final), less than the
    shorter retention ago. An export ends no earlier than its Certification and is deleted a
    retention after it ended, so by then its Certification is out of this window: an export
    the retention deleted is never made (and sent) again."""
    end = ended(certification)
    if end is None or not selects(policy, certification):
        return False
    if not end[1]:
        return True
    return parse_time(end[1]) > now - min(_retention(policy.get("spec") or {}))


def expiry(spec: Obj, status: Obj) -> datetime | None:
    """When an ended export is deleted: its ``completionTime`` plus the retention of how it
    ended. None while it has not ended."""
    completed = status.get("completionTime")
    if status.get("phase") not in TERMINAL_PHASES or not completed:
        return None
    succeeded, failed = _retention(spec)
    return parse_time(str(completed)) + (succeeded if status["phase"] in KEPT_AS_SUCCEEDED else failed)


def export_name(policy: Obj, certification: Obj) -> str:
    """The export of one policy and one Certification (by UID: a Certification created again
    under the same name is another export)."""
    meta = _meta(certification)
    name = f"{_meta(policy)['name']}-{meta['namespace']}-{meta['name']}-{short_hash(str(meta['uid']))}"
    return truncate(name, MAX_K8S_NAME_LEN)


def export_body(policy: Obj, certification: Obj, cluster_id: str | None = None) -> dict[str, Any]:
    """The ReportExport of ``policy`` for ``certification``: the policy's webhook, retry and
    retention, frozen (a later edit of the policy changes only later exports), the report's ID
    (the Certification's UID: the same in every export of it, whichever policy and however often
    it is made) and the manager's ``cluster_id`` when it has one."""
    pmeta, cmeta = _meta(policy), _meta(certification)
    spec = policy.get("spec") or {}
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": Kind.REPORT_EXPORT,
        "metadata": {"name": export_name(policy, certification), "namespace": pmeta["namespace"]},
        "spec": {
            "sourceRef": {
                "kind": Kind.CERTIFICATION,
                "namespace": cmeta["namespace"],
                "name": cmeta["name"],
                "uid": cmeta["uid"],
            },
            "policyRef": {"name": pmeta["name"], "uid": pmeta["uid"], "generation": pmeta.get("generation")},
            "webhook": dict(spec.get("webhook") or {}),
            "reportID": cmeta["uid"],
        },
    }
    if cluster_id:
        body["spec"]["clusterID"] = cluster_id
    for frozen in ("retry", "retention"):
        if spec.get(frozen):
            body["spec"][frozen] = dict(spec[frozen])
    results = (spec.get("source") or {}).get("results")
    if results:
        body["spec"]["results"] = list(results)
    return body


def skipped(spec: Obj, result: str, now: datetime) -> dict[str, Any] | None:
    """The status that ends an export whose frozen report's ``result`` is not one of the
    results it sends (``spec.results``; all when unset): Skipped, nothing sent. None: send it."""
    wanted = spec.get("results")
    if not wanted or result in wanted:
        return None
    return {
        "phase": SKIPPED,
        "reason": RESULT_NOT_SELECTED,
        "message": f"the report's result {result} is not one the policy sends ({', '.join(wanted)})",
        "result": result,
        "completionTime": format_time(now),
    }


def identity_headers(export: Obj) -> dict[str, str]:
    """The headers that say which report a POST carries and of which cluster: the export's
    ``reportID`` (its Certification's UID for an export made before it had one) and, when set,
    its ``clusterID``."""
    spec = export.get("spec") or {}
    headers = {REPORT_HEADER: str(spec.get("reportID") or spec["sourceRef"]["uid"])}
    if spec.get("clusterID"):
        headers[CLUSTER_HEADER] = str(spec["clusterID"])
    return headers


def snapshot_name(export: Obj) -> str:
    """The export's snapshot ConfigMap: named after the export and its UID, so that an export
    made anew never meets its predecessor's ConfigMap (gone only once the garbage collector
    has been by)."""
    meta = _meta(export)
    return truncate(f"{meta['name']}-{short_hash(str(meta['uid']))}", MAX_K8S_NAME_LEN)


@dataclass(frozen=True)
class Snapshot:
    """A report frozen for delivery."""

    body: bytes
    """The JSON sent."""
    gzipped: bytes
    sha256: str
    result: str


class SnapshotTooLarge(ValueError):
    pass


def snapshot(report: Mapping[str, Any]) -> Snapshot:
    """The JSON report as sent (keys sorted, compact) and its gzipped copy;
    :class:`SnapshotTooLarge` past :data:`MAX_PAYLOAD_BYTES` raw or :data:`MAX_SNAPSHOT_BYTES`
    gzipped."""
    body = json.dumps(report, sort_keys=True, separators=(",", ":")).encode()
    if len(body) > MAX_PAYLOAD_BYTES:
        raise SnapshotTooLarge(f"the report is {len(body)} bytes, more than {MAX_PAYLOAD_BYTES}")
    packed = gzip.compress(body, mtime=0)
    if len(packed) > MAX_SNAPSHOT_BYTES:
        raise SnapshotTooLarge(f"the gzipped report is {len(packed)} bytes, more than {MAX_SNAPSHOT_BYTES}")
    return Snapshot(body, packed, hashlib.sha256(body).hexdigest(), str(report.get("result") or ""))


def signature(key: bytes, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of ``body``."""
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def retryable(http_status: int | None) -> bool:
    """A connection error or timeout (no status), a 429 or a 5xx may pass next time."""
    return http_status is None or http_status == 429 or http_status >= 500


def _seconds(text: str | None, default: str) -> float:
    return parse_duration(text or default) / 1e9


def backoff(retry: Mapping[str, Any], attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt: the initial backoff, doubled
    for each attempt before, at most the max backoff."""
    initial = _seconds(retry.get("initialBackoff"), "10s")
    ceiling = _seconds(retry.get("maxBackoff"), "15m")
    return float(min(initial * 2.0 ** max(attempts - 1, 0), ceiling))


@dataclass(frozen=True)
class Attempt:
    """What one POST came to."""

    at: datetime
    http_status: int | None
    """None: no answer (connection refused, TLS failure, timeout)."""
    error: str
    """Why it failed (empty when it did not)."""


def control(spec: Obj, status: Obj, now: datetime) -> dict[str, Any] | None:
    """What the export's ``cancel`` and ``retryNonce`` ask of its status, if anything: Cancelled
    for a report not delivered yet; a new cycle of attempts (attempt now) for a Failed export
    whose ``retryNonce`` is new."""
    phase = status.get("phase")
    if spec.get("cancel"):
        if phase in TERMINAL_PHASES:
            return None
        return {
            "phase": CANCELLED,
            "reason": CANCELLED,
            "message": "spec.cancel is true: the report is not sent",
            "nextAttemptTime": None,
            "completionTime": format_time(now),
        }
    nonce = spec.get("retryNonce")
    if phase == FAILED and nonce and nonce != status.get("observedRetryNonce") and status.get("snapshotRef"):
        return {
            "phase": RETRYING,
            "reason": "RetryRequested",
            "message": f"retryNonce {nonce!r}: sending again",
            "observedRetryNonce": nonce,
            "cycleAttempts": 0,
            "cycleStartedAt": format_time(now),
            "nextAttemptTime": None,
            "completionTime": None,
        }
    return None


def after_attempt(spec: Obj, status: Obj, attempt: Attempt) -> dict[str, Any]:
    """The status fields one attempt changes: attempts and times, then Delivered on a 2xx,
    Retrying with the next attempt's time while this cycle may retry, else Failed. A cycle is
    the attempts since the export (or its last new ``retryNonce``); its limits are the retry's."""
    attempts = int(status.get("attempts") or 0) + 1
    cycle = int(status.get("cycleAttempts") or 0) + 1
    first = status.get("firstAttemptTime") or format_time(attempt.at)
    started = status.get("cycleStartedAt") or first
    out: dict[str, Any] = {
        "attempts": attempts,
        "cycleAttempts": cycle,
        "cycleStartedAt": started,
        "firstAttemptTime": first,
        "lastAttemptTime": format_time(attempt.at),
        "lastHTTPStatus": attempt.http_status,
        "nextAttemptTime": None,
    }
    if attempt.http_status is not None and 200 <= attempt.http_status < 300:
        return out | {
            "phase": DELIVERED,
            "reason": DELIVERED,
            "message": f"HTTP {attempt.http_status} after {attempts} attempt(s)",
            "completionTime": format_time(attempt.at),
        }
    reason = "ConnectionError" if attempt.http_status is None else "HTTPError"
    error = attempt.error[:MAX_MESSAGE]
    retry = spec.get("retry") or {}
    wait = backoff(retry, cycle)
    next_at = attempt.at + timedelta(seconds=wait)
    deadline = parse_time(started) + timedelta(seconds=_seconds(retry.get("maxElapsedTime"), "24h"))
    if not retryable(attempt.http_status):
        return out | {
            "phase": FAILED,
            "reason": reason,
            "message": f"{error} (not retried: the webhook refused the report)",
            "completionTime": format_time(attempt.at),
        }
    if cycle >= int(retry.get("maxAttempts") or 100) or next_at > deadline:
        return out | {
            "phase": FAILED,
            "reason": "RetriesExhausted",
            "message": f"{error} (gave up after {cycle} attempt(s))",
            "completionTime": format_time(attempt.at),
        }
    return out | {
        "phase": RETRYING,
        "reason": reason,
        "message": f"{error} (attempt {cycle}; next in {wait:g}s)",
        "nextAttemptTime": format_time(next_at),
    }


def apply(status: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """Write ``changes`` (from :func:`control` or :func:`after_attempt`) into ``status``; a None
    value removes the field."""
    for field, value in changes.items():
        if value is None:
            status.pop(field, None)
        else:
            status[field] = value


def wait_seconds(status: Obj, now: datetime) -> float:
    """Seconds until the next attempt is due (0: now)."""
    due = status.get("nextAttemptTime")
    if not due:
        return 0.0
    return max((parse_time(str(due)) - now).total_seconds(), 0.0)
