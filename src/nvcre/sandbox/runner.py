"""The runner: connects the pods kwok runs to the simulated accelerator.

One process of the sandbox (``python -m nvcre.sandbox.runner``). It polls the pods bound to the
sandbox's kwok nodes; when a pod is Running and every pod of its group (its JobSet, else itself)
is Running, it asks :func:`nvcre.sandbox.simulate.simulate` what the pod's program prints and how
it ends, writes the container log as the CRI file kwok serves through ``kubectl logs`` (a kwok
``Logs`` object), and at the simulated end annotates the pod ``nvcre.test/phase`` (and exit code)
so kwok's stage terminates it. A program that runs until killed (an MPI worker's ``sshd``, a
hang) is left Running, and so is a Deployment's pod (a service). The node effects the simulation returns (``xid``, ``not-ready``) are
applied to their Node at their time; ``missing-gpus`` is applied when the node is created
(:func:`initial_nodes`). The faults in force are read from the sandbox's fault state file
(``--faults-file``, :mod:`nvcre.sandbox.fault_state`) at every poll: a group gets those in force
when it starts, and a change is acknowledged once applied (what the Node should show of it:
GPUs removed or given back, the changes of cleared faults taken back). Decisions are the pure
functions at the top; :class:`Runner` reads the API, calls them and writes the difference.
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import itertools
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import ConfigMap, Node, Pod

from nvcre.platform.detect import node_platform
from nvcre.sandbox.faults import (
    KINDS,
    Fault,
    NodeChange,
    apply_node_change,
    on_node,
    parse_faults,
    revert_node_change,
)
from nvcre.sandbox.model import node_model
from nvcre.sandbox.nccl import Member
from nvcre.sandbox.simulate import Simulation, cri_log, initial_node_change, simulate
from nvcre.sandbox.state import read_faults, write_applied
from nvcre.sandbox.styles import PLAIN, LogStyle, parse_log_style
from nvcre.testing.cluster import JobSet
from nvcre.testing.kwok import (
    EXIT_CODE_ANNOTATION,
    NODE_ANNOTATION,
    NODE_ANNOTATION_VALUE,
    PHASE_ANNOTATION,
    REASON_ANNOTATION,
    register_pod_log,
)
from nvcre.testing.nodes import GPU_CLIQUE, GPU_COUNT, GPU_PRODUCT, TOPOLOGY_KEYS

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LAUNCHER = "launcher"
#: Set on a Node whose conditions a fault changed: kwok's heartbeat stage leaves it alone.
HEARTBEAT_PAUSED = "nvcre.sandbox/heartbeat-paused"
CONTAINER = "node"


# ---------------------------------------------------------------------------------------------
# decisions (pure functions of plain data)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def is_sandbox_node(node: Mapping[str, Any]) -> bool:
    return (_meta(node).get("annotations") or {}).get(NODE_ANNOTATION) == NODE_ANNOTATION_VALUE


def is_service_pod(pod: Mapping[str, Any]) -> bool:
    """A Deployment's replica (a ReplicaSet's pod, such as the chart's manager scheduled onto a
    kwok node): a service, not a program that ends; the runner leaves it Running."""
    return any(
        ref.get("kind") == "ReplicaSet" and ref.get("controller")
        for ref in _meta(pod).get("ownerReferences") or ()
    )


def group_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    """Pods that run one program together: a JobSet's pods, else the pod alone."""
    meta = _meta(pod)
    return str(meta.get("namespace")), _labels(pod).get(JOBSET_NAME) or f"pod/{meta.get('name')}"


def _order(pod: Mapping[str, Any]) -> tuple[int, str, int, int, str]:
    labels = _labels(pod)
    replicated = labels.get(REPLICATED_JOB, "")
    return (
        0 if replicated == LAUNCHER else 1,
        replicated,
        int(labels.get(JOB_INDEX) or 0),
        int(labels.get(COMPLETION_INDEX) or 0),
        str(_meta(pod).get("name")),
    )


def hostname(pod: Mapping[str, Any]) -> str:
    """The host name the pod's program prints (the pod's hostname, as on a real cluster)."""
    return str((pod.get("spec") or {}).get("hostname") or _meta(pod).get("name"))


def node_member(host: str, node: Mapping[str, Any]) -> Member:
    """``host`` running on ``node``, whose model comes from the labels nvcre itself reads."""
    labels = _labels(node)
    platform = node_platform(node)
    clique = labels.get(GPU_CLIQUE)
    model = node_model(
        str(_meta(node).get("name")),
        labels.get(GPU_PRODUCT, ""),
        platform,
        gpus=int(labels.get(GPU_COUNT) or 8),
        domain=clique or labels.get(TOPOLOGY_KEYS.get(platform, ""), None),
        nvlink_domain=clique,
    )
    return Member(host, model)


