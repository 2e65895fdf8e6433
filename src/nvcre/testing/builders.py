"""Chained builders of the objects a user or the cluster hands nvcre, for tests.

One wrapper per kind, as JobSet's and Kubeflow Trainer's test wrappers: each setter returns the
builder, ``obj()`` returns the plain dict the API takes (a fresh copy each call)::

    WorkloadRun("x").namespace(ns).pool(pool).nodes(4).threshold("busBandwidthGBps", "value >= 400").obj()
    Workflow("wf").namespace(ns).pool(pool).nodes(2).with_runtime(launcher=True).obj()
    TrainingRuntime("rt").launcher().obj()
    GpuNode("gpu-node-000").product("NVIDIA-H200").pool(pool).obj()   # a lightkube Node

Every builder starts from the smallest object its kind's validation accepts, so a test names
only what it is about. ``set("spec.a.b", value)`` writes any other field (``DELETE`` removes it;
a path is split at its dots, so a map key with a dot is set through its parent map).
These are for inputs (what a user writes, what a cluster holds); what nvcre renders (pods,
labels it sets) comes from nvcre itself, never from here.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

from lightkube.models.core_v1 import Taint
from lightkube.resources.core_v1 import Node

from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    TRAINER_API_VERSION,
    Kind,
    ReplicatedJob,
    TrainerKind,
)
from nvcre.testing.nodes import POOL_LABEL, GpuNodeSpec, gpu_node

DELETE = "<delete>"
"""The value :meth:`Builder.set` (and :func:`at`) reads as "remove this field"."""

IMAGE = "nvcr.io/nvidia/pytorch:26.01-py3"
MPI_FRAMEWORK: dict[str, Any] = {
    "mpi": {"binary": "/bin/all_reduce_perf_mpi", "mpirunPath": "/usr/bin/mpirun"}
}
"""The framework of the smallest WorkloadRun: an MPI all-reduce."""
CATALOG_MANAGER = "nvcre.nvidia.com/catalog"


def at(base: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``base`` with the dotted ``path`` set; the value :data:`DELETE` removes it."""
    doc = copy.deepcopy(dict(base))
    _put(doc, path, value)
    return doc


def _put(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    if isinstance(value, str) and value == DELETE:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


class Builder:
    """An object of one kind, built up by chained setters; :meth:`obj` returns it."""

    api_version: str = API_VERSION
    kind: str = ""

    def __init__(self, name: str, spec: Mapping[str, Any] | None = None) -> None:
        self._doc: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": copy.deepcopy(dict(spec or {})),
        }

    # --- any kind ---------------------------------------------------------------------------------

    def namespace(self, namespace: str | None) -> Self:
        if namespace is None:
            self._doc["metadata"].pop("namespace", None)
        else:
            self._doc["metadata"]["namespace"] = namespace
        return self

    def labels(self, **labels: str) -> Self:
        return self.label_map(labels)

    def label_map(self, labels: Mapping[str, str]) -> Self:
        self._doc["metadata"].setdefault("labels", {}).update(labels)
        return self

    def annotations(self, annotations: Mapping[str, str]) -> Self:
        self._doc["metadata"].setdefault("annotations", {}).update(annotations)
        return self

    def set(self, path: str, value: Any) -> Self:
        """Set the dotted ``path`` (from the object's root: ``spec.x.y``); :data:`DELETE` removes it."""
        _put(self._doc, path, value)
        return self

    def spec(self, **fields: Any) -> Self:
        """Set top-level spec fields (:data:`DELETE` removes one)."""
        for key, value in fields.items():
            self.set(f"spec.{key}", value)
        return self

    def apply(self, change: Callable[[dict[str, Any]], None]) -> Self:
        """Let ``change`` edit the document in place (for what no setter says)."""
        change(self._doc)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc)

    # --- fields several nvcre kinds share ---------------------------------------------------------

    _spec_root = "spec"
    """Where the kind's thresholds, measurements and health monitor live."""

    def threshold(self, key: str, expression: str) -> Self:
        return self.set(f"{self._spec_root}.thresholds.{key}", expression)

    def thresholds(self, thresholds: Mapping[str, str]) -> Self:
        return self.set(f"{self._spec_root}.thresholds", dict(thresholds))

    def bandwidth(
        self, profile: str = "nccl-bandwidth", sample_interval: str | None = None, **more: Any
    ) -> Self:
        return self.set(
            f"{self._spec_root}.bandwidthMeasurement", _measurement(profile, sample_interval, more)
        )

    def goodput(
        self, profile: str = "nemo-training", sample_interval: str | None = None, **more: Any
    ) -> Self:
        return self.set(f"{self._spec_root}.goodputMeasurement", _measurement(profile, sample_interval, more))

    def health(self, expression: str) -> Self:
        return self.set(f"{self._spec_root}.nodeHealthMonitor", {"cel": {"expression": expression}})


