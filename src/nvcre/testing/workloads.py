"""Building test Workflows and playing the part of Kubeflow Trainer and JobSet (TrainJob status,
the pods of a rendered TrainJob)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from lightkube import ApiError, Client
from lightkube.codecs import from_dict

from nvcre import resources
from nvcre.api.v1alpha1.constants import (
    TRAINJOB_ANCESTOR_STEP_TRAINER,
    WORKLOAD_CONTAINER_NAME,
    Label,
    ReplicatedJob,
)
from nvcre.controllers.children import owner_reference
from nvcre.render.workloadrun.volumes import MPI_SSH_AUTH_VOLUME
from nvcre.testing.builders import TrainingRuntime, Workflow
from nvcre.testing.builders import pool_name as pool_name  # re-exported: tests read it here
from nvcre.testing.nodes import POOL_LABEL as POOL_LABEL  # re-exported: tests read it here
from nvcre.testing.waiting import wait_for
from nvcre.workload.ownership import JOBSET_GROUP, JOBSET_VERSION

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"

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


def training_runtime(name: str, *, launcher: bool = False) -> dict[str, Any]:
    """A TrainingRuntime with a ``node`` job (and an MPI ``launcher`` job first, if asked)."""
    return TrainingRuntime(name).launcher(launcher).obj()


def workflow(
    name: str,
    namespace: str,
    pool: str,
    num_nodes: int,
    *,
    orchestration: dict[str, Any] | None = None,
    dependencies: list[dict[str, Any]] | None = None,
    job_spec: dict[str, Any] | None = None,
    mpi: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A Workflow targeting the nodes of ``pool`` that runs a TrainJob per group; with ``mpi``,
    its runtime has a launcher, which the TrainJob's patch names as the catalog's MPI entries do."""
    built = Workflow(name).namespace(namespace).nodes(num_nodes).with_runtime(launcher=mpi).pool(pool)
    built.dependencies(*(dependencies or [])).orchestration(**(orchestration or {}))
    return built.job(**(job_spec or {})).spec(**spec).obj()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_MEASUREMENTS = (
    ("bandwidthMeasurement", resources.BandwidthMeasurement, "bandwidth"),
    ("goodputMeasurement", resources.GoodputMeasurement, "goodput"),
)


def _complete_once(kube: Client, resource: Any, name: str, namespace: str, reason: str) -> bool:
    """Mark one measurement Complete; False on a 409 (its controller wrote meanwhile: try again)."""
    try:
        live = dict(kube.get(resource, name, namespace=namespace).to_dict())
    except ApiError as error:
        if error.status.code == 404:
            return False  # not created yet
        raise
    if any(c.get("type") == "Complete" for c in (live.get("status") or {}).get("conditions") or ()):
        return True
    live["status"] = {
        "conditions": [
            {"type": t, "status": v, "reason": reason, "message": "no log", "lastTransitionTime": _now()}
            for t, v in (("Measuring", "False"), ("Complete", "True"))
        ]
    }
    return replace_status(kube, resource, live)


def replace_status(kube: Client, resource: Any, obj: dict[str, Any]) -> bool:
    """Write ``obj``'s status as read (its resourceVersion); False on a 409: a controller wrote
    it meanwhile, so read again and retry (e.g. inside :func:`wait_for`)."""
    meta = obj["metadata"]
    try:
        kube.replace(resource.Status.from_dict(obj), meta["name"], namespace=meta.get("namespace"))
    except ApiError as error:
        if error.status.code == 409:
            return False
        raise
    return True


def _wanted_measurements(kube: Client, namespace: str, job: str) -> list[tuple[Any, str]]:
    """The measurements the Job asks for: (resource, name) of each."""
    spec = kube.get(resources.Job, job, namespace=namespace).to_dict()["spec"]
    return [(resource, f"{job}-{suffix}") for field, resource, suffix in _MEASUREMENTS if spec.get(field)]