def _container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or []
    return next((c for c in containers if c.get("name") == CONTAINER), containers[0] if containers else {})


_KUBELET_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']*)'\]")


def kubelet_expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with ``$(VAR)`` replaced from ``env`` as the kubelet does in command, args and
    env values: ``$$`` is a literal ``$``; a reference to an unknown variable stays as it is."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _KUBELET_REF.sub(sub, text)


def _field(pod: Mapping[str, Any], path: str) -> str:
    """A ``fieldRef``'s value: the pod's name, namespace, uid, a label or annotation, node,
    service account or IPs."""
    meta = _meta(pod)
    labelled = _FIELD.fullmatch(path)
    if labelled:
        return str((meta.get(labelled.group(1)) or {}).get(labelled.group(2), ""))
    section, _, key = path.partition(".")
    source = {"metadata": meta, "spec": pod.get("spec") or {}, "status": pod.get("status") or {}}
    return str((source.get(section) or {}).get(key) or "")


def container_command(pod: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The main container's command + args and environment, as the kubelet starts it.

    Env values and ``$(VAR)`` references are resolved in order (a ``fieldRef`` reads the pod;
    a ``secretKeyRef`` or ``configMapKeyRef`` is left empty); command and args get the
    kubelet's ``$(VAR)`` expansion. What a shell would expand is left to :mod:`.script`.
    """
    container = _container(pod)
    env: dict[str, str] = {}
    for item in container.get("env") or ():
        if "name" not in item:
            continue
        field_ref = (item.get("valueFrom") or {}).get("fieldRef") or {}
        value = (
            _field(pod, str(field_ref.get("fieldPath", ""))) if field_ref else str(item.get("value") or "")
        )
        env[str(item["name"])] = kubelet_expand(value, env)
    command = [
        kubelet_expand(str(c), env)
        for c in (*(container.get("command") or ()), *(container.get("args") or ()))
    ]
    return command, env


def configmap_mounts(pod: Mapping[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(mount path, ConfigMap name, key -> path in the mount) of each ConfigMap volume the main
    container mounts (``items`` renames keys; without ``items`` every key is a file)."""
    container = _container(pod)
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or ()}
    out = []
    for mount in container.get("volumeMounts") or ():
        configmap = (volumes.get(str(mount.get("name"))) or {}).get("configMap") or {}
        if configmap.get("name"):
            items = {
                str(i["key"]): str(i.get("path") or i["key"])
                for i in configmap.get("items") or ()
                if "key" in i
            }
            out.append((str(mount.get("mountPath", "")).rstrip("/"), str(configmap["name"]), items))
    return out


