"""The shared Pod and Node caches: what they hold and how they are indexed (set up once).

The manager caches only what the controllers read. Pods: only workload pods, those labelled
``nvcre.nvidia.com/job`` (the API server filters the list and watch; a pod that loses the label
arrives as DELETED, carrying its last labelled state, and one that gains it as ADDED), so the
cache does not grow with the other pods of the cluster; of a pod's spec it keeps only the node
and the containers' names. Nodes: every node (discovery needs them all) without
``status.images``, the largest part of a GPU node and read by no controller.
"""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Node, Pod

from nvcre import resources
from nvcre.api.v1alpha1.constants import Label
from nvcre.objects import Obj
from nvcre.runtime.informer import Informer
from nvcre.runtime.manager import Manager

POD_JOB_INDEX = "job"
"""Workload pods by the nvcre Job they belong to (``nvcre.nvidia.com/job`` label)."""
POD_NODE_INDEX = "spec.nodeName"
"""Pods by the node they run on."""

WORKLOAD_PODS: dict[str, Any] = {Label.JOB: None}
"""The label selector of the Pod cache: the label exists."""


def _job_of(pod: Obj) -> list[str]:
    job = (pod["metadata"].get("labels") or {}).get(Label.JOB)
    return [job] if job else []


def _node_of(pod: Obj) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


def trim_pod(pod: Obj) -> Obj:
    """A workload Pod as the controllers read it: its metadata and status whole, and of its spec
    only ``nodeName`` and the containers' names (the container a log is read from). The rest of
    the spec (commands, env, resources, volumes, the affinity naming every node of the group) is
    most of a pod and read by no controller."""
    spec = pod.get("spec") or {}
    kept: dict[str, Any] = {
        "containers": [{"name": c["name"]} for c in spec.get("containers") or () if "name" in c]
    }
    if spec.get("nodeName"):
        kept["nodeName"] = spec["nodeName"]
    pod["spec"] = kept
    return pod


def pods(manager: Manager) -> Informer:
    """The shared informer of workload pods, trimmed, with both indexes."""
    informer = manager.informer(Pod, labels=WORKLOAD_PODS, transform=trim_pod)
    if not informer.has_index(POD_JOB_INDEX):
        informer.add_index(POD_JOB_INDEX, _job_of)
        informer.add_index(POD_NODE_INDEX, _node_of)
    return informer


def trim_node(node: Obj) -> Obj:
    """A Node as the controllers read it: without ``status.images`` (the images the kubelet
    holds, up to 50 names and sizes per node). Everything else stays, because node-health CEL
    expressions may read any other field of the Node."""
    (node.get("status") or {}).pop("images", None)
    return node


def nodes(manager: Manager) -> Informer:
    """The shared Node informer (every controller reads nodes through this one)."""
    return manager.informer(Node, transform=trim_node)


def metadata_only(obj: Obj) -> Obj:
    """An object as a cache that only needs whether it exists, its labels, owners and finalizers
    keeps it: not what it says."""
    return {key: obj[key] for key in ("apiVersion", "kind", "metadata") if key in obj}


def jobsets(manager: Manager) -> Informer:
    """The shared JobSet informer, metadata only: an ended run's release check finds each Job's
    JobSet by the name it inherits from the Job's TrainJob (JobSet sets no label nvcre renders)."""
    return manager.informer(resources.JobSet, transform=metadata_only)


def runtime_copies(manager: Manager) -> Informer:
    """The shared informer of Job-scoped TrainingRuntime copies (labelled with their Job),
    metadata only: the Job controller waits for its copy, an ended run's release for all to go."""
    return manager.informer(resources.TrainingRuntime, labels={Label.JOB: None}, transform=metadata_only)
