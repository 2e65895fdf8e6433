"""NIC resource auto-detection: one qualifying candidate, or nothing and one of three explanations."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.api.v1alpha1.constants import EventReason, EventType
from nvcre.platform import detect_nic_resource, detection_applies, resolve_nic_resource
from nvcre.platform.nic import parse_quantity


def node(name: str, **allocatable: str) -> dict[str, Any]:
    resources = {key.replace("__", "/").replace("_", "."): value for key, value in allocatable.items()}
    return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": "4", **resources}}}


def nodes_with(resources: dict[str, str], count: int = 2) -> list[dict[str, Any]]:
    return [
        {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"nvidia.com/gpu": "4", **resources}}}
        for i in range(count)
    ]


MULTIPLE = (
    "NIC resource auto-detection found multiple candidates allocatable on every target node "
    "(nvidia.com/mlnxnics, rdma/ib); no NIC resource is requested. Set nicResourceName to choose one."
)
NONE_PRESENT = (
    "NIC resource auto-detection found no RDMA extended resource (rdma/* or nvidia.com/mlnxnics) "
    "on any target node; no NIC resource is requested. Set nicResourceName to request one."
)
BELOW_COUNT = (
    "NIC resource auto-detection found candidates (rdma/ib), but none is allocatable at the requested "
    "count 8 on every target node; no NIC resource is requested. Set nicResourceName to request one, "
    "or adjust mlnxPerNode."
)


def test_single_qualifying_candidate_is_chosen_without_event() -> None:
    result = detect_nic_resource(nodes_with({"rdma/ib": "64"}), 8)
    assert (result.resource_name, result.count, result.source) == ("rdma/ib", 8, "detected")
    assert result.message == ""
    assert result.events == ()


def test_mlnxnics_is_a_candidate() -> None:
    result = detect_nic_resource(nodes_with({"nvidia.com/mlnxnics": "8", "example.com/other": "8"}), 8)
    assert result.resource_name == "nvidia.com/mlnxnics"


def test_multiple_qualifying_candidates() -> None:
    result = detect_nic_resource(nodes_with({"rdma/ib": "16", "nvidia.com/mlnxnics": "8"}), 8)
    assert result.resource_name == ""
    assert result.qualifying == ("nvidia.com/mlnxnics", "rdma/ib")
    assert result.message == MULTIPLE
    (event,) = result.events
    assert (event.type, event.reason, event.message) == (
        EventType.NORMAL,
        EventReason.NIC_RESOURCE_DETECTION,
        MULTIPLE,
    )


def test_no_candidate_on_any_node() -> None:
    result = detect_nic_resource(nodes_with({"example.com/nic": "8"}), 8)
    assert result.resource_name == ""
    assert result.present == ()
    assert result.message == NONE_PRESENT


def test_empty_node_list_is_the_nothing_present_case() -> None:
    assert detect_nic_resource([], 8).message == NONE_PRESENT


def test_candidates_below_requested_count_name_the_count() -> None:
    result = detect_nic_resource(nodes_with({"rdma/ib": "1"}), 8)
    assert result.resource_name == ""
    assert result.required == 8
    assert result.message == BELOW_COUNT


def test_pooled_resource_qualifies_at_mlnx_one() -> None:
    result = detect_nic_resource(nodes_with({"rdma/ib": "1"}), 1)
    assert (result.resource_name, result.count) == ("rdma/ib", 1)


def test_mlnx_zero_requires_at_least_one() -> None:
    result = detect_nic_resource(nodes_with({"rdma/ib": "0"}), 0)
    assert result.required == 1
    assert "requested count 1" in result.message
    ok = detect_nic_resource(nodes_with({"rdma/ib": "1"}), 0)
    assert (ok.resource_name, ok.count) == ("rdma/ib", 0)


def test_candidate_must_qualify_on_every_node() -> None:
    nodes = [
        node("a", rdma__ib="8", rdma__roce="8"),
        node("b", rdma__ib="8"),
    ]
    result = detect_nic_resource(nodes, 8)
    assert result.present == ("rdma/ib", "rdma/roce")
    assert result.resource_name == "rdma/ib"


def test_present_at_zero_counts_as_present() -> None:
    result = detect_nic_resource(nodes_with({"rdma/ib": "0"}), 8)
    assert result.present == ("rdma/ib",)
    assert "found candidates (rdma/ib)" in result.message


def test_present_lists_are_sorted_in_message() -> None:
    result = detect_nic_resource(nodes_with({"rdma/z": "1", "nvidia.com/mlnxnics": "1", "rdma/a": "2"}), 8)
    assert "found candidates (nvidia.com/mlnxnics, rdma/a, rdma/z)" in result.message


@pytest.mark.parametrize(
    ("quantity", "value"),
    [("8", 8), ("1k", 1000), ("2Ki", 2048), ("500m", 0.5), (8, 8), ("x", None), ("", None), (True, None)],
)
def test_parse_quantity(quantity: Any, value: float | None) -> None:
    parsed = parse_quantity(quantity)
    assert (None if parsed is None else float(parsed)) == value


def test_suffixed_quantities_qualify() -> None:
    assert detect_nic_resource(nodes_with({"rdma/ib": "1k"}), 8).resource_name == "rdma/ib"


# --- gating and the field ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "arch", "applies"),
    [
        ("onprem", "gb200", True),
        ("onprem", "gb300", True),
        ("onprem", "b200", True),
        ("onprem", "b300", True),
        ("onprem", "h100", False),
        ("aws", "gb200", False),
        ("mistral", "gb300", False),
    ],
)
def test_detection_gate(platform: str, arch: str, applies: bool) -> None:
    assert detection_applies(platform, arch) is applies


def test_field_wins_without_detection_or_event() -> None:
    result = resolve_nic_resource(
        nodes_with({"rdma/ib": "16", "nvidia.com/mlnxnics": "8"}),
        platform="onprem",
        architecture="gb200",
        mlnx_per_node=8,
        nic_resource_name="nvidia.com/mlnxnics",
    )
    assert (result.resource_name, result.source, result.events) == ("nvidia.com/mlnxnics", "field", ())


def test_other_platforms_request_nothing_and_say_nothing() -> None:
    result = resolve_nic_resource(
        nodes_with({"rdma/ib": "64"}), platform="aws", architecture="gb200", mlnx_per_node=8
    )
    assert (result.resource_name, result.source, result.events) == ("", "not-applicable", ())


def test_onprem_gb300_detects() -> None:
    result = resolve_nic_resource(
        nodes_with({"rdma/ib": "64"}), platform="onprem", architecture="gb300", mlnx_per_node=8
    )
    assert (result.resource_name, result.count) == ("rdma/ib", 8)
