"""Category options: precedence, resources, labels, durations."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.api.v1alpha1.certification import CategoryResources, CertificationSpec
from nvcre.catalog import BuildError
from nvcre.catalog.options import (
    DGX_RESOURCES,
    TrainingResources,
    duration_seconds,
    merge_labels,
    merge_options,
    options_field,
    resolve_training_resources,
)


def _spec(global_options: dict[str, Any], own: dict[str, Any] | None = None) -> CertificationSpec:
    category: dict[str, Any] = {"domain": "communication", "variant": "nccl-all-reduce"}
    if own is not None:
        category["options"] = own
    return CertificationSpec.model_validate({"target": {}, "categories": [category], **global_options})


def test_per_category_value_wins_field_by_field() -> None:
    spec = _spec(
        {"nodesPerJob": 2, "testScale": "intra-rack", "maxBytes": "8G", "thresholds": {"a": "value > 1"}},
        {"testScale": "diagnose", "thresholds": {"b": "value > 2"}},
    )
    merged = merge_options(spec, 0)
    assert merged.nodes_per_job == 2
    assert merged.test_scale == "diagnose"
    assert merged.max_bytes == "8G"
    assert merged.thresholds == {"b": "value > 2"}  # maps replace whole


def test_empty_per_category_values_do_not_clear_global_ones() -> None:
    merged = merge_options(_spec({"thresholds": {"a": "value > 1"}}, {"thresholds": {}}), 0)
    assert merged.thresholds == {"a": "value > 1"}


def test_resources_block_replaces_the_global_one_whole() -> None:
    spec = _spec(
        {"resources": {"limits": {"cpu": "100", "memory": "600Gi"}}},
        {"resources": {"requests": {"cpu": "4"}}},
    )
    merged = merge_options(spec, 0)
    assert merged.resources is not None and merged.resources.limits is None


def test_workload_labels_merge_per_key() -> None:
    spec = _spec(
        {"workloadMetadata": {"labels": {"env": "burn-in", "team": "infra"}}},
        {"workloadMetadata": {"labels": {"team": "net", "kueue.x-k8s.io/queue-name": "q"}}},
    )
    merged = merge_options(spec, 0)
    assert merged.workload_metadata is not None
    assert merged.workload_metadata.labels == {
        "env": "burn-in",
        "team": "net",
        "kueue.x-k8s.io/queue-name": "q",
    }
    assert merge_labels({"a": "1"}, None, {"a": ""}) == {"a": ""}  # an empty value is a real label


def test_options_field_names_where_the_value_comes_from() -> None:
    spec = _spec({"nodesPerJob": 2}, {"testScale": "diagnose"})
    assert options_field(spec, 0, "nodesPerJob") == "spec.nodesPerJob"
    assert options_field(spec, 0, "testScale") == "spec.categories[0].options.testScale"
    assert options_field(spec, 0, "maxBytes") == "spec.categories[0].options.maxBytes"


def _resources(raw: dict[str, Any]) -> TrainingResources:
    return resolve_training_resources(CategoryResources.model_validate(raw), "opts.resources")


def test_resources_default_to_dgx_class() -> None:
    assert (
        resolve_training_resources(None, "x")
        == DGX_RESOURCES
        == TrainingResources("128", "800Gi", "64", "500Gi")
    )


def test_each_resource_falls_back_on_its_own() -> None:
    assert _resources({"limits": {"memory": "900Gi"}}) == TrainingResources("128", "900Gi", "64", "500Gi")


def test_defaulted_values_never_contradict_user_values() -> None:
    # a 6-CPU limit lowers the defaulted 64-CPU request; a 200-CPU request raises the defaulted limit
    assert _resources({"limits": {"cpu": "6", "memory": "48Gi"}}) == TrainingResources(
        "6", "48Gi", "6", "48Gi"
    )
    assert _resources({"requests": {"cpu": 200}}) == TrainingResources("200", "800Gi", "200", "500Gi")


def test_request_above_limit_names_both() -> None:
    with pytest.raises(BuildError) as info:
        _resources({"limits": {"memory": "32Gi"}, "requests": {"memory": "48Gi"}})
    assert str(info.value) == (
        "opts.resources: requests.memory must not exceed limits.memory (requests.memory 48Gi, limits.memory 32Gi)"
    )
    assert info.value.field == "opts.resources.requests.memory"


def test_millicores_compare_as_quantities() -> None:
    assert _resources({"limits": {"cpu": "1500m"}, "requests": {"cpu": "1"}}).cpu_request == "1"
    with pytest.raises(BuildError, match=r"requests\.cpu must not exceed"):
        _resources({"limits": {"cpu": "500m"}, "requests": {"cpu": "1"}})


@pytest.mark.parametrize(
    ("text", "seconds"), [("1h", 3600), ("15m", 900), ("1h30m", 5400), ("90s", 90), ("1500ms", 1.5)]
)
def test_duration_seconds(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


def test_bad_duration() -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        duration_seconds("1d")