def complete_measurements(kube: Client, namespace: str, job: str, reason: str = "LogsUnavailable") -> None:
    """Complete the measurements the Job asks for, as their controller does when it finds no log
    (the pods here are no workload's): terminal, with nothing a verdict could use."""
    for resource, name in _wanted_measurements(kube, namespace, job):
        wait_for(
            partial(_complete_once, kube, resource, name, namespace, reason),
            120,  # the Job controller creates it; under injected faults that can take a while
            what=f"{resource.__name__} {name} completed",
        )


def try_complete_measurements(
    kube: Client, namespace: str, job: str, reason: str = "LogsUnavailable"
) -> bool:
    """One attempt of :func:`complete_measurements` that never waits: True once every measurement
    the Job asks for is Complete, False while one is not created yet (or was written meanwhile).
    For a caller whose loop must go on meanwhile (one that also lifts injected faults)."""
    return all(
        [
            _complete_once(kube, resource, name, namespace, reason)
            for resource, name in _wanted_measurements(kube, namespace, job)
        ]
    )


def finish_trainjob(
    kube: Client, namespace: str, name: str, *, succeeded: bool, message: str = "", measurements: bool = True
) -> None:
    """Set the TrainJob's Complete or Failed condition, as Trainer does when its JobSet ends; with
    ``measurements``, first complete the Job's measurements (:func:`complete_measurements`), so
    that the Job's verdict need not wait ``measurementTimeout`` for them."""
    live = kube.get(resources.TrainJob, name, namespace=namespace).to_dict()
    job = ((live.get("metadata") or {}).get("labels") or {}).get("nvcre.nvidia.com/job")
    if measurements and succeeded and job:
        complete_measurements(kube, namespace, job)
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


def _merge(base: Any, patch: Any) -> Any:
    """A runtime patch over a template: maps merged key by key, lists of named items by name
    (containers, volumes), any other value replaced, as Trainer applies a pod template patch."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    named = isinstance(base, list) and isinstance(patch, list)
    if named and all(isinstance(i, dict) and "name" in i for i in [*base, *patch]):
        merged = {i["name"]: i for i in base}
        for item in patch:
            merged[item["name"]] = _merge(merged[item["name"]], item) if item["name"] in merged else item
        return list(merged.values())
    return copy.deepcopy(patch)


def _pinned_hosts(pod_spec: dict[str, Any]) -> list[str]:
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or ():
        for expression in term.get("matchExpressions") or ():
            if expression.get("key") == "kubernetes.io/hostname" and expression.get("operator") == "In":
                return list(expression.get("values") or ())
    return []


def _with_ssh_auth_volume(pod_spec: dict[str, Any], trainjob: str) -> None:
    """The volume of the SSH key Secret Trainer's MPI plugin gives every pod of an MPI runtime
    (the runtime's containers mount it; the Secret itself is Trainer's)."""
    volumes = pod_spec.setdefault("volumes", [])
    if not any(v.get("name") == MPI_SSH_AUTH_VOLUME for v in volumes):
        volumes.append({"name": MPI_SSH_AUTH_VOLUME, "secret": {"secretName": f"{trainjob}-mpi-ssh-auth"}})


def pods_of(trainjob: dict[str, Any], runtime: dict[str, Any], *, bind: bool = True) -> list[dict[str, Any]]:
    """The pods JobSet would run for ``trainjob`` (as nvcre rendered it) on ``runtime``.

    Each replicated job of the TrainingRuntime gets its pod template with the TrainJob's runtime
    patches applied in order (so every label, affinity and toleration comes from what the
    controllers wrote; nothing is set here by hand), plus JobSet's own labels (and, under an MPI
    runtime, the SSH key volume Trainer's MPI plugin adds); the worker job
    has ``trainer.numNodes`` pods, any other (the MPI launcher) one. With ``bind``, each pod is
    bound to a node as the scheduler would: the hosts of its pinned node affinity in order (the
    launcher beside the first worker). Without a scheduler, Trainer or JobSet in the test control
    plane, this is how a test gets the pods a real cluster would have.
    """
    name, namespace, spec = (
        trainjob["metadata"]["name"],
        trainjob["metadata"].get("namespace"),
        trainjob["spec"],
    )
    pods: list[dict[str, Any]] = []
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        template = copy.deepcopy(job["template"]["spec"]["template"])
        for patch in spec.get("runtimePatches") or ():
            patched = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
            for entry in (patched.get("spec") or {}).get("replicatedJobs") or ():
                pod_patch = (((entry.get("template") or {}).get("spec") or {}).get("template")) or {}
                if entry.get("name") == job["name"] and pod_patch:
                    template = _merge(template, pod_patch)
        launcher = job["name"] == ReplicatedJob.LAUNCHER
        count = 1 if launcher else int((spec.get("trainer") or {}).get("numNodes") or 1)
        hosts = _pinned_hosts(template.get("spec") or {})
        for index in range(count):
            meta = template.get("metadata") or {}
            labels = {
                **(meta.get("labels") or {}),
                JOBSET_NAME_LABEL: name,
                REPLICATED_JOB_LABEL: job["name"],
            }
            pod_spec = copy.deepcopy(template.get("spec") or {})
            if "mpi" in (runtime["spec"].get("mlPolicy") or {}):
                _with_ssh_auth_volume(pod_spec, name)
            if bind and index < len(hosts):
                pod_spec["nodeName"] = hosts[index]
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{job['name']}-0-{index}",
                        "namespace": namespace,
                        "labels": labels,
                        "annotations": dict(meta.get("annotations") or {}),
                    },
                    "spec": pod_spec,
                }
            )
    return pods


def _batch_job_spec(pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The batch Job spec JobSet gives one replicated job (its pods' template, Indexed)."""
    template = copy.deepcopy(pods[0])
    spec = template["spec"]
    spec.pop("nodeName", None)
    spec.setdefault("restartPolicy", "Never")
    return {
        "completions": len(pods),
        "parallelism": len(pods),
        "completionMode": "Indexed",
        "template": {"metadata": {"labels": template["metadata"]["labels"]}, "spec": spec},
    }


