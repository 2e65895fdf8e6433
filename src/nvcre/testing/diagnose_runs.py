"""Diagnose runs on a sandbox: the Workflow nvcre renders for the example WorkloadRun on the
sandbox's nodes, and the node results its status points to."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap, Node

from nvcre import resources
from nvcre.api.v1alpha1.constants import SUCCEEDED_NODES_KEY
from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.orchestration.result_configmaps import decode_succeeded
from nvcre.render.workloadrun import build_workflow
from nvcre.testing.inspect import failed_nodes_record

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workloadrun" / "basic.yaml"
BLOCK = "topology.k8s.aws/network-node-layer-1"
"""The network-block label of the sandbox's AWS nodes."""
NAMESPACE = "default"


def example_workflow(
    kube: Client,
    name: str,
    *,
    target: dict[str, Any] | None = None,
    orchestration: dict[str, Any] | None = None,
    num_nodes: int | None = None,
) -> dict[str, Any]:
    """The Workflow nvcre renders for the example WorkloadRun on these nodes, with the fields of
    ``orchestration`` set (``diagnose`` for diagnose mode), on the nodes ``target`` adds to the
    rendered target and in groups of ``num_nodes``, when given."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"].update(name=name, namespace=NAMESPACE)
    document["spec"]["framework"]["mpi"]["args"] = ["-b", "1G", "-e", "16G", "-f", "2", "-n", "5"]
    document["spec"]["bandwidthMeasurement"] = {
        "logProfileRef": "nccl-bandwidth",
        "testType": "all_reduce",
        "sampleInterval": "5s",
    }
    document["spec"]["thresholds"] = {"busBandwidthGBps": "value >= 300"}
    if num_nodes is not None:
        document["spec"]["numNodes"] = num_nodes
    nodes = [n.to_dict() for n in kube.list(Node)]
    workflow = build_workflow(WorkloadRun.model_validate(document), nodes, resolve=False).workflow
    rendered = workflow["spec"]["orchestration"]
    rendered.update(orchestration or {})
    if target:
        rendered["target"] = {**(rendered.get("target") or {}), **target}
    kube.create(resources.Workflow.from_dict(workflow))
    return workflow


def node_results(kube: Client, status: dict[str, Any]) -> tuple[list[dict[str, str]], list[str]]:
    def payload(ref: str, key: str) -> bytes | None:
        name = (status.get(ref) or {}).get("name")
        if not name:
            return None
        cm = kube.get(ConfigMap, name, namespace=NAMESPACE)
        return base64.b64decode((cm.binaryData or {}).get(key, "")) or None

    return (
        failed_nodes_record(kube, NAMESPACE, status["failedNodesRef"]["name"])
        if status.get("failedNodesRef")
        else [],
        decode_succeeded(payload("succeededNodesRef", SUCCEEDED_NODES_KEY)),
    )
