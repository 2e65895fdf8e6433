"""From pydantic models to structural OpenAPI v3 schemas and CRD manifests."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel

from nvcre.api.v1alpha1 import KIND_MODULES, kind_model
from nvcre.api.v1alpha1.resource import Resource
from nvcre.api.v1alpha1.schema import K8S_REF
from nvcre.crd.upstream import upstream_schema

_DROPPED_KEYS = {"title", "$defs"}


def _is_null(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "null"


def _convert(node: Any, defs: dict[str, Any]) -> Any:
    """pydantic JSON schema -> structural OpenAPI v3 (no $ref, no null, no title)."""
    if isinstance(node, list):
        return [_convert(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    if "$ref" in node:
        out.update(_convert(defs[node["$ref"].rsplit("/", 1)[-1]], defs))
    if K8S_REF in node:
        out.update(upstream_schema(node[K8S_REF]))
    options = node.get("anyOf")
    if options is not None:
        kept = [option for option in options if not _is_null(option)]
        if len(kept) == 1:
            out.update(_convert(kept[0], defs))
        else:
            out["anyOf"] = _convert(kept, defs)
    for key, value in node.items():
        if key in _DROPPED_KEYS or key in ("$ref", "anyOf", K8S_REF):
            continue
        if (key == "default" and value is None) or (key == "additionalProperties" and value is False):
            continue
        if key == "properties":
            out[key] = {name: _convert(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, defs)
        else:
            out[key] = value
    return out


def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    converted: dict[str, Any] = _convert(raw, raw.get("$defs", {}))
    return converted


def _description(model: type[BaseModel]) -> str:
    return inspect.cleandoc(model.__doc__ or "").split("\n\n")[0].replace("\n", " ")


def openapi_schema(kind: type[Resource]) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of a kind."""
    fields = kind.model_fields
    properties: dict[str, Any] = {
        "apiVersion": {
            "type": "string",
            "description": "APIVersion defines the versioned schema of this representation of an object.",
        },
        "kind": {
            "type": "string",
            "description": "Kind is a string value representing the REST resource this object represents.",
        },
        "metadata": {"type": "object"},
    }
    for name in ("spec", "status"):
        if name in fields:
            annotation = fields[name].annotation
            model = _model_of(annotation)
            properties[name] = _model_schema(model)
    return {
        "type": "object",
        "description": _description(kind),
        "properties": properties,
        "required": ["spec"],
    }


def _model_of(annotation: Any) -> type[BaseModel]:
    for candidate in getattr(annotation, "__args__", (annotation,)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise TypeError(f"{annotation!r} is not a model")


def crd_for(kind: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition manifest of a kind."""
    version: dict[str, Any] = {
        "name": kind.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(kind)},
    }
    if kind.HAS_STATUS:
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = [column.to_dict() for column in kind.COLUMNS]
    names: dict[str, Any] = {
        "kind": kind.KIND,
        "listKind": f"{kind.KIND}List",
        "plural": kind.PLURAL,
        "singular": kind.KIND.lower(),
    }
    if kind.SHORT_NAMES:
        names["shortNames"] = list(kind.SHORT_NAMES)
    if kind.CATEGORIES:
        names["categories"] = list(kind.CATEGORIES)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.PLURAL}.{kind.GROUP}"},
        "spec": {
            "group": kind.GROUP,
            "names": names,
            "scope": "Namespaced" if kind.NAMESPACED else "Cluster",
            "versions": [version],
        },
    }


def generate_all() -> dict[str, dict[str, Any]]:
    """File name -> CRD manifest for every kind of the group."""
    return {f"{kind.GROUP}_{kind.PLURAL}.yaml": crd_for(kind) for kind in map(kind_model, KIND_MODULES)}
