"""Entry.Build: sizing checks, the template render, and the post-render settings of a Workflow spec.

The result still carries the entry's ``overrides`` unresolved; :mod:`nvcre.catalog.render`
resolves them against the detected platform and architecture.
"""

from __future__ import annotations

import copy
from typing import Any

from nvcre.catalog.errors import BuildError, CatalogError
from nvcre.catalog.loader import Entry
from nvcre.catalog.sizing import validate_sizing
from nvcre.catalog.template_data import TemplateData


def build_spec(
    entry: Entry,
    data: TemplateData,
    *,
    target: dict[str, Any] | None = None,
    repeat_count: int | None = None,
    max_restarts: int | None = None,
    field: str = "nodesPerJob",
) -> dict[str, Any]:
    """The Workflow spec (wire form) of ``entry`` for ``data``.

    ``field`` names the option a sizing error is reported against.
    """
    if not data.gpu_architecture:
        raise BuildError(f"{entry.key}: GPUArchitecture is required but was not provided")
    validate_sizing(entry, data.nodes_per_job, data.gpus_per_node, data.gpu_architecture, field=field)
    try:
        spec = entry.render(data)
    except CatalogError as exc:
        raise BuildError(str(exc)) from exc
    orchestration = spec.setdefault("orchestration", {})
    if target:
        orchestration["target"] = copy.deepcopy(target)
    if repeat_count is not None and repeat_count > 0:
        orchestration["iterations"] = repeat_count
    checkpoint = (spec.get("jobTemplate") or {}).get("spec", {}).get("checkpoint")
    if max_restarts is not None and isinstance(checkpoint, dict):
        checkpoint["maxRestarts"] = max_restarts
    return spec
