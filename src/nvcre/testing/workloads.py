"""Building test Workflows and playing the part of Kubeflow Trainer (TrainJob status)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from lightkube import Client

from nvcre.controllers import resources

POOL_LABEL = "nvcre.test/pool"

COMPUTE_DOMAIN_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "computedomains.resource.nvidia.com"},
    "spec": {
        "group": "resource.nvidia.com",
        "names": {"kind": "ComputeDomain", "plural": "computedomains", "singular": "computedomain"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}
"""Serves the ComputeDomain kind (NVIDIA's DRA driver, which does not run here) for dependencies."""


def pool_name() -> str:
    return f"pool-{secrets.token_hex(3)}"


def training_runtime(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {"spec": {"containers": [{"name": "node", "image": "img"}]}}
                                }
                            },
                        }
                    ]
                }
            },
        },
    }


def workflow(
    name: str,
    namespace: str,
    pool: str,
    num_nodes: int,
    *,
    orchestration: dict[str, Any] | None = None,
    dependencies: list[dict[str, Any]] | None = None,
    job_spec: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Workflow targeting the nodes of ``pool`` that runs a TrainJob per group."""
    runtime = f"{name}-rt"
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "jobTemplate": {
                "spec": {
                    "workload": {
                        "trainJob": {
                            "runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
                            "trainer": {"image": "img", "numNodes": num_nodes},
                        }
                    },
                    **(job_spec or {}),
                }
            },
            "orchestration": {"target": {"nodeSelector": {POOL_LABEL: pool}}, **(orchestration or {})},
            "dependencies": [training_runtime(runtime), *(dependencies or [])],
            **spec,
        },
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def finish_trainjob(kube: Client, namespace: str, name: str, *, succeeded: bool, message: str = "") -> None:
    """Set the TrainJob's Complete or Failed condition, as Trainer does when its JobSet ends."""
    live = kube.get(resources.TrainJob, name, namespace=namespace).to_dict()
    condition = {
        "type": "Complete" if succeeded else "Failed",
        "status": "True",
        "reason": "JobSetCompleted" if succeeded else "JobSetFailed",
        "message": message or ("jobset completed" if succeeded else "jobset failed"),
        "lastTransitionTime": _now(),
    }
    live.update(apiVersion="trainer.kubeflow.org/v1alpha1", kind="TrainJob")
    live["status"] = {"conditions": [condition]}
    kube.replace(resources.TrainJob.Status.from_dict(live), name, namespace=namespace)
