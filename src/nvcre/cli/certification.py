"""``nvcrectl certification``: the catalog's categories, and a Certification rendered to Workflows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from nvcre.api.v1alpha1.certification import Certification
from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.catalog import BuildError, CategoryNotFound, CategoryRender, load_catalog, render_category
from nvcre.cli import connection
from nvcre.cli.cluster import gpu_inventory
from nvcre.cli.common import UserError, load_nodes, load_resource, output_option, render, to_yaml, user_errors
from nvcre.orchestration.discovery import discover
from nvcre.platform import (
    GPU_ARCHITECTURES,
    Event,
    GPUInventory,
    architecture_from_node_selector,
    check_architecture,
    check_platform,
    synthetic_nodes,
)
from nvcre.platform.detect import Platform


@click.group("certification")
def certification_group() -> None:
    """Certification categories and offline renders."""


@certification_group.command("list-categories")
@click.argument("extra", nargs=-1)
@output_option(default="table", formats=("table", "wide", "yaml", "json"))
@user_errors
def list_categories(extra: tuple[str, ...], output: str) -> None:
    """List the catalog's categories (no cluster needed); ``wide`` adds framework, timeout and what it runs."""
    if extra:
        raise UserError(f"list-categories takes no arguments, got {' '.join(extra)}")
    entries = load_catalog().list()
    if output in ("yaml", "json"):
        items = [entry.to_dict() for entry in entries]
        click.echo(json.dumps(items, indent=2) if output == "json" else to_yaml(items), nl=output == "json")
        return
    if output == "table":
        click.echo(f"{'DOMAIN':<20} VARIANT")
        for entry in entries:
            click.echo(f"{entry.domain:<20} {entry.variant}")
        return
    click.echo(f"{'DOMAIN':<20} {'VARIANT':<24} {'FRAMEWORK':<10} {'TIMEOUT':<8} DESCRIPTION")
    for entry in entries:
        click.echo(
            f"{entry.domain:<20} {entry.variant:<24} {entry.meta.framework:<10} "
            f"{entry.default_timeout('full-scale'):<8} {entry.meta.description}"
        )


def _warn(events: Sequence[Event], seen: set[tuple[str, str]]) -> None:
    for event in events:
        if (event.reason, event.message) in seen:
            continue
        seen.add((event.reason, event.message))
        click.echo(f"{event.type}: {event.reason}: {event.message}", err=True)


def _offline_nodes(cert: Certification, platform: str, gpu_arch: str) -> list[dict[str, Any]]:
    """One synthetic node standing for the target: the nodeSelector labels on the given platform."""
    selector: Mapping[str, str] = (cert.spec.target.node_selector if cert.spec.target else None) or {}
    if gpu_arch:
        arch = check_architecture(gpu_arch)
        return synthetic_nodes(platform or Platform.ONPREM, arch, labels=selector, name_prefix=cert.name)
    arch = architecture_from_node_selector(selector)
    if not arch:
        raise UserError(
            "cannot determine GPU architecture from target nodeSelector "
            "(nvidia.com/gpu.product label is required)"
        )
    if arch in GPU_ARCHITECTURES:
        return synthetic_nodes(platform or Platform.ONPREM, arch, labels=selector, name_prefix=cert.name)
    # An architecture without gpu-defaults: a node with the target's own product label (the
    # render falls back to the default sizes and says so).
    nodes = synthetic_nodes(platform or Platform.ONPREM, "h100", labels=selector, name_prefix=cert.name)
    for node in nodes:
        node["metadata"]["labels"][NodeLabel.GPU_PRODUCT] = selector[NodeLabel.GPU_PRODUCT]
    return nodes


def _discover_nodes(cert: Certification, client: Any, dra: GPUInventory) -> list[dict[str, Any]]:
    """GPU nodes matching the target, from the cluster (read-only), filtered as the controllers do
    (``dra``: the GPUs of nodes without GPU labels)."""
    from lightkube.resources.core_v1 import Node

    target = cert.spec.target.to_dict() if cert.spec.target else {}
    selector: dict[str, Any] = dict(target.get("nodeSelector") or {})
    if not dra.counts:
        selector[NodeLabel.GPU_PRESENT] = "true"
    try:
        found = [node.to_dict() for node in client.list(Node, labels=selector or None)]
    except Exception as error:  # API errors and transport errors alike end the command
        raise UserError(f"cannot list nodes: {error}") from error
    return discover(found, target, dra).nodes


