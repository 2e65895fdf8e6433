"""``nvcrectl workflow render``: a Workflow manifest with its platform/GPU overrides resolved, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nvcre.api.v1alpha1.constants import Annotation, EventType, NodeLabel
from nvcre.api.v1alpha1.workflow import Workflow
from nvcre.cli.common import UserError, emit, load_nodes, load_validated, output_option, user_errors
from nvcre.platform.detect import GPU_ARCHITECTURES, architecture_from_node_selector
from nvcre.platform.synthetic import check_architecture, check_platform, synthetic_nodes
from nvcre.render.workflow import resolve_workflow


@click.group("workflow")
def workflow_group() -> None:
    """Work with Workflow manifests."""


def _target_selector(document: dict[str, Any]) -> dict[str, str]:
    selector = ((document.get("spec") or {}).get("orchestration") or {}).get("target") or {}
    node_selector = selector.get("nodeSelector") if isinstance(selector, dict) else None
    return dict(node_selector) if isinstance(node_selector, dict) else {}


def _architecture(gpu_arch: str, selector: dict[str, str]) -> str:
    if gpu_arch:
        return gpu_arch
    arch = architecture_from_node_selector(selector)
    if arch in GPU_ARCHITECTURES:
        return arch
    if arch:
        raise UserError(
            f'cannot determine GPU architecture: {NodeLabel.GPU_PRODUCT} "{selector[NodeLabel.GPU_PRODUCT]}" '
            f"in spec.orchestration.target.nodeSelector is not a known architecture; pass --gpu-arch"
        )
    raise UserError(
        "cannot determine GPU architecture: pass --gpu-arch or set "
        f"{NodeLabel.GPU_PRODUCT} in spec.orchestration.target.nodeSelector"
    )


@workflow_group.command("render")
@click.argument("file", type=click.Path(path_type=Path, allow_dash=True))
@click.option(
    "--platform",
    default="",
    help="Platform to render for: aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale. "
    "Without it (and without --nodes-file) overrides are left unresolved.",
)
@click.option(
    "--gpu-arch",
    "gpu_arch",
    default="",
    help="GPU architecture (h100, gb200, ... or a product label such as NVIDIA-GB300); "
    "defaults to the nvidia.com/gpu.product label of the target nodeSelector.",
)
@click.option(
    "--nodes-file",
    type=click.Path(path_type=Path, allow_dash=True),
    default=None,
    help="YAML Node objects to detect the platform and architecture from, instead of synthetic nodes.",
)
@output_option()
@user_errors
def render_command(file: Path, platform: str, gpu_arch: str, nodes_file: Path | None, output: str) -> None:
    """Render FILE, a Workflow, with the overrides that match the platform and GPU architecture.

    Overrides are resolved against synthetic nodes for --platform and --gpu-arch (or the nodes
    of --nodes-file), through the same detection and override code the controller runs. The
    gang-scheduling contract is checked on the result; a conflict is reported instead of a
    Workflow.
    """
    try:
        if platform:
            check_platform(platform)
        if gpu_arch:
            gpu_arch = check_architecture(gpu_arch)
    except ValueError as error:
        raise UserError(str(error)) from error
    if nodes_file is not None and (platform or gpu_arch):
        raise UserError("--nodes-file cannot be combined with --platform or --gpu-arch")
    document, _ = load_validated(file, Workflow)
    selector = _target_selector(document)

    if nodes_file is not None:
        nodes = load_nodes(nodes_file)
    else:
        arch = _architecture(gpu_arch, selector)
        if not platform:
            overrides = (document.get("spec") or {}).get("overrides") or []
            if overrides:
                click.echo(
                    f"note: no --platform given; {len(overrides)} override(s) left unresolved "
                    "(pass --platform to apply them)",
                    err=True,
                )
            annotations = dict((document.get("metadata") or {}).get("annotations") or {})
            annotations[Annotation.DETECTED_GPU_ARCHITECTURE] = arch
            document.setdefault("metadata", {})["annotations"] = annotations
            document.pop("status", None)
            emit(document, output)
            return
        nodes = synthetic_nodes(platform, arch, labels=selector)

    try:
        resolved = resolve_workflow(document, nodes)
    except ValueError as error:
        raise UserError(str(error)) from error
    for event in resolved.events:
        if event.type == EventType.WARNING:
            click.echo(f"warning: {event.reason}: {event.message}", err=True)
    emit(resolved.workflow, output)
