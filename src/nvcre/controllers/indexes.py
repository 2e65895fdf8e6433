"""Cache indexes several controllers share (registered once per informer)."""

from __future__ import annotations

from lightkube.resources.core_v1 import Pod

from nvcre.api.v1alpha1.constants import Label
from nvcre.runtime.informer import Informer
from nvcre.runtime.manager import Manager
from nvcre.runtime.objects import Obj

POD_JOB_INDEX = "job"
"""Workload pods by the nvcre Job they belong to (``nvcre.nvidia.com/job`` label)."""
POD_NODE_INDEX = "spec.nodeName"
"""Pods by the node they run on."""


def _job_of(pod: Obj) -> list[str]:
    job = (pod["metadata"].get("labels") or {}).get(Label.JOB)
    return [job] if job else []


def _node_of(pod: Obj) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


def pods(manager: Manager) -> Informer:
    """The shared Pod informer with both indexes."""
    informer = manager.informer(Pod)
    if not informer.has_index(POD_JOB_INDEX):
        informer.add_index(POD_JOB_INDEX, _job_of)
        informer.add_index(POD_NODE_INDEX, _node_of)
    return informer