def _installer_pods(client: Any, nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """GKE's TCPXO installer pods (the Running pods of kube-system) when a node is on GCP, as the
    Certification controller reads them; a refused list reads as none (the fallback warns)."""
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.core_v1 import Pod

    from nvcre.platform.gke import INSTALLER_NAMESPACE, may_run_tcpxo

    if not may_run_tcpxo(nodes):
        return None
    try:
        pods = client.list(Pod, namespace=INSTALLER_NAMESPACE, fields={"status.phase": "Running"})
        return [pod.to_dict() for pod in pods]
    except ApiError:
        return []


def _dry_run_create(workflows: Sequence[dict[str, Any]], client: Any) -> None:
    from nvcre.resources import Workflow

    for workflow in workflows:
        try:
            client.create(Workflow.from_dict(workflow), dry_run=True)
        except Exception as error:
            raise UserError(f"dry-run create of Workflow {workflow['metadata']['name']}: {error}") from error
        click.echo(f"Dry-run validation: {workflow['metadata']['name']} accepted", err=True)


@certification_group.command("render")
@click.argument("file", type=click.Path(path_type=Path), required=False)
@click.option("--platform", default="", help="Render for this platform (offline): aws, gcp, azure, ...")
@click.option(
    "--gpu-arch", "gpu_arch", default="", help="GPU architecture (h100, gb200, ... or a product label)."
)
@click.option("--dry-run", is_flag=True, help="Discover the real target nodes and validate server-side.")
@click.option(
    "--nodes-file",
    type=click.Path(path_type=Path),
    default=None,
    help="Render against these Node objects (YAML) as if discovered; excludes --gpu-arch and --dry-run.",
)
@click.option(
    "-n", "--namespace", default="", help="Namespace of the rendered Workflows (default: the file's)."
)
@connection.connection_options  # used with --dry-run only
@output_option()
@user_errors
def render_command(
    file: Path | None,
    platform: str,
    gpu_arch: str,
    dry_run: bool,
    nodes_file: Path | None,
    namespace: str,
    kubeconfig: str | None,
    context: str | None,
    output: str,
) -> None:
    """Render FILE (a Certification) into one Workflow per category.

    Offline (the default), the target is one synthetic node carrying the target's nodeSelector
    labels: --platform (or the nodeSelector's platform-neutral default, on-prem) and --gpu-arch (or
    the nodeSelector's nvidia.com/gpu.product) decide which catalog overrides apply. Without
    --platform the overrides are left in the Workflow for the controller to resolve on the real
    nodes. --dry-run discovers the real nodes through the kubeconfig instead.
    """
    if file is None:
        raise UserError("requires a certification YAML file as argument")
    try:
        if platform:
            check_platform(platform)
        if gpu_arch:
            check_architecture(gpu_arch)
    except ValueError as error:
        raise UserError(str(error)) from error
    if dry_run and gpu_arch:
        raise UserError("--gpu-arch cannot be combined with --dry-run (the cluster's nodes decide)")
    if nodes_file is not None and (gpu_arch or dry_run):
        raise UserError("--nodes-file cannot be combined with --gpu-arch or --dry-run")
    cert = load_resource(file, Certification)
    if namespace:
        cert.metadata["namespace"] = namespace
    real_nodes = dry_run or nodes_file is not None
    client = connection.client(kubeconfig, context) if dry_run else None
    dra = gpu_inventory(client) if dry_run else GPUInventory()
    if nodes_file is not None:
        nodes = load_nodes(nodes_file)
    elif dry_run:
        nodes = _discover_nodes(cert, client, dra)
    else:
        nodes = _offline_nodes(cert, platform, gpu_arch)
    resolve = bool(platform) or real_nodes
    installers = _installer_pods(client, nodes) if dry_run else None
    seen: set[tuple[str, str]] = set()
    renders: list[CategoryRender] = []
    for index in range(len(cert.spec.categories)):
        try:
            result = render_category(
                cert,
                index,
                nodes,
                platform=platform or None,
                offline=not real_nodes,
                resolve_overrides=resolve,
                tcpxo_installers=installers,
                gpu_products=dra.products,
            )
        except CategoryNotFound as error:
            raise UserError(f"{error} (available categories: {', '.join(error.known)})") from error
        except BuildError as error:
            raise UserError(str(error)) from error
        _warn(result.events, seen)
        renders.append(result)
    workflows: list[dict[str, Any]] = []
    for result in renders:
        workflow = result.workflow
        annotations = workflow["metadata"].setdefault("annotations", {})
        annotations.update(result.detection_annotations())
        workflows.append(workflow)
    if dry_run:
        _dry_run_create(workflows, client)
    if output == "json":
        click.echo(json.dumps(workflows, indent=2))
    else:
        click.echo(render(workflows, output), nl=False)


# Subcommands that talk to a cluster live in modules of their own.
from nvcre.cli.report_commands import certification_report_command  # noqa: E402
from nvcre.cli.run_commands import certification_run_command  # noqa: E402
from nvcre.cli.status_commands import certification_list_command, certification_status_command  # noqa: E402

for _command in (
    certification_list_command,
    certification_status_command,
    certification_run_command,
    certification_report_command,
):
    certification_group.add_command(_command)