def _measurement(profile: str, sample_interval: str | None, more: Mapping[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {"logProfileRef": profile, **more}
    if sample_interval is not None:
        config["sampleInterval"] = sample_interval
    return config


def selector(pool: str | None = None, **labels: str) -> dict[str, Any]:
    """A ``target``: the nodes labelled ``POOL_LABEL=pool`` (and ``labels``)."""
    match = {POOL_LABEL: pool} if pool else {}
    return {"nodeSelector": {**match, **labels}}


# --- WorkloadRun ---------------------------------------------------------------------------------


class WorkloadRun(Builder):
    """``WorkloadRun("run")``: an MPI all-reduce on 2 nodes of the default image."""

    kind = Kind.WORKLOAD_RUN

    def __init__(self, name: str = "run") -> None:
        super().__init__(name, {"image": IMAGE, "framework": MPI_FRAMEWORK, "numNodes": 2})

    def nodes(self, count: Any) -> Self:
        return self.set("spec.numNodes", count)

    def image(self, image: Any) -> Self:
        return self.set("spec.image", image)

    def framework(self, framework: Mapping[str, Any]) -> Self:
        return self.set("spec.framework", dict(framework))

    def torch(self, script: str = "train.py", **fields: Any) -> Self:
        return self.framework({"torch": {"script": script, **fields}})

    def exec(self, *command: str, **fields: Any) -> Self:
        return self.framework({"exec": {"command": list(command), **fields}})

    def pool(self, pool: str, **labels: str) -> Self:
        return self.set("spec.target", selector(pool, **labels))

    def target(self, target: Mapping[str, Any]) -> Self:
        return self.set("spec.target", dict(target))

    def gpus(self, count: int) -> Self:
        return self.set("spec.gpusPerNode", count)

    def override(self, job_template: Mapping[str, Any], when: Mapping[str, Any] | None = None) -> Self:
        self._doc["spec"].setdefault("overrides", []).append(override(when, job_template=job_template))
        return self


# --- Certification -------------------------------------------------------------------------------


def category(
    domain: str = "communication", variant: str = "nccl-all-reduce", **options: Any
) -> dict[str, Any]:
    """One Certification category (``options`` as its ``options`` map, when given)."""
    entry: dict[str, Any] = {"domain": domain, "variant": variant}
    if options:
        entry["options"] = options
    return entry


class Certification(Builder):
    """``Certification("cert")``: one all-reduce category on every node."""

    kind = Kind.CERTIFICATION

    def __init__(self, name: str = "cert") -> None:
        super().__init__(name, {"target": {}, "categories": [category()]})

    def pool(self, pool: str, **labels: str) -> Self:
        return self.set("spec.target", selector(pool, **labels))

    def target(self, target: Mapping[str, Any]) -> Self:
        return self.set("spec.target", dict(target))

    def categories(self, *categories: Mapping[str, Any]) -> Self:
        return self.set("spec.categories", [dict(c) for c in categories])

    def allow_missing_data(self, allow: bool = True) -> Self:
        return self.set("spec.allowMissingData", allow)


# --- Trainer kinds -------------------------------------------------------------------------------


def replicated_job(
    name: str,
    image: str = "img",
    container: str | None = None,
    *,
    container_fields: Mapping[str, Any] | None = None,
    **pod: Any,
) -> dict[str, Any]:
    """One replicated job of a TrainingRuntime: a pod (``pod``: its other spec fields) of one
    container, named ``container`` (``name`` unless given), with ``container_fields``."""
    main = {"name": container or name, "image": image, **copy.deepcopy(dict(container_fields or {}))}
    spec = {"containers": [main], **copy.deepcopy(pod)}
    return {"name": name, "template": {"spec": {"template": {"spec": spec}}}}


class TrainingRuntime(Builder):
    """``TrainingRuntime("rt")``: one ``node`` job; :meth:`launcher` puts an MPI launcher first."""

    api_version = TRAINER_API_VERSION
    kind = TrainerKind.TRAINING_RUNTIME

    def __init__(self, name: str = "rt") -> None:
        super().__init__(name, {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": []}}})
        self._jobs: list[dict[str, Any]] = [replicated_job(ReplicatedJob.NODE)]

    def launcher(self, enabled: bool = True) -> Self:
        self._jobs = [j for j in self._jobs if j["name"] != ReplicatedJob.LAUNCHER]
        if enabled:
            self._jobs.insert(0, replicated_job(ReplicatedJob.LAUNCHER))
        return self

    def jobs(self, *jobs: Mapping[str, Any]) -> Self:
        """Replace the replicated jobs (see :func:`replicated_job`)."""
        self._jobs = [copy.deepcopy(dict(j)) for j in jobs]
        return self

    def ml_policy(self, **policy: Any) -> Self:
        return self.set("spec.mlPolicy", {"numNodes": 1, **policy})

    def cluster_scoped(self) -> Self:
        self._doc["kind"] = TrainerKind.CLUSTER_TRAINING_RUNTIME
        return self

    def obj(self) -> dict[str, Any]:
        doc = super().obj()
        doc["spec"]["template"]["spec"]["replicatedJobs"] = copy.deepcopy(self._jobs)
        return doc


def train_job_spec(
    runtime: str = "rt", nodes: int = 1, image: str = "img", *, mpi: bool = False, **trainer: Any
) -> dict[str, Any]:
    """A Job's ``workload.trainJob``: ``runtime`` run on ``nodes`` nodes; with ``mpi``, the
    runtime patch names a launcher as the catalog's MPI entries do."""
    spec: dict[str, Any] = {
        "runtimeRef": {"name": runtime, "kind": TrainerKind.TRAINING_RUNTIME},
        "trainer": {"image": image, "numNodes": nodes, **trainer},
    }
    if mpi:
        names = [{"name": ReplicatedJob.NODE}, {"name": ReplicatedJob.LAUNCHER}]
        spec["runtimePatches"] = [
            {
                "manager": CATALOG_MANAGER,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": names}}},
            }
        ]
    return spec


class TrainJob(Builder):
    """``TrainJob("tj")``: the Trainer object itself (as a user, or a test seeding one, writes it)."""

    api_version = TRAINER_API_VERSION
    kind = TrainerKind.TRAIN_JOB

    def __init__(self, name: str = "tj", runtime: str = "rt", nodes: int = 1) -> None:
        super().__init__(name, train_job_spec(runtime, nodes))

    def nodes(self, count: int) -> Self:
        return self.set("spec.trainer.numNodes", count)

    def runtime(self, name: str, kind: str = TrainerKind.TRAINING_RUNTIME) -> Self:
        return self.set("spec.runtimeRef", {"name": name, "kind": kind})


# --- Job and Workflow ----------------------------------------------------------------------------


class Job(Builder):
    """``Job("job")``: a TrainJob of runtime ``rt`` on one node."""

    kind = Kind.JOB

    def __init__(self, name: str = "job") -> None:
        super().__init__(name, {"workload": {"trainJob": train_job_spec()}})

    def train_job(self, runtime: str = "rt", nodes: int = 1, **fields: Any) -> Self:
        return self.set("spec.workload.trainJob", train_job_spec(runtime, nodes, **fields))

    def nodes(self, count: int) -> Self:
        return self.set("spec.workload.trainJob.trainer.numNodes", count)


class Workflow(Builder):
    """``Workflow("wf")``: a Job template running runtime ``rt`` on one node, no target.

    :meth:`runtime` names the TrainingRuntime (added as a dependency by :meth:`with_runtime`);
    job-template fields (thresholds, measurements, health) go under ``spec.jobTemplate.spec``.
    """

    kind = Kind.WORKFLOW
    _spec_root = "spec.jobTemplate.spec"

    def __init__(self, name: str = "wf") -> None:
        super().__init__(
            name, {"jobTemplate": {"spec": {"workload": {"trainJob": train_job_spec()}}}, "orchestration": {}}
        )

    def train_job(self, runtime: str = "rt", nodes: int = 1, **fields: Any) -> Self:
        return self.set("spec.jobTemplate.spec.workload.trainJob", train_job_spec(runtime, nodes, **fields))

    def nodes(self, count: int) -> Self:
        return self.set("spec.jobTemplate.spec.workload.trainJob.trainer.numNodes", count)

    def job(self, **fields: Any) -> Self:
        """Set fields of the Job template's spec."""
        for key, value in fields.items():
            self.set(f"spec.jobTemplate.spec.{key}", value)
        return self

    def pool(self, pool: str, **labels: str) -> Self:
        return self.set("spec.orchestration.target", selector(pool, **labels))

    def orchestration(self, **fields: Any) -> Self:
        for key, value in fields.items():
            self.set(f"spec.orchestration.{key}", value)
        return self

    def dependencies(self, *objects: Mapping[str, Any]) -> Self:
        self._doc["spec"].setdefault("dependencies", []).extend(copy.deepcopy(dict(o)) for o in objects)
        return self

    def with_runtime(self, runtime: str | None = None, *, launcher: bool = False) -> Self:
        """Run on a TrainingRuntime named ``runtime`` (``<name>-rt`` unless given) it carries as
        its first dependency; ``launcher`` gives it an MPI launcher, named by the runtime patch."""
        runtime = runtime or f"{self._doc['metadata']['name']}-rt"
        job = self._doc["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]
        nodes = job["trainer"]["numNodes"]
        extra = {k: v for k, v in job["trainer"].items() if k not in ("image", "numNodes")}
        self.set(
            "spec.jobTemplate.spec.workload.trainJob",
            train_job_spec(runtime, nodes, job["trainer"]["image"], mpi=launcher, **extra),
        )
        self._doc["spec"].setdefault("dependencies", []).insert(
            0, TrainingRuntime(runtime).launcher(launcher).obj()
        )
        return self


# --- LogProfile and measurements -----------------------------------------------------------------


class LogProfile(Builder):
    """``LogProfile("nccl")``: an RFC 3339 timestamp and no patterns (cluster-scoped)."""

    kind = Kind.LOG_PROFILE

    def __init__(self, name: str = "nccl") -> None:
        super().__init__(name, {"timestamp": {"layout": "2006-01-02T15:04:05Z07:00"}, "patterns": {}})

    def layout(self, layout: str) -> Self:
        return self.set("spec.timestamp.layout", layout)

    def pattern(self, name: str, regex: str, **fields: Any) -> Self:
        return self.set(f"spec.patterns.{name}", {"regex": regex, **fields})

    def patterns(self, patterns: Mapping[str, Any]) -> Self:
        return self.set("spec.patterns", dict(patterns))


class _Measurement(Builder):
    default_profile = ""

    def __init__(self, name: str) -> None:
        super().__init__(name, {"logProfileRef": self.default_profile})

    def profile(self, name: str) -> Self:
        return self.set("spec.logProfileRef", name)

    def sample_interval(self, interval: str) -> Self:
        return self.set("spec.sampleInterval", interval)


class BandwidthMeasurement(_Measurement):
    """``BandwidthMeasurement("bw")``: read with the built-in ``nccl-bandwidth`` profile."""

    kind = Kind.BANDWIDTH_MEASUREMENT
    default_profile = "nccl-bandwidth"

    def __init__(self, name: str = "bw") -> None:
        super().__init__(name)


class GoodputMeasurement(_Measurement):
    """``GoodputMeasurement("gp")``: read with the built-in ``nemo-training`` profile."""

    kind = Kind.GOODPUT_MEASUREMENT
    default_profile = "nemo-training"

    def __init__(self, name: str = "gp") -> None:
        super().__init__(name)


# --- nodes ---------------------------------------------------------------------------------------


class GpuNode:
    """``GpuNode("gpu-node-000")``: a kwok GPU node (:func:`nvcre.testing.nodes.gpu_node`);
    ``obj()`` is the lightkube ``Node``, ``spec()`` the :class:`GpuNodeSpec` behind it."""

    def __init__(self, name: str = "gpu-node-000", spec: GpuNodeSpec | None = None) -> None:
        self.name = name
        self._fields: dict[str, Any] = dict((spec or GpuNodeSpec()).__dict__)

    def _with(self, **fields: Any) -> Self:
        self._fields.update(fields)
        return self

    def platform(self, platform: str) -> Self:
        return self._with(platform=platform)

    def product(self, product: str) -> Self:
        return self._with(product=product)

    def gpus(self, count: int) -> Self:
        return self._with(gpus=count)

    def clique(self, clique: str) -> Self:
        return self._with(clique=clique)

    def labels(self, labels: Mapping[str, str]) -> Self:
        return self._with(labels={**self._fields["labels"], **labels})

    def pool(self, pool: str) -> Self:
        return self.labels({POOL_LABEL: pool})

    def annotations(self, annotations: Mapping[str, str]) -> Self:
        return self._with(annotations={**self._fields["annotations"], **annotations})

    def resources(self, resources: Mapping[str, str]) -> Self:
        return self._with(extra_resources={**self._fields["extra_resources"], **resources})

    def taint(self, key: str, effect: str = "NoSchedule", value: str | None = None) -> Self:
        return self._with(taints=[*self._fields["taints"], Taint(key=key, effect=effect, value=value)])

    def unschedulable(self, cordoned: bool = True) -> Self:
        return self._with(unschedulable=cordoned)

    def spec(self) -> GpuNodeSpec:
        return GpuNodeSpec(**self._fields)

    def obj(self) -> Node:
        return gpu_node(self.name, self.spec())


def pool_spec(pool: str, **spec: Any) -> GpuNodeSpec:
    """A :class:`GpuNodeSpec` of the nodes labelled for ``pool`` (``spec``: its other fields,
    ``labels`` merged with the pool's)."""
    labels = {POOL_LABEL: pool, **spec.pop("labels", {})}
    return GpuNodeSpec(labels=labels, **spec)


def pool_name() -> str:
    """A new pool's name (a label value no other test uses)."""
    return f"pool-{secrets.token_hex(3)}"


def new_pool(gpu_nodes: Callable[..., Iterable[Node]], count: int, **spec: Any) -> tuple[str, list[str]]:
    """A new pool of ``count`` nodes (:func:`pool_nodes`): its name and its nodes' names."""
    pool = pool_name()
    return pool, pool_nodes(gpu_nodes, count, pool, **spec)


def pool_nodes(gpu_nodes: Callable[..., Iterable[Node]], count: int, pool: str, **spec: Any) -> list[str]:
    """Create ``count`` nodes of ``pool`` with the ``gpu_nodes`` fixture; their names, sorted."""
    return sorted(
        n.metadata.name for n in gpu_nodes(count, pool_spec(pool, **spec)) if n.metadata and n.metadata.name
    )


# --- overlays: the partial objects an override or a runtime patch merges in ----------------------


def job_overlay(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    pod_labels: Mapping[str, str] | None = None,
    **pod: Any,
) -> dict[str, Any]:
    """One replicated job as an overlay names it (merged by name): ``labels`` on its Job template,
    ``pod_labels`` on its pod template, ``pod`` fields of its pod spec (``None`` deletes one)."""
    template: dict[str, Any] = {}
    if labels is not None:
        template["metadata"] = {"labels": dict(labels)}
    inner: dict[str, Any] = {}
    if pod_labels is not None:
        inner["metadata"] = {"labels": dict(pod_labels)}
    if pod:
        inner["spec"] = copy.deepcopy(pod)
    if inner:
        template["spec"] = {"template": inner}
    return {"name": name, "template": template}


def override(
    when: Mapping[str, Any] | None = None,
    *,
    job_template: Mapping[str, Any] | None = None,
    dependencies: Iterable[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """One entry of ``spec.overrides``: where it applies (``when``, everywhere when empty), the
    Job template fields it merges and the dependencies (overlays) it merges by name."""
    entry: dict[str, Any] = {"when": copy.deepcopy(dict(when or {}))}
    if job_template is not None:
        entry["jobTemplate"] = copy.deepcopy(dict(job_template))
    if dependencies is not None:
        entry["dependencies"] = [copy.deepcopy(dict(d)) for d in dependencies]
    return entry


def _replicated_jobs(jobs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {"template": {"spec": {"replicatedJobs": [copy.deepcopy(dict(j)) for j in jobs]}}}


def runtime_overlay(name: str, *jobs: Mapping[str, Any]) -> dict[str, Any]:
    """A TrainingRuntime as an override's ``dependencies`` lists it: only the jobs it changes."""
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": TrainerKind.TRAINING_RUNTIME,
        "metadata": {"name": name},
        "spec": _replicated_jobs(jobs),
    }


def runtime_patch(manager: str, *jobs: Mapping[str, Any]) -> dict[str, Any]:
    """One of a TrainJob's ``runtimePatches``: ``manager``'s change to the jobs named."""
    return {"manager": manager, "trainingRuntimeSpec": _replicated_jobs(jobs)}


__all__ = [
    "DELETE",
    "BandwidthMeasurement",
    "Builder",
    "Certification",
    "GoodputMeasurement",
    "GpuNode",
    "Job",
    "LogProfile",
    "TrainJob",
    "TrainingRuntime",
    "Workflow",
    "WorkloadRun",
    "at",
    "category",
    "job_overlay",
    "new_pool",
    "override",
    "pool_name",
    "pool_nodes",
    "pool_spec",
    "replicated_job",
    "runtime_overlay",
    "runtime_patch",
    "selector",
    "train_job_spec",
]