def create_chain(
    create: Callable[[dict[str, Any]], dict[str, Any]],
    trainjob: dict[str, Any],
    runtime: dict[str, Any],
    *,
    bind: bool = True,
    annotations: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Create what Trainer, JobSet and the Job controller make of ``trainjob`` (as stored, with
    its UID): its JobSet, a batch Job per replicated job and their pods (:func:`pods_of`, with
    extra ``annotations``), each owned through a controller ownerReference by the one before.

    ``create`` stores one object and returns it as stored, with the UID it was given: the API
    server's create (:func:`creator`) or a fake client's ``put``. Returns the pods created. The
    test control plane runs no Trainer, JobSet or Job controller: this is how a test gets the
    chain of owners a real cluster has.
    """
    meta = trainjob["metadata"]
    pods = pods_of(trainjob, runtime, bind=bind)
    by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        by_job.setdefault(pod["metadata"]["labels"][REPLICATED_JOB_LABEL], []).append(pod)
    jobset = create(
        {
            "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
            "kind": "JobSet",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "ownerReferences": [owner_reference(trainjob)],
            },
            "spec": {
                "replicatedJobs": [
                    {"name": name, "replicas": 1, "template": {"spec": _batch_job_spec(members)}}
                    for name, members in by_job.items()
                ]
            },
        }
    )
    created = []
    for name, members in by_job.items():
        job = create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"{meta['name']}-{name}-0",
                    "namespace": meta.get("namespace"),
                    "labels": {JOBSET_NAME_LABEL: meta["name"], REPLICATED_JOB_LABEL: name},
                    "ownerReferences": [owner_reference(jobset)],
                },
                "spec": _batch_job_spec(members),
            }
        )
        for index, pod in enumerate(members):
            pod["metadata"]["ownerReferences"] = [owner_reference(job)]
            pod["metadata"]["labels"].update(
                {
                    "batch.kubernetes.io/job-name": job["metadata"]["name"],
                    "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
                    "jobset.sigs.k8s.io/job-index": "0",
                    "batch.kubernetes.io/job-completion-index": str(index),
                }
            )
            pod["metadata"]["annotations"].update(annotations or {})
            created.append(create(pod))
    return created


def creator(kube: Client) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """:func:`create_chain`'s ``create`` on the API server."""

    def create(obj: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = kube.create(from_dict(obj)).to_dict()  # type: ignore[no-untyped-call]
        return created

    return create


#: The port Trainer's torch policy gives ``PET_MASTER_PORT``.
TORCH_MASTER_PORT = 29400
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def with_trainer(
    pods: list[dict[str, Any]], trainjob: dict[str, Any], runtime: dict[str, Any]
) -> list[dict[str, Any]]:
    """``pods`` (of :func:`pods_of`) with the TrainJob's ``trainer`` applied as Kubeflow Trainer
    applies it: the workload container (``node``) of the replicated job labelled
    ``trainjob-ancestor-step: trainer`` (the torch ``node`` job, the MPI ``launcher``) gets the
    trainer's image, command and args, its env merged by name (the trainer's wins), and the
    policy's variables: under torch the ``PET_*`` torchrun reads (node count, processes per
    node, the node rank from the pod's completion index, the first pod as master), under
    OpenMPI the ``OMPI_MCA_*`` defaults (the hostfile, one slot per process per node)."""
    name, spec = trainjob["metadata"]["name"], trainjob["spec"]
    trainer = spec.get("trainer") or {}
    steps = {
        j["name"]
        for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        if ((j.get("template") or {}).get("metadata") or {})
        .get("labels", {})
        .get(Label.TRAINJOB_ANCESTOR_STEP)
        == TRAINJOB_ANCESTOR_STEP_TRAINER
    }
    policy = runtime["spec"].get("mlPolicy") or {}
    policy_env: list[dict[str, Any]] = []
    if "mpi" in policy:
        slots = trainer.get("numProcPerNode") or (policy.get("mpi") or {}).get("numProcPerNode") or 1
        policy_env = [
            {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
            {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
            {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
            {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
        ]
    if "torch" in policy:
        procs = trainer.get("numProcPerNode") or (policy.get("torch") or {}).get("numProcPerNode") or 1
        policy_env = [
            {"name": "PET_NNODES", "value": str(trainer.get("numNodes") or policy.get("numNodes") or 1)},
            {"name": "PET_NPROC_PER_NODE", "value": str(procs)},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{ReplicatedJob.NODE}-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(TORCH_MASTER_PORT)},
        ]
    out = copy.deepcopy(pods)
    for pod in out:
        if pod["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") not in steps:
            continue
        for container in pod["spec"].get("containers") or ():
            if container.get("name") != WORKLOAD_CONTAINER_NAME:
                continue
            for key in ("image", "command", "args"):
                if key in trainer:
                    container[key] = copy.deepcopy(trainer[key])
            env = {e["name"]: e for e in container.get("env") or ()}
            for item in [*(trainer.get("env") or ()), *policy_env]:
                env[item["name"]] = copy.deepcopy(item)
            container["env"] = list(env.values())
    return out


def create_trainjob_pods(
    kube: Client,
    namespace: str,
    name: str,
    *,
    bind: bool = True,
    annotations: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Create the TrainJob ``name``'s JobSet, batch Jobs and pods (:func:`create_chain`, with
    extra pod ``annotations``, e.g. kwok's phase) on the API server; returns the pods."""
    trainjob = kube.get(resources.TrainJob, name, namespace=namespace).to_dict()
    runtime_name = trainjob["spec"]["runtimeRef"]["name"]
    runtime = kube.get(resources.TrainingRuntime, runtime_name, namespace=namespace).to_dict()
    return create_chain(creator(kube), trainjob, runtime, bind=bind, annotations=annotations)
