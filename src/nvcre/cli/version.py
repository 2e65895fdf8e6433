"""``nvcrectl version``: the client's version and the version of each nvcre manager in the cluster."""

from __future__ import annotations

from typing import Any

import click

from nvcre import __version__
from nvcre.cli.common import UserError, user_errors
from nvcre.cli.connection import api_error, client, connection_options
from nvcre.setup import plan


def _manager(deployment: Any) -> plan.ManagerDeployment:
    meta, spec, status = deployment.metadata, deployment.spec, deployment.status
    containers = spec.template.spec.containers
    image = next((c.image for c in containers if c.name == "manager"), containers[0].image)
    return plan.ManagerDeployment(
        namespace=meta.namespace or "",
        name=meta.name or "",
        version_label=(meta.labels or {}).get("app.kubernetes.io/version", ""),
        image=image or "",
        ready=(status.readyReplicas or 0) if status else 0,
        replicas=spec.replicas if spec.replicas is not None else 1,
    )


@click.command("version")
@connection_options
@click.option("--client", "client_only", is_flag=True, help="Print the client's version only.")
@user_errors
def version_command(kubeconfig: str | None, context: str | None, client_only: bool) -> None:
    """Print nvcrectl's version and that of the nvcre manager running in the cluster."""
    click.echo(f"Client:  nvcrectl {__version__}")
    if client_only:
        return
    from lightkube.resources.apps_v1 import Deployment

    kube = client(kubeconfig, context)
    try:
        found = kube.list(Deployment, namespace="*", labels=dict(plan.MANAGER_LABELS))
        deployments = sorted((_manager(d) for d in found), key=lambda d: (d.namespace, d.name))
    except Exception as error:
        raise UserError(f"cannot read the manager's version: {api_error(error)}") from error
    for line in plan.manager_version_lines(__version__, deployments):
        click.echo(line)
