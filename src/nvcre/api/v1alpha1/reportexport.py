"""ReportExportPolicy (``rep``) and ReportExport (``rex``): a finished Certification's JSON report,
frozen and delivered to a webhook.

A policy selects Certifications (their namespaces, a label selector, the results sent); for each
one that has ended, the manager creates one ReportExport in the policy's namespace, freezes the report into a
ConfigMap the export owns, and POSTs it to the webhook, signed with HMAC-SHA256 when the policy
names a signing Secret. The rules are in ``nvcre.decide.reportexport``; docs/report-export.md
describes the whole flow.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field, WithJsonSchema

from nvcre.api.v1alpha1.constants import Kind
from nvcre.api.v1alpha1.limits import GO_DURATION_PATTERN
from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.api.v1alpha1.printing import AGE, Column
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.schema import LabelSelector, cel, cel_config

SIGNATURE_HEADER: Final = "X-Nvcre-Signature-256"
"""The header carrying ``sha256=<hex HMAC-SHA256 of the body>`` (the signing Secret's key)."""
DELIVERY_HEADER: Final = "X-Nvcre-Delivery"
"""The header carrying the ReportExport's UID: the same on every retry of one report."""
REPORT_HEADER: Final = "X-Nvcre-Report-ID"
"""The header carrying the export's ``reportID``: the same in every export of one Certification."""
CLUSTER_HEADER: Final = "X-Nvcre-Cluster-ID"
"""The header carrying the export's ``clusterID`` (the manager's ``--cluster-id``), when set."""


def _duration(low: str, high: str, message: str) -> Any:
    return Field(
        json_schema_extra={
            "pattern": GO_DURATION_PATTERN,
            **cel(
                (
                    f"!self.matches('{GO_DURATION_PATTERN}') || "
                    f"(duration(self) >= duration('{low}') && duration(self) <= duration('{high}'))",
                    message,
                )
            ),
        },
    )


SourceKind = Annotated[
    Literal["Certification"], WithJsonSchema({"type": "string", "enum": ["Certification"]})
]
"""What a policy exports (only Certifications so far)."""


ReportResult = Annotated[
    Literal["PASSED", "FAILED", "INCOMPLETE"],
    WithJsonSchema({"type": "string", "enum": ["PASSED", "FAILED", "INCOMPLETE"]}),
]
"""An ended Certification's report result."""


def _results(description: str) -> Any:
    """A set of report results (the policy's ``source.results`` and its copy on each export)."""
    return Field(
        default=None,
        min_length=1,
        max_length=3,
        description=description,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class SecretKeyRef(NvcreModel):
    """A key of a Secret in the policy's namespace."""

    name: str = Field(min_length=1, max_length=253)
    key: str = Field(min_length=1, max_length=253)


class ExportSource(NvcreModel):
    kind: SourceKind = Field(default="Certification", description="What is exported.")
    namespaces: list[str] = Field(
        min_length=1,
        max_length=64,
        description="The namespaces whose Certifications are exported.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    selector: LabelSelector | None = Field(
        default=None, description="Only the Certifications with these labels (all when unset)."
    )
    results: list[ReportResult] | None = _results(
        "Only the reports with one of these results (all when unset); the export of another ends "
        "Skipped, its report never sent."
    )


class Webhook(NvcreModel):
    url: str = Field(
        min_length=1,
        max_length=2048,
        pattern=r"^https?://[^\s]+$",
        description="Where the report is POSTed (application/json).",
    )
    timeout: Annotated[str, _duration("1s", "5m", "timeout must be between 1s and 5m")] = "10s"
    ca_bundle: str | None = Field(
        default=None,
        description="PEM certificates (base64) the webhook's TLS certificate must chain to; the "
        "system's trust store when unset.",
        json_schema_extra={"format": "byte"},
    )
    signing_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description=f"The HMAC-SHA256 key: the body's signature goes in {SIGNATURE_HEADER} "
        "as sha256=<hex>. Unsigned when unset.",
    )
    bearer_token_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Sent as Authorization: Bearer <the key's value>. None when unset."
    )


class Retry(NvcreModel):
    """How a delivery that failed on a 5xx, a 429 or a connection error is retried (never a 4xx)."""

    model_config = cel_config(
        (
            "!has(self.maxBackoff) || !has(self.initialBackoff) || "
            "duration(self.maxBackoff) >= duration(self.initialBackoff)",
            "maxBackoff must not be less than initialBackoff",
        )
    )

    initial_backoff: Annotated[str, _duration("1s", "1h", "initialBackoff must be between 1s and 1h")] = "10s"
    max_backoff: Annotated[str, _duration("1s", "24h", "maxBackoff must be between 1s and 24h")] = "15m"
    max_attempts: int = Field(default=100, ge=1, le=10000)
    max_elapsed_time: Annotated[
        str, _duration("1s", "720h", "maxElapsedTime must be between 1s and 30 days")
    ] = "24h"


class Retention(NvcreModel):
    """How long an ended export (and its snapshot ConfigMap) is kept after its completionTime
    before the manager deletes it."""

    succeeded: Annotated[
        str, _duration("1h", "8760h", "succeeded retention must be between 1h and 365 days")
    ] = Field(default="168h", description="After it was Delivered or Skipped.")
    failed: Annotated[str, _duration("1h", "8760h", "failed retention must be between 1h and 365 days")] = (
        Field(default="720h", description="After it Failed or was Cancelled.")
    )


