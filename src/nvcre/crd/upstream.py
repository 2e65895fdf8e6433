"""Upstream schemas (Kubernetes core types, Kubeflow TrainJobSpec) in structural form.

The raw definitions are vendored by ``hack/crd/vendor_upstream_schemas.py``; this module turns
them into what a CRD may embed, the way controller-gen does: references inlined, quantities and
int-or-string values marked, nested ObjectMeta left open, and OpenAPI-only keys dropped.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

_SPECIAL: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        "x-kubernetes-int-or-string": True,
    },
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    },
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object"},
}
_KEEP_EXTENSIONS = {
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-validations",
}
_DROP = {"enum"}
_EMPTY_DEFAULTS: tuple[Any, ...] = ("", {}, [], 0, False, None)
"""OpenAPI zero-value defaults; the non-empty ones are real ``+default`` markers (protocol: TCP)."""


@cache
def _vendored(name: str) -> dict[str, Any]:
    text = resources.files("nvcre.crd.vendored").joinpath(name).read_text()
    schemas: dict[str, Any] = json.loads(text)["schemas"]
    return schemas


def _structural(node: Any, schemas: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(item, schemas) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _resolve(node["$ref"].rsplit("/", 1)[-1], schemas)
    out: dict[str, Any] = {}
    if len(node.get("allOf", ())) == 1:
        out.update(_structural(node["allOf"][0], schemas))
    for key, value in node.items():
        if key in _DROP or key == "allOf" or (key.startswith("x-") and key not in _KEEP_EXTENSIONS):
            continue
        if key == "default" and value in _EMPTY_DEFAULTS:
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {name: _structural(sub, schemas) for name, sub in value.items()}
        else:
            out[key] = _structural(value, schemas)
    return out


def _resolve(name: str, schemas: dict[str, Any]) -> dict[str, Any]:
    if name in _SPECIAL:
        return copy.deepcopy(_SPECIAL[name])
    return dict(_structural(schemas[name], schemas))


def upstream_schema(name: str) -> dict[str, Any]:
    """The structural schema of an upstream type, e.g. ``io.k8s.api.core.v1.Container``.

    Kubernetes definitions come from the OpenAPI document and are converted; Trainer's come
    from its CRD and are structural already, so they are used as they are.
    """
    trainer = _vendored("trainer.json")
    if name in trainer:
        return copy.deepcopy(trainer[name])
    schemas = _vendored("kubernetes.json")
    if name not in schemas and name not in _SPECIAL:
        raise KeyError(
            f"upstream schema {name} is not vendored; add it to hack/crd/vendor_upstream_schemas.py"
        )
    return _resolve(name, schemas)
