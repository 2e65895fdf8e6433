"""Running as someone other than cluster-admin: apply RBAC manifests, mint ServiceAccount tokens.

``apply_manifests(client, paths)`` server-side applies every document of some YAML files;
``service_account_kubeconfig(control_plane, namespace, name, path)`` asks the API server for a
token of that ServiceAccount (TokenRequest, signed with the control plane's service-account key)
and writes a kubeconfig that authenticates with it — the identity an in-cluster Pod would have.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ServiceAccount

from nvcre import yamlio
from nvcre.testing.controlplane import FIELD_MANAGER, ControlPlane


def load_manifests(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The documents of YAML files, in file order (empty documents skipped)."""
    documents: list[dict[str, Any]] = []
    for path in paths:
        documents += [d for d in yamlio.load_all(path.read_text()) if isinstance(d, dict)]
    return documents


def apply_manifests(client: Client, documents: Iterable[dict[str, Any]]) -> list[str]:
    """Server-side apply each document; returns ``Kind/namespace/name`` of each."""
    applied = []
    for document in documents:
        client.apply(from_dict(document), field_manager=FIELD_MANAGER, force=True)
        meta = document.get("metadata") or {}
        applied.append("/".join(p for p in (document["kind"], meta.get("namespace"), meta["name"]) if p))
    return applied


def service_account_token(client: Client, namespace: str, name: str, *, seconds: int = 3600) -> str:
    """A bound token for ServiceAccount ``namespace/name`` from the TokenRequest API."""
    request = ServiceAccount.Token(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=TokenRequestSpec(audiences=[], expirationSeconds=seconds),
    )
    reply = client.create(request, name, namespace=namespace)
    assert reply.status is not None
    return str(reply.status.token)


def token_kubeconfig(control_plane: ControlPlane, token: str, user: str) -> dict[str, Any]:
    """A kubeconfig for the control plane that authenticates with a bearer ``token``."""
    return control_plane.kubeconfig_as(user, {"token": token})


def service_account_kubeconfig(control_plane: ControlPlane, namespace: str, name: str, path: Path) -> Path:
    """Write a kubeconfig acting as ServiceAccount ``namespace/name`` (it must exist)."""
    with control_plane.client() as client:
        token = service_account_token(client, namespace, name)
    config = token_kubeconfig(control_plane, token, f"system:serviceaccount:{namespace}:{name}")
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


__all__ = [
    "apply_manifests",
    "load_manifests",
    "service_account_kubeconfig",
    "service_account_token",
    "token_kubeconfig",
]
