"""The pure parts of ``workloadrun status|cancel`` and ``certification list|status``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nvcre.cli.status_commands import (
    category_statuses,
    certification_summary,
    certification_table,
    certification_text,
    human_duration,
)
from nvcre.conditions import run_state

NOW = datetime(2026, 3, 1, 14, 22, 33, tzinfo=UTC)


def cond(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (None, ("Pending", "", "")),
        ([], ("Pending", "", "")),
        ([cond("InProgress", "False", "Done")], ("Pending", "", "")),
        ([cond("InProgress", "True", "WorkflowRunning", "m")], ("InProgress", "WorkflowRunning", "m")),
        (
            [cond("InProgress", "False"), cond("Succeeded", "True", "WorkflowSucceeded")],
            ("Succeeded", "WorkflowSucceeded", ""),
        ),
        (
            [cond("ValidationFailed", "True"), cond("Failed", "True", "BuildFailed", "x")],
            ("Failed", "BuildFailed", "x"),
        ),
    ],
)
def test_status_is_the_true_member_of_the_trio(conditions: Any, expected: tuple[str, str, str]) -> None:
    assert run_state({"status": {"conditions": conditions}}) == expected


def test_status_of_an_object_without_status_is_pending() -> None:
    assert run_state({"metadata": {"name": "x"}}) == ("Pending", "", "")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (330, "5m30s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 25 * 60, "3h25m"),
        (47 * 3600, "47h"),
        (2 * 86400 + 4 * 3600, "2d4h"),
        (30 * 86400, "30d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
        (-1, "0s"),
        (-5, "<invalid>"),
    ],
)
def test_age_is_kubectls_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def certification(
    name: str, namespace: str, statuses: list[dict[str, Any]] | None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": (NOW - timedelta(minutes=5)).isoformat().replace("+00:00", "Z"),
        },
        "spec": {
            "categories": [
                {"domain": "communication", "variant": "nccl-all-reduce"},
                {"domain": "diagnostics", "variant": "dcgm-level3"},
            ]
        },
        "status": {"categoryStatuses": statuses, **status},
    }


RUNNING = [
    {
        "domain": "communication",
        "variant": "nccl-all-reduce",
        "status": "Succeeded",
        "workflowRef": {"name": "c1-communication-nccl-all-reduce"},
    },
    {
        "domain": "diagnostics",
        "variant": "dcgm-level3",
        "status": "InProgress",
        "workflowRef": {"name": "c1-diag"},
    },
]


def test_categories_before_the_controller_wrote_any_are_pending() -> None:
    assert [c["status"] for c in category_statuses(certification("c1", "ns1", None))] == [
        "Pending",
        "Pending",
    ]


def test_list_table_and_all_namespaces_column() -> None:
    running = certification("c1", "ns1", RUNNING, conditions=[cond("InProgress", "True", "WorkflowRunning")])
    fresh = certification("c2", "ns2", None)
    summaries = [certification_summary(running), certification_summary(fresh)]
    assert certification_table(summaries, NOW, all_namespaces=False).splitlines() == [
        "NAME   CATEGORIES   STATUS       REASON            AGE",
        "c1     1/2          InProgress   WorkflowRunning   5m",
        "c2     0/2          Pending      -                 5m",
    ]
    assert certification_table(summaries, NOW, all_namespaces=True).splitlines()[1].split() == [
        "ns1",
        "c1",
        "1/2",
        "InProgress",
        "WorkflowRunning",
        "5m",
    ]


def test_status_text_and_summary() -> None:
    cert = certification(
        "c1", "ns1", RUNNING, conditions=[cond("InProgress", "True", "WorkflowRunning", "going")]
    )
    summary = certification_summary(cert)
    assert summary["categories"] == [
        {
            "domain": "communication",
            "variant": "nccl-all-reduce",
            "status": "Succeeded",
            "workflow": "c1-communication-nccl-all-reduce",
        },
        {"domain": "diagnostics", "variant": "dcgm-level3", "status": "InProgress", "workflow": "c1-diag"},
    ]
    assert certification_text(summary, NOW).splitlines() == [
        "Name:        c1",
        "Namespace:   ns1",
        "Status:      InProgress",
        "Reason:      WorkflowRunning",
        "Message:     going",
        "Age:         5m",
        "",
        "CATEGORY                        STATUS       WORKFLOW",
        "communication/nccl-all-reduce   Succeeded    c1-communication-nccl-all-reduce",
        "diagnostics/dcgm-level3         InProgress   c1-diag",
    ]
