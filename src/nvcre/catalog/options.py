"""Category options: spec-level defaults, per-category values, and what they resolve to.

``spec`` inlines :class:`CategoryOptions` as global defaults and every ``spec.categories[i]``
may set ``options``. Per field, a per-category value that is set (not null, not empty) wins;
maps, lists and ``resources`` replace the global value whole. ``workloadMetadata.labels`` is
the exception: it merges per key (global first, then the category).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from nvcre.api.v1alpha1.certification import Category, CategoryOptions, CategoryResources, CertificationSpec
from nvcre.api.v1alpha1.common import WorkloadMetadata
from nvcre.catalog.errors import BuildError
from nvcre.naming import category_options_suffix, certification_workflow_name
from nvcre.platform.nic import parse_quantity


@dataclass(frozen=True)
class TrainingResources:
    """CPU and memory of training pods (the DGX-class defaults unless ``options.resources``)."""

    cpu_limit: str = "128"
    memory_limit: str = "800Gi"
    cpu_request: str = "64"
    memory_request: str = "500Gi"


DGX_RESOURCES: Final = TrainingResources()


def _is_set(value: Any) -> bool:
    return value is not None and value != "" and value != {} and value != []


def category_path(index: int) -> str:
    return f"spec.categories[{index}].options"


NAMING_OPTIONS: Final = (
    "nodesPerJob",
    "enableMNNVL",
    "testScale",
    "enableCheckpoint",
    "maxSteps",
    "exitDurationMins",
    "gpusPerNode",
)
"""The per-category options a category's Workflow name carries (spec §2.5), in suffix order."""


def workflow_name(certification: str, category: Category) -> str:
    """The Workflow of ``category``: ``<cert>-<domain>-<variant>`` plus the suffix of the
    category's own options (not the spec-level ones, which every category shares), max 31."""
    own = category.options or CategoryOptions()
    suffix = category_options_suffix(
        nodes_per_job=own.nodes_per_job,
        enable_mnnvl=own.enable_mnnvl,
        test_scale=own.test_scale or "",
        enable_checkpoint=own.enable_checkpoint,
        max_steps=own.max_steps,
        exit_duration_mins=own.exit_duration_mins,
        gpus_per_node=own.gpus_per_node,
    )
    return certification_workflow_name(certification, category.domain, category.variant, suffix)


@dataclass(frozen=True)
class NameClash:
    """Two categories that would run as one Workflow: the later one (``second``) cannot run."""

    first: int
    second: int
    workflow: str

    def message(self, categories: list[Category]) -> str:
        def which(index: int) -> str:
            c = categories[index]
            return f"{c.domain}/{c.variant} (spec.categories[{index}])"

        return (
            f"categories {which(self.first)} and {which(self.second)} would both run as Workflow "
            f'"{self.workflow}"; a category listed twice needs its own options that tell the runs '
            f"apart ({category_path(self.second)}: {', '.join(NAMING_OPTIONS)})"
        )


def name_clash(certification: str, categories: list[Category]) -> NameClash | None:
    """The first category whose Workflow name an earlier category already has, if any."""
    seen: dict[str, int] = {}
    for index, category in enumerate(categories):
        name = workflow_name(certification, category)
        if name in seen:
            return NameClash(seen[name], index, name)
        seen[name] = index
    return None


def merge_options(spec: CertificationSpec, index: int) -> CategoryOptions:
    """The options of ``spec.categories[index]``: per-category values over the spec-level ones."""
    own = spec.categories[index].options or CategoryOptions()
    values: dict[str, Any] = {}
    for name in CategoryOptions.model_fields:
        mine, shared = getattr(own, name), getattr(spec, name)
        values[name] = mine if _is_set(mine) else shared
    labels = merge_labels(
        spec.workload_metadata.labels if spec.workload_metadata else None,
        own.workload_metadata.labels if own.workload_metadata else None,
    )
    values["workload_metadata"] = WorkloadMetadata(labels=labels) if labels else None
    return CategoryOptions.model_construct(**values)


def merge_labels(*layers: dict[str, str] | None) -> dict[str, str]:
    """Per-key merge: later layers replace earlier values of the same key; nothing is removed."""
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update(layer or {})
    return merged


def options_field(spec: CertificationSpec, index: int, name: str) -> str:
    """Field path of the option ``name`` (camelCase): where the category's effective value comes
    from, or the per-category path when it is set nowhere."""
    own = spec.categories[index].options
    attr = next((k for k, f in CategoryOptions.model_fields.items() if (f.alias or k) == name), name)
    if (own is None or not _is_set(getattr(own, attr, None))) and _is_set(getattr(spec, attr, None)):
        return f"spec.{name}"
    return f"{category_path(index)}.{name}"


def _quantity(value: Any, field: str) -> Decimal:
    parsed = parse_quantity(value)
    if parsed is None:
        raise BuildError(f"{field}: {value!r} is not a valid quantity", field=field)
    if parsed < 0:
        raise BuildError(f"{field}: must be a non-negative quantity, got {value!r}", field=field)
    return parsed


def resolve_training_resources(resources: CategoryResources | None, field: str) -> TrainingResources:
    """The four values, each falling back to its DGX-class default on its own.

    A request the user set above a limit the user set is an error naming both. A defaulted value
    never contradicts a user value: a defaulted request is lowered to the user's limit, a
    defaulted limit raised to the user's request.
    """
    if resources is None:
        return DGX_RESOURCES
    limits = resources.limits
    requests = resources.requests
    out: dict[str, str] = {}
    for kind in ("cpu", "memory"):
        limit = getattr(limits, kind) if limits else None
        request = getattr(requests, kind) if requests else None
        default_limit = getattr(DGX_RESOURCES, f"{kind}_limit")
        default_request = getattr(DGX_RESOURCES, f"{kind}_request")
        limit_q = _quantity(limit, f"{field}.limits.{kind}") if limit is not None else None
        request_q = _quantity(request, f"{field}.requests.{kind}") if request is not None else None
        if limit_q is not None and request_q is not None and request_q > limit_q:
            raise BuildError(
                f"{field}: requests.{kind} must not exceed limits.{kind} (requests.{kind} "
                f"{request!s}, limits.{kind} {limit!s})",
                field=f"{field}.requests.{kind}",
            )
        final_limit = str(limit) if limit is not None else default_limit
        final_request = str(request) if request is not None else default_request
        if limit_q is not None and request_q is None and _quantity(default_request, field) > limit_q:
            final_request = final_limit
        if request_q is not None and limit_q is None and request_q > _quantity(default_limit, field):
            final_limit = final_request
        out[f"{kind}_limit"] = final_limit
        out[f"{kind}_request"] = final_request
    return TrainingResources(**out)


_DURATION_PART = re.compile(r"([0-9]+)(ms|h|m|s)")
_DURATION = re.compile(r"^([0-9]+(ms|h|m|s))+$")
_UNIT_SECONDS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_seconds(value: str) -> float:
    """Seconds of a duration like ``1h30m`` or ``15m``; ``ValueError`` if malformed."""
    if not _DURATION.match(value):
        raise ValueError(f"invalid duration {value!r}")
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(value))


__all__ = [
    "DGX_RESOURCES",
    "TrainingResources",
    "category_path",
    "duration_seconds",
    "merge_labels",
    "merge_options",
    "options_field",
    "resolve_training_resources",
]