class ReportExportPolicySpec(NvcreModel):
    source: ExportSource
    webhook: Webhook
    retry: Retry = Field(default_factory=Retry, json_schema_extra={"default": {}})
    retention: Retention = Field(
        default_factory=Retention,
        json_schema_extra={"default": {}},
        description="How long ended exports are kept; a Certification that ended longer ago than the"
        " shorter of the two is not exported.",
    )
    suspend: bool | None = Field(default=None, description="No new exports while true.")


class ReportExportPolicy(Resource):
    """Which Certifications' reports go to which webhook."""

    KIND = Kind.REPORT_EXPORT_POLICY
    SHORT_NAMES = ("rep",)
    HAS_STATUS: ClassVar[bool] = False
    COLUMNS = (
        Column("URL", ".spec.webhook.url", "The webhook."),
        Column("Suspended", ".spec.suspend", "No new exports while true.", "boolean"),
        AGE,
    )

    spec: ReportExportPolicySpec


class SourceRef(NvcreModel):
    kind: SourceKind = "Certification"
    namespace: str = Field(min_length=1, max_length=63)
    name: str = Field(min_length=1, max_length=253)
    uid: str = Field(min_length=1, max_length=128)


class PolicyRef(NvcreModel):
    name: str = Field(min_length=1, max_length=253)
    uid: str = Field(min_length=1, max_length=128)
    generation: int | None = None


class ReportExportSpec(NvcreModel):
    """The delivery's inputs, frozen from the policy when the export was made."""

    model_config = cel_config(
        (
            "self.sourceRef == oldSelf.sourceRef && self.policyRef == oldSelf.policyRef && "
            "self.webhook == oldSelf.webhook && self.retry == oldSelf.retry && "
            "self.retention == oldSelf.retention && "
            "has(self.clusterID) == has(oldSelf.clusterID) && (!has(self.clusterID) || self.clusterID == oldSelf.clusterID) && "
            "has(self.reportID) == has(oldSelf.reportID) && (!has(self.reportID) || self.reportID == oldSelf.reportID) && "
            "has(self.results) == has(oldSelf.results) && (!has(self.results) || self.results == oldSelf.results)",
            "delivery inputs are immutable; only cancel and retryNonce may change",
        )
    )

    source_ref: SourceRef
    policy_ref: PolicyRef
    webhook: Webhook
    retry: Retry = Field(default_factory=Retry, json_schema_extra={"default": {}})
    retention: Retention = Field(default_factory=Retention, json_schema_extra={"default": {}})
    cluster_id: str | None = Field(
        default=None,
        alias="clusterID",
        min_length=1,
        max_length=253,
        description="The cluster the report is of: the manager's --cluster-id when the export was made.",
    )
    report_id: str | None = Field(
        default=None,
        alias="reportID",
        min_length=1,
        max_length=128,
        description="The report's identity, the same in every export of one Certification: its UID.",
    )
    results: list[ReportResult] | None = _results(
        "The results whose report is sent (all when unset): the policy's source.results."
    )
    cancel: bool | None = Field(
        default=None, description="Stop: a report not delivered yet is not sent (phase Cancelled)."
    )
    retry_nonce: str | None = Field(
        default=None,
        max_length=128,
        description="Set to a new value to send a Failed export again (a new cycle of retries).",
    )


Phase = Literal["SnapshotReady", "Retrying", "Delivered", "Failed", "Cancelled", "Skipped"]


class ReportExportStatus(NvcreModel):
    phase: Phase | None = Field(
        default=None,
        description="SnapshotReady (frozen, not yet sent), Retrying, Delivered, Failed, Cancelled "
        "or Skipped (the report's result is not one the policy sends).",
    )
    reason: str | None = Field(
        default=None, description="Why it is in that phase (HTTPError, ConnectionError, ...)."
    )
    message: str | None = Field(default=None, description="The last error, or what was delivered.")
    result: str | None = Field(default=None, description="The report's result: PASSED, FAILED, INCOMPLETE.")
    report_id: str | None = Field(default=None, alias="reportID", description="The spec's reportID, as sent.")
    snapshot_ref: dict[str, str] | None = Field(
        default=None, description="The ConfigMap holding the frozen report (binaryData report.json.gz)."
    )
    sha256: str | None = Field(default=None, description="Hex SHA-256 of the JSON report as sent.")
    payload_bytes: int | None = None
    attempts: int | None = Field(default=None, description="POSTs made, every cycle.")
    cycle_attempts: int | None = Field(
        default=None, description="POSTs made in this cycle (since the export or its last retryNonce)."
    )
    cycle_started_at: str | None = None
    observed_retry_nonce: str | None = Field(
        default=None, description="The retryNonce the cycle started for."
    )
    last_http_status: int | None = Field(default=None, alias="lastHTTPStatus")
    first_attempt_time: str | None = None
    last_attempt_time: str | None = None
    next_attempt_time: str | None = None
    completion_time: str | None = Field(default=None, description="When it was delivered or gave up.")


class ReportExport(Resource):
    """One Certification's report, frozen and delivered to one policy's webhook."""

    KIND = Kind.REPORT_EXPORT
    SHORT_NAMES = ("rex",)
    COLUMNS = (
        Column("Source", ".spec.sourceRef.name", "The Certification."),
        Column("Result", ".status.result", "The report's result."),
        Column(
            "Delivery", ".status.phase", "SnapshotReady, Retrying, Delivered, Failed, Cancelled or Skipped."
        ),
        Column("Attempts", ".status.attempts", "POSTs made.", "integer"),
        AGE,
    )

    spec: ReportExportSpec
    status: ReportExportStatus | None = None
