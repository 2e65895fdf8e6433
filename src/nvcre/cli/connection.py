"""The cluster connection every cluster-facing ``nvcrectl`` command shares, kubectl style.

``--kubeconfig`` (else ``$KUBECONFIG``, else ``~/.kube/config``, else in-cluster), ``--context``
and ``-n/--namespace``; a config that cannot be used is a user error naming the problem.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from nvcre.cli.common import UserError

if TYPE_CHECKING:
    from lightkube import Client

P = ParamSpec("P")
R = TypeVar("R")


def kubeconfig_options(func: Callable[P, R]) -> Callable[P, R]:
    """``--kubeconfig`` and ``--context``, passed as ``kubeconfig`` and ``context``."""
    func = click.option("--context", default=None, help="Kubeconfig context to use.")(func)
    return click.option(
        "--kubeconfig",
        default=None,
        help="Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config).",
    )(func)


def namespace_option(default: str = "default") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``-n/--namespace``, passed as ``namespace``."""
    return click.option("-n", "--namespace", default=default, show_default=True, help="Namespace.")


def client(kubeconfig: str | None, context: str | None) -> Client:
    """A lightkube client for the kubeconfig (flag, then KUBECONFIG, ~/.kube/config, in-cluster)."""
    from lightkube import Client, KubeConfig

    try:
        path = kubeconfig or os.environ.get("KUBECONFIG")
        config = KubeConfig.from_file(path) if path else KubeConfig.from_env()
        return Client(config=config.get(context_name=context) if context else config)
    except Exception as error:  # lightkube raises several types for unusable configs
        raise UserError(f"cannot load kubeconfig: {type(error).__name__}: {error}") from error


@dataclass(frozen=True)
class Cluster:
    """Where a command reads: ``-n/--namespace``, ``--kubeconfig`` and ``--context``."""

    namespace: str
    kubeconfig: str | None
    context: str | None

    def client(self) -> Client:
        return client(self.kubeconfig, self.context)


def cluster_options(func: Callable[..., R]) -> Callable[..., R]:
    """``-n/--namespace``, ``--kubeconfig`` and ``--context``, passed as one ``cluster``."""

    @functools.wraps(func)
    def command(*args: Any, namespace: str, kubeconfig: str | None, context: str | None, **kwargs: Any) -> R:
        return func(*args, cluster=Cluster(namespace, kubeconfig, context), **kwargs)

    return namespace_option()(kubeconfig_options(command))


def api_error(error: Exception) -> str:
    """What an API or transport error says, in one line (no traceback, no secrets)."""
    from lightkube.core.exceptions import ApiError

    if isinstance(error, ApiError):
        return f"{error.status.reason or 'Error'}: {error.status.message or error}"
    return f"{type(error).__name__}: {error}"


def get_or_none(kube: Client, resource: Any, name: str, namespace: str | None = None) -> Any:
    """The object as lightkube returns it, None when it (or its whole API, a CRD not yet
    installed) does not exist; any other error is raised."""
    import httpx2
    from lightkube.core.exceptions import ApiError

    try:
        return kube.get(resource, name, namespace=namespace)
    except ApiError as error:
        if error.status.code == 404:
            return None
        raise
    except httpx2.HTTPStatusError as error:
        if error.response.status_code == 404:
            return None
        raise


def read(kube: Client, resource: Any, name: str, namespace: str | None, what: str) -> dict[str, Any] | None:
    """The object as a dict, None when it does not exist; any other error ends the command
    with one line naming ``what`` was read. ``namespace`` None: a cluster-scoped object."""
    try:
        obj = get_or_none(kube, resource, name, namespace)
    except Exception as error:  # API and transport errors
        raise UserError(f"cannot read {what}: {api_error(error)}") from error
    if obj is None:
        return None
    data: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return data
