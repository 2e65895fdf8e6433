"""Schema markers shared by the API models.

The CRD generator (``nvcre.crd``) turns pydantic's JSON schema into structural OpenAPI v3.
These helpers attach what pydantic cannot express on its own: CEL rules, references to
Kubernetes core types (validated against the vendored upstream schemas), schemaless JSON and
embedded resources. Keys starting with ``x-nvcre-`` are consumed by the generator and never
reach a CRD.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import ConfigDict, WithJsonSchema

K8S_REF = "x-nvcre-k8s"
"""Names an upstream type (e.g. ``io.k8s.api.core.v1.Container``) the generator inlines."""

CEL = "x-kubernetes-validations"


Rule = tuple[str, str] | tuple[str, str, str]
"""A CEL rule: ``(rule, message)``, or ``(rule, message, messageExpression)`` where the message
should state the values; the API server falls back to ``message`` when the expression fails."""


def cel(*rules: Rule) -> dict[str, Any]:
    """``json_schema_extra`` carrying CEL rules."""
    return {CEL: [_validation(*rule) for rule in rules]}


def _validation(rule: str, message: str, message_expression: str = "") -> dict[str, str]:
    out = {"rule": rule, "message": message}
    if message_expression:
        out["messageExpression"] = message_expression
    return out


def cel_config(*rules: Rule) -> ConfigDict:
    """``model_config`` of a model with CEL rules (pydantic merges it into the config inherited)."""
    return ConfigDict(json_schema_extra=cel(*rules))


IMMUTABLE_SPEC: Final = cel_config(("self == oldSelf", "spec is immutable after creation"))
"""``model_config`` of a kind's spec that cannot change once created."""

EXACTLY_ONE: Final = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1})
"""``model_config`` of a union of variants: exactly one field is set."""


def k8s_type(name: str) -> WithJsonSchema:
    """Schema of a field that holds an upstream Kubernetes type, kept as plain data in Python."""
    return WithJsonSchema({K8S_REF: name})


Json = Annotated[Any, WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True})]
"""Schemaless JSON (any value), like ``apiextensionsv1.JSON`` in Go."""

JsonObject = Annotated[
    dict[str, Any], WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})
]
"""An object whose content the API server does not check."""

EmbeddedResource = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
        }
    ),
]
"""A whole Kubernetes object (apiVersion, kind, metadata required by the API server)."""

# Upstream Kubernetes types, carried as dicts and validated against their real schemas.
EnvVar = Annotated[dict[str, Any], k8s_type("io.k8s.api.core.v1.EnvVar")]
Volume = Annotated[dict[str, Any], k8s_type("io.k8s.api.core.v1.Volume")]
VolumeMount = Annotated[dict[str, Any], k8s_type("io.k8s.api.core.v1.VolumeMount")]
Container = Annotated[dict[str, Any], k8s_type("io.k8s.api.core.v1.Container")]
ResourceRequirements = Annotated[dict[str, Any], k8s_type("io.k8s.api.core.v1.ResourceRequirements")]
NodeSelectorRequirement = Annotated[dict[str, Any], k8s_type("io.k8s.api.core.v1.NodeSelectorRequirement")]
Toleration = Annotated[dict[str, Any], k8s_type("io.k8s.api.core.v1.Toleration")]
ObjectMeta = Annotated[dict[str, Any], k8s_type("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")]
LabelSelector = Annotated[dict[str, Any], k8s_type("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")]
TrainJobSpecSchema = k8s_type("io.kubeflow.trainer.v1alpha1.TrainJobSpec")
