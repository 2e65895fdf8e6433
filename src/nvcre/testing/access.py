"""Running as someone other than cluster-admin: apply RBAC manifests, mint ServiceAccount tokens.

``apply_manifests(client, paths)`` server-side applies every document of some YAML files;
``service_account_kubeconfig(control_plane, namespace, name, path)`` asks the API server for a
token of that ServiceAccount (TokenRequest, signed with the control plane's service-account key)
and writes a kubeconfig that authenticates with it — the identity an in-cluster Pod would have.
``aggregate_cluster_roles(client, names)`` fills aggregated ClusterRoles (``view``, ``edit``,
``admin``) as kube-controller-manager would, on a control plane that runs none.
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
from lightkube.resources.rbac_authorization_v1 import ClusterRole
from lightkube.types import PatchType

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


def _selected(labels: dict[str, str], selector: dict[str, Any]) -> bool:
    assert not selector.get("matchExpressions"), "only matchLabels selectors are aggregated here"
    return all(labels.get(key) == value for key, value in (selector.get("matchLabels") or {}).items())


def aggregate_cluster_roles(client: Client, names: Iterable[str] = ("view", "edit", "admin")) -> None:
    """Give each aggregated ClusterRole of ``names`` (in order: ``view`` is aggregated into ``edit``)
    the rules of every ClusterRole its ``aggregationRule`` selects, as kube-controller-manager's
    clusterrole-aggregation controller does (the shared test control plane runs no controller-manager)."""
    for name in names:
        roles = [role.to_dict() for role in client.list(ClusterRole)]
        (target,) = (r for r in roles if r["metadata"]["name"] == name)
        selectors = target["aggregationRule"]["clusterRoleSelectors"]
        rules: list[dict[str, Any]] = []
        for role in sorted(roles, key=lambda r: str(r["metadata"]["name"])):
            labels = role["metadata"].get("labels") or {}
            if role["metadata"]["name"] != name and any(_selected(labels, s) for s in selectors):
                rules += [rule for rule in role.get("rules") or () if rule not in rules]
        client.patch(ClusterRole, name, {"rules": rules}, patch_type=PatchType.MERGE)


__all__ = [
    "aggregate_cluster_roles",
    "apply_manifests",
    "load_manifests",
    "service_account_kubeconfig",
    "service_account_token",
    "token_kubeconfig",
]
