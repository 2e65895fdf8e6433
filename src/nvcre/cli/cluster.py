"""``nvcrectl cluster info``: lists the nodes (read-only) and prints what ``nvcre.clusterinfo`` finds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from nvcre.cli import connection
from nvcre.cli.common import UserError, emit, output_option, user_errors

if TYPE_CHECKING:
    from nvcre.platform.dra import GPUInventory


@click.group("cluster")
def cluster_group() -> None:
    """Inspect the cluster nvcre would certify."""


def label_selector(text: str) -> dict[str, Any]:
    """kubectl's ``-l`` equality and existence terms: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``."""
    from lightkube import operators

    terms: dict[str, Any] = {}
    for raw in text.split(","):
        term = raw.strip()
        if not term:
            continue
        value: Any
        if "!=" in term:
            key, value = term.split("!=", 1)
            value = operators.not_equal(value.strip())
        elif "=" in term:
            key, value = term.replace("==", "=", 1).split("=", 1)
            value = value.strip()
        elif term.startswith("!"):
            key, value = term[1:], operators.not_exists()
        else:
            key, value = term, None
        if not key.strip():
            raise UserError(f'invalid --selector "{text}": empty label key in "{term}"')
        terms[key.strip()] = value
    return terms


def gpu_inventory(kube: Any) -> GPUInventory:
    """The GPUs the NVIDIA DRA driver publishes in ResourceSlices (resource.k8s.io/v1): how a node
    without GPU labels is known. None on a cluster that does not serve the API; a refused list
    is said on stderr and reads as none."""
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.resource_v1 import ResourceSlice

    from nvcre.platform.dra import GPU_DRIVER, GPUInventory

    try:
        slices = [s.to_dict() for s in kube.list(ResourceSlice, fields={"spec.driver": GPU_DRIVER})]
    except ApiError as error:
        if error.status.code != 404:
            click.echo(
                f"Warning: cannot list ResourceSlices ({connection.api_error(error)}); "
                "nodes without GPU labels are not recognised",
                err=True,
            )
        return GPUInventory()
    return GPUInventory.from_slices(slices)


@cluster_group.command("info")
@output_option(default="table", formats=("table", "json", "yaml"))
@click.option(
    "--topology-key",
    default=None,
    help="Node label naming the network block (default: the platform's, e.g. "
    "topology.k8s.aws/network-node-layer-1 on AWS).",
)
@click.option(
    "-l", "--selector", default="", help="Only nodes with these labels (k=v, k!=v, k, !k; comma-separated)."
)
@connection.connection_options
@user_errors
def info_command(
    output: str,
    topology_key: str | None,
    selector: str,
    kubeconfig: str | None,
    context: str | None,
) -> None:
    """GPU nodes by platform, product and count, topology domains, NIC resources, which catalog
    categories fit, and which nodes nvcre would exclude and why. Reads nodes only; changes nothing."""
    from lightkube.resources.core_v1 import Node

    from nvcre.clusterinfo import ClusterInfoError, cluster_info, render_table, to_dict

    terms = label_selector(selector) if selector else None
    kube = connection.client(kubeconfig, context)
    try:
        nodes = [node.to_dict() for node in kube.list(Node, labels=terms)]
    except Exception as error:  # API and transport errors alike end the command
        raise UserError(f"cannot list nodes: {connection.api_error(error)}") from error
    try:
        info = cluster_info(nodes, topology_key=topology_key, dra=gpu_inventory(kube))
    except ClusterInfoError as error:
        raise UserError(str(error)) from error
    if output == "table":
        click.echo(render_table(info), nl=False)
    else:
        emit(to_dict(info), output)
