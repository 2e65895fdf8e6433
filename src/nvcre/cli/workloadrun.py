"""``nvcrectl workloadrun``: render the Workflow a WorkloadRun creates, offline or against a cluster."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from nvcre.api.v1alpha1.common import NIC_RESOURCE_PATTERN
from nvcre.api.v1alpha1.constants import Annotation, NodeLabel
from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.cli import connection
from nvcre.cli.common import UserError, emit, load_resource, output_option, user_errors
from nvcre.cli.lazy import LazyGroup
from nvcre.orchestration.discovery import discover
from nvcre.platform.synthetic import check_architecture, check_platform
from nvcre.render.workloadrun import BuildError, WorkloadRunRender, build_workflow

NIC_RESERVED_MESSAGE = "nicResourceName must not use the reserved kubernetes.io or k8s.io domains"


@click.group(
    "workloadrun",
    cls=LazyGroup,
    # The subcommands that talk to a cluster live in modules of their own, loaded when they run.
    lazy={
        "run": ("nvcre.cli.run_commands", "workloadrun_run_command"),
        "status": ("nvcre.cli.status_commands", "workloadrun_status_command"),
        "cancel": ("nvcre.cli.status_commands", "workloadrun_cancel_command"),
        "report": ("nvcre.cli.report_commands", "workloadrun_report_command"),
    },
)
def workloadrun_group() -> None:
    """Run ad-hoc distributed workloads (WorkloadRun)."""


def _with_nic(run: WorkloadRun, name: str) -> WorkloadRun:
    if len(name) > 253 or not re.match(NIC_RESOURCE_PATTERN, name):
        raise UserError(
            f'invalid --nic-resource-name "{name}": must be a fully qualified extended resource name '
            "(domain/name), for example rdma/ib or nvidia.com/mlnxnics"
        )
    if "kubernetes.io/" in name or name.startswith("k8s.io/") or ".k8s.io/" in name:
        raise UserError(f'invalid --nic-resource-name "{name}": {NIC_RESERVED_MESSAGE}')
    spec = run.spec.model_copy(update={"nic_resource_name": name})
    return run.model_copy(update={"spec": spec})


def list_target_nodes(run: WorkloadRun, kubeconfig: str | None, context: str | None) -> list[dict[str, Any]]:
    """Nodes the run targets on the cluster of the kubeconfig (the only cluster contact)."""
    from lightkube.resources.core_v1 import Node

    kube = connection.client(kubeconfig, context)
    target = run.spec.target.to_dict() if run.spec.target else None
    labels: dict[str, Any] = dict((target or {}).get("nodeSelector") or {})
    try:
        listed = [node.to_dict() for node in kube.list(Node, labels=labels or None)]
    except Exception as error:  # API errors and transport errors alike end the command
        raise UserError(f"cannot list nodes: {connection.api_error(error)}") from error
    return discover(listed, target).nodes


def _annotate(rendered: WorkloadRunRender) -> dict[str, Any]:
    workflow = rendered.workflow
    annotations = {Annotation.DETECTED_GPU_ARCHITECTURE: rendered.gpu_architecture}
    if rendered.platform:
        annotations[Annotation.DETECTED_PLATFORM] = rendered.platform
    if rendered.resolved:
        annotations[Annotation.APPLIED_OVERRIDES] = json.dumps(
            list(rendered.applied_overrides), ensure_ascii=False
        )
    metadata = {**workflow["metadata"]}
    metadata["annotations"] = {**metadata.get("annotations", {}), **annotations}
    return {**workflow, "metadata": metadata}


@workloadrun_group.command("render")
@click.argument("file", type=click.Path(path_type=Path, allow_dash=True))
@click.option("--platform", default="", help="Render for this platform: resolve its overrides offline.")
@click.option("--gpu-arch", default="", help="GPU architecture (h100, gb200, ... or NVIDIA-GB200).")
@click.option(
    "--nic-resource-name", default="", help="RDMA NIC extended resource (sets spec.nicResourceName)."
)
@click.option("--dry-run", is_flag=True, help="Discover the target nodes on the cluster and render for them.")
@connection.connection_options  # used with --dry-run only
@output_option()
@user_errors
def render_command(
    file: Path,
    platform: str,
    gpu_arch: str,
    nic_resource_name: str,
    dry_run: bool,
    kubeconfig: str | None,
    context: str | None,
    output: str,
) -> None:
    """Print the Workflow the controller would create for the WorkloadRun in FILE.

    Offline by default: no cluster is contacted. Without --platform the overrides stay in
    spec.overrides, unresolved. With --platform they are applied for that platform (and
    --gpu-arch, else the target's nvidia.com/gpu.product label). --dry-run discovers the target
    nodes through the kubeconfig and detects both.
    """
    try:
        forced_platform = check_platform(platform) if platform else None
        forced_arch = check_architecture(gpu_arch) if gpu_arch else None
    except ValueError as error:
        raise UserError(str(error)) from error
    if dry_run and forced_arch:
        raise UserError("--gpu-arch cannot be combined with --dry-run: the architecture comes from the nodes")
    run = load_resource(file, WorkloadRun)
    if nic_resource_name:
        run = _with_nic(run, nic_resource_name)
    nodes = list_target_nodes(run, kubeconfig, context) if dry_run else None
    if nodes is not None and not nodes:
        raise UserError(f"workloadrun {run.name}: no schedulable GPU node matches spec.target on the cluster")
    try:
        rendered = build_workflow(
            run,
            nodes,
            resolve=dry_run or forced_platform is not None,
            platform=forced_platform,
            gpu_arch=forced_arch,
        )
    except BuildError as error:
        raise UserError(f"workloadrun {run.name}: {error}") from error
    if nodes is not None:
        products = sorted(
            {str((n.get("metadata") or {}).get("labels", {}).get(NodeLabel.GPU_PRODUCT, "")) for n in nodes}
        )
        click.echo(
            f"Discovered {len(nodes)} nodes: {', '.join(p for p in products if p) or 'no GPU product label'} "
            f"({rendered.gpu_architecture} on {rendered.platform})",
            err=True,
        )
    for event in rendered.events:
        click.echo(f"{event.type} {event.reason}: {event.message}", err=True)
    emit(_annotate(rendered), output)