def container_files(pod: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Path -> text of the files the main container sees from ConfigMap volumes (``configmaps``:
    name -> data), the scripts a shell in it may run (the catalog's ``/config/train.sh``)."""
    files: dict[str, str] = {}
    for path, name, items in configmap_mounts(pod):
        data = configmaps.get(name) or {}
        for key, text in data.items():
            if items and key not in items:
                continue
            files[f"{path}/{items.get(key, key)}"] = text
    return files


@dataclass(frozen=True)
class Plan:
    """What one pod does: its simulation, the pod and group it belongs to."""

    namespace: str
    pod: str
    simulation: Simulation


def _workers(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The group's members: its non-launcher pods, or every pod of a group without a launcher."""
    return [p for p in pods if _labels(p).get(REPLICATED_JOB) != LAUNCHER] or list(pods)


def plan_group(
    pods: Sequence[Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]],
    faults: Sequence[Fault],
    *,
    seed: int,
    attempt: int,
    started_at: datetime.datetime,
    only: Sequence[str] | None = None,
    configmaps: Mapping[str, Mapping[str, str]] | None = None,
    style: LogStyle = PLAIN,
    speed: float = 1.0,
) -> list[Plan]:
    """The simulation of the pods of one group (all Running, all bound) named in ``only`` (uids;
    every pod when ``None``): a launcher the Job controller replaced runs with the same workers.

    The members are the non-launcher pods in JobSet order; with an MPI launcher it is rank 0 and
    prints what mpirun prints, the workers run their own command (``sshd``). Without one, each
    pod is the member of its own rank.
    """
    ordered = sorted(pods, key=_order)
    workers = _workers(ordered)
    members = [node_member(hostname(p), nodes[str(p["spec"]["nodeName"])]) for p in workers]
    plans = []
    for pod in ordered:
        if only is not None and _meta(pod).get("uid") not in only:
            continue
        command, env = container_command(pod)
        rank = 0 if _labels(pod).get(REPLICATED_JOB) == LAUNCHER else workers.index(pod)
        sim = simulate(
            command,
            members,
            faults,
            seed=seed,
            attempt=attempt,
            rank=rank,
            env=env,
            files=container_files(pod, configmaps or {}),
            style=style,
            started_at=started_at,
            speed=speed,
        )
        plans.append(Plan(str(_meta(pod)["namespace"]), str(_meta(pod)["name"]), sim))
    return plans


def expected_pods(jobset: Mapping[str, Any]) -> int:
    """How many pods a JobSet runs at once: replicas x parallelism of each replicated job."""
    total = 0
    for rj in (jobset.get("spec") or {}).get("replicatedJobs") or ():
        job_spec = ((rj.get("template") or {}).get("spec")) or {}
        total += int(rj.get("replicas") or 1) * int(job_spec.get("parallelism") or 1)
    return total


def end_annotations(exit_code: int) -> dict[str, str]:
    """The kwok stage annotations that end a pod with ``exit_code``."""
    if exit_code == 0:
        return {PHASE_ANNOTATION: "Succeeded"}
    return {PHASE_ANNOTATION: "Failed", EXIT_CODE_ANNOTATION: str(exit_code), REASON_ANNOTATION: "Error"}


NodePatches = Callable[[Mapping[str, Any], NodeChange, str], tuple[dict[str, Any], dict[str, Any]]]
"""Node, change, the time now -> the object and status patches (:func:`node_patches`,
:func:`node_revert_patches`)."""


def node_patches(
    node: Mapping[str, Any], change: NodeChange, now: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The object and status merge patches that apply ``change`` to ``node``."""
    changed: dict[str, Any] = apply_node_change(node, change, now=now)
    meta: dict[str, Any] = {"labels": changed["metadata"]["labels"]}
    if change.conditions:
        meta["annotations"] = {HEARTBEAT_PAUSED: "true"}
    body: dict[str, Any] = {"metadata": meta}
    taints = (changed.get("spec") or {}).get("taints")
    if taints:
        body["spec"] = {"taints": taints}
    status = changed.get("status") or {}
    keys = ("conditions", "capacity", "allocatable")
    return body, {"status": {k: status[k] for k in keys if k in status}}


def node_revert_patches(
    node: Mapping[str, Any], change: NodeChange, now: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The object and status patches (strategic merge) that take ``change`` back from ``node``
    (:func:`~nvcre.sandbox.faults.revert_node_change`): its labels and kwok's pause deleted, the
    taints left, its conditions deleted but ``Ready``, written ``True``; the GPUs given back."""
    changed: dict[str, Any] = revert_node_change(node, change, now=now)
    meta: dict[str, Any] = {"labels": {k: None for k in change.labels}}
    if change.conditions:
        meta["annotations"] = {HEARTBEAT_PAUSED: None}
    if change.missing_gpus:
        meta["labels"][GPU_COUNT] = changed["metadata"]["labels"].get(GPU_COUNT)
    body: dict[str, Any] = {"metadata": meta}
    if change.taints:
        body["spec"] = {"taints": (changed.get("spec") or {}).get("taints")}
    status: dict[str, Any] = {}
    if change.conditions:
        kept = {c.get("type"): c for c in (changed.get("status") or {}).get("conditions") or ()}
        status["conditions"] = [
            kept.get(c.type, {"type": c.type, "$patch": "delete"}) for c in change.conditions
        ]
    if change.missing_gpus:
        for key in ("capacity", "allocatable"):
            status[key] = changed["status"][key]
    return body, {"status": status}


def stale_changes(
    kept: Sequence[tuple[str, NodeChange]], faults: Sequence[Fault]
) -> list[tuple[str, NodeChange]]:
    """The changes written during runs (and kept in force) that no fault in force makes any
    more: a cleared fault's, to be taken back from its node."""
    made = [
        (f.node, replace(change, missing_gpus=0))
        for f in faults
        if f.peer is None and (change := KINDS[f.kind].node_change(f)) is not None
    ]
    return [(name, change) for name, change in kept if (name, change) not in made]


def gpus_to_remove(faults: Sequence[Fault], node: str, removed: int) -> int:
    """How many more GPUs ``node`` should stop advertising under ``faults`` when ``removed``
    already are (negative: how many to give back). A ``missing-gpus`` fault without a delay holds
    from when it is in force, as it does from creation; one with a delay strikes during a run,
    and what it removed stays while the fault is in force."""
    static = initial_node_change(faults, node).missing_gpus
    delayed = any(
        f.delay_s and (KINDS[f.kind].node_change(f) or NodeChange()).missing_gpus
        for f in on_node(faults, node)
    )
    return (max(static, removed) if delayed else static) - removed


def change_lost(node: Mapping[str, Any], change: NodeChange) -> bool:
    """Whether ``node`` no longer shows part of ``change``'s labels, taints or conditions.

    kwok's heartbeat stage, scheduled before a fault paused it, still fires once and rewrites the
    node's conditions (``Ready`` back to ``True``); the runner then writes the change again, as a
    health agent keeps reporting what it found. GPU counts are never rewritten by kwok.
    """
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in change.labels.items()):
        return True
    taints = {
        (t.get("key"), t.get("value"), t.get("effect")) for t in (node.get("spec") or {}).get("taints") or ()
    }
    if any((t.key, t.value, t.effect) not in taints for t in change.taints):
        return True
    conditions = {
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
        for c in (node.get("status") or {}).get("conditions") or ()
    }
    return any((c.type, c.status, c.reason, c.message) not in conditions for c in change.conditions)


PACE_SECONDS = 0.5
"""A pod's log grows in steps of at most this many wall-clock seconds of lines."""


def log_steps(offsets: Sequence[float], step: float = PACE_SECONDS) -> list[tuple[float, int]]:
    """When a pod's log grows: (wall-clock seconds after its start, lines written by then), so
    that no line is readable before its time and the log grows at most every ``step`` seconds.
    ``offsets``: each line's wall-clock offset, in the log's order (a line printed out of order
    waits for the one before it)."""
    due, latest = [], 0.0
    for offset in offsets:
        latest = max(latest, offset)
        due.append(latest)
    steps: list[tuple[float, int]] = []
    i = 0
    while i < len(due):
        j = i
        while j + 1 < len(due) and due[j + 1] <= due[i] + step:
            j += 1
        steps.append((due[j], j + 1))
        i = j + 1
    return steps


def initial_nodes(nodes: Iterable[Node], faults: Sequence[Fault]) -> list[Node]:
    """The nodes as they are created: each node's faults that hold from the start applied."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out: list[Node] = []
    for node in nodes:
        name = str(node.metadata.name if node.metadata else "")
        change = initial_node_change(faults, name)
        out.append(Node.from_dict(apply_node_change(node.to_dict(), change, now=now)))  # type: ignore[arg-type]
    return out


# ---------------------------------------------------------------------------------------------
# the shell


@dataclass(order=True)
class _Timer:
    at: float
    seq: int
    action: Callable[[], None] = field(compare=False)


class Runner:
    """Polls pods and nodes, runs the plans, fires the timed actions."""

    def __init__(
        self,
        client: Client,
        logs_dir: Path,
        faults: Sequence[Fault],
        *,
        seed: int,
        style: LogStyle = PLAIN,
        speed: float = 1.0,
        interval: float = 0.25,
        faults_file: Path | None = None,
    ) -> None:
        self.client = client
        self.logs_dir = logs_dir
        self.faults = list(faults)
        self.seed = seed
        self.style = style
        self.speed = speed  #: simulated seconds per wall-clock second
        self.interval = interval
        self.handled: set[str] = set()  # pod uids simulated
        self.runs: dict[str, int] = {}  # node -> groups started on it
        self.timers: list[_Timer] = []
        self._seq = itertools.count()
        self.node_changes: list[tuple[str, NodeChange]] = []  # written during runs, kept in force
        self.faults_file = faults_file  #: the fault state file, read at every poll
        self.generation = 0  #: the generation of it in force
        #: node -> GPUs it no longer advertises (from creation, or a missing-gpus fault since)
        self.removed_gpus = {
            n: initial_node_change(self.faults, n).missing_gpus for n in {f.node for f in self.faults}
        }

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.timers, _Timer(when, next(self._seq), action))

    def tick(self) -> None:
        nodes = {str(n.metadata.name): n.to_dict() for n in self.client.list(Node) if n.metadata}
        nodes = {k: v for k, v in nodes.items() if is_sandbox_node(v)}
        self._reload_faults(nodes)
        for name, change in self.node_changes:
            if name in nodes and change_lost(nodes[name], change):
                self._fire(self._patch_node(name, change))
        pods = [p.to_dict() for p in self.client.list(Pod, namespace="*")]
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in pods:
            bound = (pod.get("spec") or {}).get("nodeName") in nodes
            if bound and not _meta(pod).get("deletionTimestamp") and not is_service_pod(pod):
                groups.setdefault(group_key(pod), []).append(pod)
        jobsets = {
            (str(j.metadata.namespace), f"{j.metadata.name}"): dict(j)
            for j in self.client.list(JobSet, namespace="*")
            if j.metadata
        }
        for key, group in groups.items():
            active = [
                p for p in group if (p.get("status") or {}).get("phase") in ("Pending", "Running", None)
            ]
            fresh = [p for p in active if _meta(p).get("uid") not in self.handled]
            if not fresh or not all((p.get("status") or {}).get("phase") == "Running" for p in active):
                continue
            jobset = jobsets.get(key)
            if not key[1].startswith("pod/") and (jobset is None or len(active) < expected_pods(jobset)):
                continue  # the rest of the group is not created, bound or Running yet
            if any(PHASE_ANNOTATION in (_meta(p).get("annotations") or {}) for p in fresh):
                continue  # a test drives these pods by hand
            self._start(active, fresh, nodes)
        now = time.monotonic()
        while self.timers and self.timers[0].at <= now:
            self._fire(heapq.heappop(self.timers).action)

    def _reload_faults(self, nodes: Mapping[str, Mapping[str, Any]]) -> None:
        """Take the faults in force from the fault state file when it changed: what the Node shows
        of them follows (cleared faults' changes taken back, GPUs removed or given back), then the
        change is acknowledged. The file is replaced whole, so a poll sees a change whole or not."""
        if self.faults_file is None:
            return
        try:
            state = read_faults(self.faults_file)
        except ValueError as error:  # written by hand: the faults in force stay as they were
            print(f"[runner] {self.faults_file}: {error}", file=sys.stderr, flush=True)
            return
        if state is None or state.generation == self.generation:
            return
        faults = list(state.faults)
        stale = stale_changes(self.node_changes, faults)
        for name, change in stale:
            if name in nodes:
                self._fire(self._revert_node(name, change))
        self.node_changes = [kept for kept in self.node_changes if kept not in stale]
        for name in sorted(nodes):
            more = gpus_to_remove(faults, name, self.removed_gpus.get(name, 0))
            if more > 0:
                self._fire(self._patch_node(name, NodeChange(missing_gpus=more)))
            elif more < 0:
                self._fire(self._revert_node(name, NodeChange(missing_gpus=-more)))
        self.faults = faults
        self.generation = state.generation
        write_applied(self.faults_file, state.generation)

    @staticmethod
    def _fire(action: Callable[[], None]) -> None:
        try:
            action()
        except ApiError as error:
            if error.status.code != 404:  # the pod or node is gone: nothing left to do
                raise

    def _start(
        self, pods: list[dict[str, Any]], fresh: list[dict[str, Any]], nodes: Mapping[str, Mapping[str, Any]]
    ) -> None:
        # The members' nodes: the launcher runs no workload, and its node is the scheduler's choice.
        names = sorted({str(p["spec"]["nodeName"]) for p in _workers(pods)})
        attempt = max(self.runs.get(n, 0) for n in names)  # a retry or a later Job draws afresh
        for n in names:
            self.runs[n] = self.runs.get(n, 0) + 1
        started = datetime.datetime.now(datetime.UTC)
        t0 = time.monotonic()
        uids = [str(_meta(p)["uid"]) for p in fresh]
        plans = plan_group(
            pods,
            nodes,
            self.faults,
            seed=self.seed,
            attempt=attempt,
            started_at=started,
            only=uids,
            configmaps=self._scripts(pods),
            style=self.style,
            speed=self.speed,
        )
        for plan in plans:
            sim = plan.simulation
            if sim.log_served:  # no-log: no Logs object, so kwok serves nothing for the pod
                self._pace_log(plan.namespace, plan.pod, sim, started, t0)
            if sim.exit_code is not None and sim.duration_s is not None:
                body = {"metadata": {"annotations": end_annotations(sim.exit_code)}}
                self.at(t0 + sim.duration_s / self.speed, self._patch_pod(plan.namespace, plan.pod, body))
            for effect in sim.node_effects:
                self.at(t0 + effect.offset_s / self.speed, self._patch_node(effect.node, effect.change))
        self.handled.update(uids)

    def _pace_log(
        self, namespace: str, pod: str, sim: Simulation, started: datetime.datetime, t0: float
    ) -> None:
        """Register the pod's log empty and let it grow as its lines' times come, as a real
        container's does (each step replaces the file whole, so a read never sees half a line)."""
        path = register_pod_log(self.client, self.logs_dir, namespace, pod, "", container=CONTAINER)
        lines = [line + "\n" for line in cri_log(sim, started, self.speed)]
        for at, count in log_steps([line.offset_s / self.speed for line in sim.lines]):
            self.at(t0 + at, _write_log(path, lines, count))

    def _scripts(self, pods: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
        """The data of the ConfigMaps the pods' main containers mount (a missing one: no files)."""
        found: dict[str, dict[str, str]] = {}
        for pod in pods:
            for _, name, _ in configmap_mounts(pod):
                if name in found:
                    continue
                try:
                    configmap = self.client.get(ConfigMap, name, namespace=str(_meta(pod)["namespace"]))
                except ApiError as error:
                    if error.status.code != 404:
                        raise
                    continue
                found[name] = dict(configmap.data or {})
        return found

    def _patch_pod(self, namespace: str, name: str, body: dict[str, Any]) -> Callable[[], None]:
        def patch() -> None:
            self.client.patch(Pod, name, body, namespace=namespace)

        return patch

    def _write_node(self, name: str, change: NodeChange, patches: NodePatches) -> None:
        """Patch Node ``name`` as it is now with what ``patches`` makes of ``change``: its object,
        then its status (when there is any to write)."""
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body, status = patches(self.client.get(Node, name).to_dict(), change, now)
        self.client.patch(Node, name, body)
        if status["status"]:
            self.client.patch(Node.Status, name, status)

    def _patch_node(self, name: str, change: NodeChange) -> Callable[[], None]:
        def patch() -> None:
            self._write_node(name, change, node_patches)
            if change.missing_gpus:  # a count is removed once, never again
                self.removed_gpus[name] = self.removed_gpus.get(name, 0) + change.missing_gpus
            kept = replace(change, missing_gpus=0)
            if kept != NodeChange() and (name, kept) not in self.node_changes:
                self.node_changes.append((name, kept))

        return patch

    def _revert_node(self, name: str, change: NodeChange) -> Callable[[], None]:
        def patch() -> None:
            self._write_node(name, change, node_revert_patches)
            if change.missing_gpus:
                self.removed_gpus[name] = max(0, self.removed_gpus.get(name, 0) - change.missing_gpus)

        return patch

    def run(self, ready_file: Path | None = None) -> None:
        while True:
            started = time.monotonic()
            self.tick()
            if ready_file is not None and not ready_file.exists():
                ready_file.write_text("ready\n")
            time.sleep(pause(self.interval, time.monotonic() - started))


def _write_log(path: Path, lines: Sequence[str], count: int) -> Callable[[], None]:
    def write() -> None:
        partial = path.with_name(path.name + ".part")
        partial.write_text("".join(lines[:count]))
        partial.replace(path)

    return write


def pause(interval: float, tick_seconds: float) -> float:
    """The sleep after a poll that took ``tick_seconds``: ``interval``, or as long as the poll
    when that is longer, so that a poll of thousands of pods and nodes costs the runner at most
    half a core (the API server and the controllers share the machine) instead of all of one."""
    return max(interval, tick_seconds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nvcre.sandbox.runner", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--logs-dir", type=Path, required=True, help="kwok's log directory")
    parser.add_argument("--ready-file", type=Path, default=None, help="written after the first poll")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fault", action="append", default=[])
    parser.add_argument(
        "--faults-file",
        type=Path,
        default=None,
        help="the fault state file, read at every poll (over --fault)",
    )
    parser.add_argument("--log-style", default="", help="docs/sandbox.md: mpi, skypilot, pdsh, srun, ...")
    parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall-clock second")
    args = parser.parse_args(argv)
    client = Client(KubeConfig.from_file(args.kubeconfig), field_manager="nvcre-sandbox-runner")
    style = parse_log_style(args.log_style)
    found = read_faults(args.faults_file) if args.faults_file else None
    faults = found.faults if found is not None else parse_faults(args.fault)
    runner = Runner(
        client,
        args.logs_dir,
        faults,
        seed=args.seed,
        style=style,
        speed=args.speed,
        faults_file=args.faults_file,
    )
    runner.run(args.ready_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
