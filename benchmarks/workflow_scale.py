"""One Workflow over 1,024 (or ``--nodes``) kwok GPU nodes: how fast nvcre-manager fans out a Job,
a TrainJob and a TrainingRuntime copy per group, and at what cost in API requests and memory.

Run: ``.venv/bin/python benchmarks/workflow_scale.py`` (options: ``--nodes``, ``--num-nodes``,
``--workers``, ``--unrelated-pods``, ``--baseline REV``, ``--pods``, ``--records``, ``--paced``,
``--profile FILE``, ``--sandbox``). Prints a table; nothing here asserts a time.

It starts a real etcd + kube-apiserver + kwok, creates ``--nodes`` fake GPU nodes concurrently
(async client), waits until kwok reports them Ready, starts ``nvcre-manager`` as a subprocess
(cluster-admin kubeconfig, no leader election), and creates one Workflow with ``numNodes``
``--num-nodes`` targeting all of them. It reports, from the Workflow's creation:

* the manager's CPU use while idle for ``--idle`` seconds (informers following kwok's heartbeats);
* the first Job, all Jobs, and all TrainJobs existing (watched, not polled);
* the API requests served meanwhile (kube-apiserver's ``apiserver_request_total``, nodes and
  leases left out: those are kwok's heartbeats), per Job, and how many were 409 Conflicts;
* the manager's CPU seconds spent on it and its peak RSS (``VmHWM`` of ``/proc/<pid>/status``);
* with ``--pods``: the pods JobSet would run for every TrainJob (``nvcre.testing.workloads.pods_of``,
  one per node, bound), created 32 at a time and made Running by kwok; when the last one ran,
  and the manager's peak RSS with them;

* with ``--records`` (this tree's manager only): every TrainJob is marked Complete, as Trainer
  does when its JobSet ends (the benchmark plays Trainer: no pods run), so the manager's Job
  controller ends every Job, its Workflow controller the Workflow, and its NodeRecord writer
  records every node; how long from the Workflow's end (seen by a watch) until every node's
  NodeRecord holds its result (watched), the API requests meanwhile (``noderecords`` ones per
  node, 409s), the manager's CPU, peak RSS and the NodeRecords in its cache;

then the manager deletes the Workflow again (the records stay: they have no owner). ``--paced``
paces kwok's heartbeats for the fleet (``Kwok(nodes=...)``: at most 20 node and 20 lease writes
a second, as the sandbox does), which 16,384 nodes on two cores need. ``--baseline REV`` first does all of that with the
manager of another git revision (its ``src/`` exported to a temporary directory), so both are
measured side by side in one run. Last, as the floor to compare with, a plain client creates the
very same TrainingRuntime copies, Jobs and TrainJobs (bare copies: no owners, no status) in fresh
namespaces, one at a time and 16 at a time, and the ratio of each manager's time to the
sequential floor is printed. ``--profile FILE`` runs this tree's manager under cProfile.

Before the fan-out it measures the manager's memory with the nodes alone and again after
``--unrelated-pods`` pods of other workloads (unscheduled, in ``--pod-namespaces`` namespaces of
their own) exist: a fresh manager each time, its ``VmRSS`` a few seconds after ``/readyz`` and
its ``VmHWM`` (``--baseline`` measures those rows for both).

``--sandbox`` runs instead on the cluster ``nvcrectl sandbox up`` starts (its supervisor's own
functions: the nodes, the runner that simulates the workloads; kube-scheduler, the Job
controller and garbage collector, JobSet and Trainer), with an audit log of the manager's user.
The Workflow is what ``examples/workloadrun/basic.yaml`` (NCCL all-reduce under mpirun) renders
over every node with ``numNodes`` ``--num-nodes``. It reports, from the Workflow's creation, all
Jobs and TrainJobs existing, the first and last group Running in the Workflow's status, all pods
(workers and launchers) existing and Running; the manager's own requests (audit log) until all
TrainJobs and until every pod ran, per Job; everyone's requests meanwhile; the manager's CPU and
peak RSS; then, with every manager stopped, a plain client creating the same copies, Jobs and
TrainJobs (suspended: Trainer's webhooks admit them, no pods run) one at a time, and the ratio.
A fan-out not done in ``--timeout`` s reports how far each mark got.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml
from _revisions import export_source
from lightkube import ApiError, AsyncClient
from lightkube.codecs import from_dict
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node, Pod
from prometheus_client.parser import text_string_to_metric_families

from nvcre import resources
from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.conditions import ended
from nvcre.render.workloadrun import build_workflow
from nvcre.sandbox import supervisor
from nvcre.testing import binaries as bins
from nvcre.testing.audit import MANAGER_USERS, by_manager
from nvcre.testing.cluster import Cluster
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.nodes import GpuNodeSpec, gpu_node, gpu_node_names, node_ready
from nvcre.testing.processes import Process
from nvcre.testing.workloads import POOL_LABEL, pods_of, workflow

CLK_TCK = os.sysconf("SC_CLK_TCK")
QUIET = {"nodes", "leases"}  # kwok's heartbeats and leases, not the manager's
#: The sandbox variant's workload: NCCL all-reduce under mpirun, which the sandbox simulates.
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workloadrun" / "basic.yaml"
#: A group's phases in the Workflow's status from Running on (a short one may skip Running).
STARTED = ("Running", "Succeeded", "Failed")


def api_requests(cp: ControlPlane) -> Counter[tuple[str, str]]:
    """kube-apiserver's request counter by (verb, resource[/subresource]), nodes/leases left out."""
    counts: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(cp._get("/metrics", cp.ssl_context())):
        for sample in family.samples:
            if sample.name != "apiserver_request_total" or sample.labels.get("resource") in QUIET:
                continue
            resource = sample.labels.get("resource", "")
            if sample.labels.get("subresource"):
                resource += "/" + sample.labels["subresource"]
            counts[(sample.labels.get("verb", ""), resource)] += int(sample.value)
            if sample.labels.get("code") == "409":
                counts[("409", "conflicts")] += int(sample.value)
    return counts


class BenchManager(ManagerProcess):
    """The manager under ``python -m cProfile -o FILE`` (stats are written on SIGTERM), or run
    from another source tree (``source``: a ``src`` directory put first on ``sys.path``)."""

    def __init__(
        self, *args: Any, profile: Path | None = None, source: Path | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.profile = profile
        self.source = source

    def argv(self) -> list[str]:
        argv = super().argv()
        assert argv[1:3] == ["-m", "nvcre.manager"], argv
        if self.source is not None:
            run = (
                f"import runpy, sys; sys.path.insert(0, {str(self.source)!r}); "
                "runpy.run_module('nvcre.manager', run_name='__main__', alter_sys=True)"
            )
            return [argv[0], "-c", run, *argv[3:]]
        if self.profile is None:
            return argv
        return [argv[0], "-m", "cProfile", "-o", str(self.profile), *argv[1:]]


def cached_pods(manager: ManagerProcess) -> float | None:
    """The manager's Pod cache size; None when it has no such gauge or is too busy to answer."""
    try:
        return manager.metric("nvcre_informer_cached_objects", kind="Pod")
    except OSError:  # a timeout: a manager busy with thousands of pods on two loaded cores
        return None


def proc_status(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


async def bounded(calls: list[Callable[[], Awaitable[Any]]], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def create_nodes(client: AsyncClient, count: int, pool: str) -> list[str]:
    names = gpu_node_names(count, prefix="bench")
    spec = GpuNodeSpec(labels={POOL_LABEL: pool})
    await bounded([lambda n=n: client.create(gpu_node(n, spec)) for n in names], 32)  # type: ignore[misc]
    return names


async def wait_ready(client: AsyncClient, count: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        ready = sum(1 for n in [n async for n in client.list(Node)] if node_ready(n))
        if ready >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {ready}/{count} nodes Ready after {timeout:.0f}s")
        await asyncio.sleep(1)


async def watch_count(
    client: AsyncClient, resource: Any, namespace: str, want: int, marks: dict[str, float], label: str
) -> None:
    """Record when the first and the ``want``-th object of ``resource`` appear in ``namespace``."""
    seen: set[str] = set()
    async for event, obj in client.watch(resource, namespace=namespace):
        if event != "ADDED":
            continue
        seen.add(obj.metadata.name)
        if len(seen) == 1:
            marks.setdefault(f"first {label}", time.monotonic())
        if len(seen) >= want:
            marks[f"all {label}s"] = time.monotonic()
            return


def unrelated_pod(name: str, namespace: str) -> Pod:
    """A pod of some other workload: labelled, resources set, never scheduled (no node runs it)."""
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web", "tier": "frontend"}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "registry.example.com/team/web:1.4.2",
                        "ports": [{"containerPort": 8080}],
                        "env": [{"name": "MODE", "value": "production"}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    }
                ]
            },
        }
    )


async def create_unrelated_pods(client: AsyncClient, count: int, namespaces: int) -> None:
    names = [f"unrelated-{i}" for i in range(namespaces)]
    await bounded([lambda n=n: client.create(Namespace(metadata=ObjectMeta(name=n))) for n in names], 8)  # type: ignore[misc]
    pods = [unrelated_pod(f"web-{i}", names[i % namespaces]) for i in range(count)]
    await bounded([lambda p=p: client.create(p) for p in pods], 64)  # type: ignore[misc]


def memory_of(
    cp: ControlPlane, workdir: Path, name: str, source: Path | None, settle: float
) -> tuple[int, int, str]:
    """(VmRSS ``settle`` s after /readyz, VmHWM, pods cached) of a fresh manager, then stopped."""
    manager = BenchManager(cp, workdir, name=name, extra_args=("--log-level=warning",), source=source)
    manager.start(timeout=300)
    try:
        assert manager.pid is not None
        time.sleep(settle)
        cached = cached_pods(manager)
        return (
            proc_status(manager.pid, "VmRSS"),
            proc_status(manager.pid, "VmHWM"),
            "n/a" if cached is None else f"{cached:.0f}",
        )
    finally:
        manager.stop()


async def memory_rows(
    cp: ControlPlane, client: AsyncClient, args: argparse.Namespace, workdir: Path
) -> list[tuple[str, str]]:
    """The manager's memory with the nodes alone, then with ``--unrelated-pods`` other pods."""
    variants: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.baseline:
        variants.append((args.baseline, export_source(args.baseline, workdir)))
    mib = 2**20
    before = {label: memory_of(cp, workdir, "mem-nodes", src, args.settle) for label, src in variants}
    t0 = time.monotonic()
    await create_unrelated_pods(client, args.unrelated_pods, args.pod_namespaces)
    pods = f"{args.unrelated_pods} unrelated pods"
    rows = [
        (f"create {pods} (64 concurrent, {args.pod_namespaces} namespaces)", f"{time.monotonic() - t0:.1f} s")
    ]
    for label, src in variants:
        after = memory_of(cp, workdir, "mem-pods", src, args.settle)
        (rss0, hwm0, _), (rss1, hwm1, cached) = before[label], after
        rows += [
            (
                f"[{label}] manager RSS, {args.nodes} nodes, no other pods",
                f"{rss0 / mib:.0f} MiB (peak {hwm0 / mib:.0f})",
            ),
            (
                f"[{label}] manager RSS, {args.nodes} nodes + {pods}",
                f"{rss1 / mib:.0f} MiB (peak {hwm1 / mib:.0f})",
            ),
            (
                f"[{label}] ... difference; pods in the cache",
                f"{(rss1 - rss0) / rss0 * 100:+.0f} %; {cached}",
            ),
        ]
    return rows


def bare(obj: Any) -> dict[str, Any]:
    data = obj.to_dict()
    meta = data["metadata"]
    data["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if meta.get(k)}
    data.pop("status", None)
    return dict(data)


#: Trainer's webhook refuses a TrainJob whose runtime its cache does not hold yet (nvcre's Job
#: waits for its own cache instead); under load the plain client meets that and tries again.
RUNTIME_NOT_SEEN = "specified trainingRuntime must be created before the TrainJob is created"


async def create_once_admitted(client: AsyncClient, obj: Any, patience: float = 120) -> None:
    deadline = time.monotonic() + patience
    while True:
        try:
            await client.create(obj)
            return
        except ApiError as error:
            if RUNTIME_NOT_SEEN not in (error.status.message or "") or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)


async def plain_create(
    client: AsyncClient, namespace: str, bodies: list[dict[str, Any]], limit: int
) -> float:
    await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    objects = [from_dict({**b, "metadata": {**b["metadata"], "namespace": namespace}}) for b in bodies]
    started = time.monotonic()
    await bounded([lambda o=o: create_once_admitted(client, o) for o in objects], limit)  # type: ignore[misc]
    return time.monotonic() - started


async def run_pods(client: AsyncClient, namespace: str) -> dict[str, float]:
    """The pods JobSet would run for every TrainJob of ``namespace`` (``pods_of``: from what nvcre
    rendered, bound to their group's nodes), created 32 at a time; when each was Running (kwok)."""
    runtimes = {
        r.metadata.name: r.to_dict()
        async for r in client.list(resources.TrainingRuntime, namespace=namespace)
    }
    pods = [
        pod
        async for t in client.list(resources.TrainJob, namespace=namespace)
        for pod in pods_of(t.to_dict(), runtimes[t.spec["runtimeRef"]["name"]])
    ]
    running: dict[str, float] = {}

    async def follow() -> None:
        async for _, pod in client.watch(Pod, namespace=namespace):
            if pod.status and pod.status.phase == "Running":
                running.setdefault(str(pod.metadata.name), time.monotonic())
                if len(running) == len(pods):
                    return

    watch = asyncio.create_task(follow())
    await asyncio.sleep(0.5)
    await bounded([lambda p=p: client.create(Pod.from_dict(p)) for p in pods], 32)  # type: ignore[misc]
    await asyncio.wait_for(watch, timeout=600)
    return running


async def wait_gone(client: AsyncClient, resource: Any, namespace: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while [o async for o in client.list(resource, namespace=namespace)]:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(1)
    return True


async def fan_out_result(
    client: AsyncClient,
    namespace: str,
    marks: dict[str, float],
    created: float,
    per_job: float,
    runtimes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What a fan-out leaves for the plain client's rows: its time, requests per Job, and bare
    copies of the objects it created (to create again without owners or status). ``runtimes``:
    the TrainingRuntime copies as they were created, where a Job that finished has deleted its own."""
    if runtimes is None:
        runtimes = [bare(r) async for r in client.list(resources.TrainingRuntime, namespace=namespace)]
    return {
        "trainjobs": marks["all TrainJobs"] - created if "all TrainJobs" in marks else None,
        "per_job": per_job,
        "jobs": [bare(j) async for j in client.list(resources.Job, namespace=namespace)],
        "trainjob_bodies": [bare(t) async for t in client.list(resources.TrainJob, namespace=namespace)],
        "runtimes": runtimes,
    }


async def record_created(client: AsyncClient, resource: Any, namespace: str, into: dict[str, Any]) -> None:
    """Bare copies of every ``resource`` created in ``namespace``, by name, until cancelled."""
    async for event, obj in client.watch(resource, namespace=namespace):
        if event == "ADDED":
            into[str(obj.metadata.name)] = bare(obj)


def peak_with_pods(tag: str, row: str, pid: int, manager: ManagerProcess) -> list[tuple[str, str]]:
    """The manager's peak RSS (``row``) once the pods exist, and how many pods its cache holds."""
    cached = cached_pods(manager)
    return [
        (f"{tag}{row}", f"{proc_status(pid, 'VmHWM') / 2**20:.0f} MiB"),
        (f"{tag}... pods in its cache", "n/a" if cached is None else f"{cached:.0f}"),
    ]


# ---------------------------------------------------------------------------------------------
# --records: the Workflow's Jobs end, and the manager writes every node's NodeRecord


def complete_condition() -> dict[str, Any]:
    """The TrainJob condition Trainer sets when its JobSet completed (``finish_trainjob``'s)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": "Complete",
        "status": "True",
        "reason": "JobSetCompleted",
        "message": "jobset completed",
        "lastTransitionTime": now,
    }


async def end_trainjob(client: AsyncClient, namespace: str, name: str) -> None:
    """Mark the TrainJob Complete, as Trainer does when its JobSet ends (read, write; again on a
    409: the Job controller may have written meanwhile)."""
    for _ in range(10):
        live = (await client.get(resources.TrainJob, name, namespace=namespace)).to_dict()
        live.update(apiVersion="trainer.kubeflow.org/v1alpha1", kind="TrainJob")
        live["status"] = {**(live.get("status") or {}), "conditions": [complete_condition()]}
        try:
            await client.replace(resources.TrainJob.Status.from_dict(live), name, namespace=namespace)
            return
        except ApiError as error:
            if error.status.code != 409:
                raise
    raise RuntimeError(f"TrainJob {namespace}/{name}: still conflicting")


def holds(record: dict[str, Any], uid: str) -> bool:
    """The NodeRecord holds a result of the Workflow ``uid``."""
    return any(
        (result.get("workflow") or {}).get("uid") == uid
        for history in (record.get("status") or {}).get("categories") or ()
        for result in history.get("results") or ()
    )


async def follow_records(client: AsyncClient, uid: str, want: int, marks: dict[str, float]) -> None:
    """Record when the first and the ``want``-th NodeRecord hold the Workflow's result."""
    done: set[str] = set()
    async for _, record in client.watch(resources.NodeRecord):
        if holds(record.to_dict(), uid):
            done.add(str(record.metadata.name))
            marks.setdefault("first record", time.monotonic())
            marks["records"] = len(done)
            if len(done) >= want:
                marks["all records"] = time.monotonic()
                return


async def wait_workflow_ended(client: AsyncClient, namespace: str, name: str) -> dict[str, Any]:
    async for _, wf in client.watch(resources.Workflow, namespace=namespace, fields={"metadata.name": name}):
        body = dict(wf.to_dict())
        if ended(body) is not None:
            return body
    raise RuntimeError("the Workflow watch ended")


def per_node(requests: Counter[tuple[str, str]], resource: str, nodes: int) -> str:
    """The requests of ``resource`` by verb, each with its count per node."""
    verbs = sorted((verb, n) for (verb, res), n in requests.items() if res == resource)
    return ", ".join(f"{verb} {n} ({n / nodes:.2f}/node)" for verb, n in verbs) or "none"


async def records_phase(
    cp: ControlPlane,
    client: AsyncClient,
    args: argparse.Namespace,
    namespace: str,
    manager: ManagerProcess,
    tag: str,
) -> list[tuple[str, str]]:
    """End every TrainJob of the Workflow ``scale`` (the benchmark plays Trainer: no pods run
    here); the manager's Job controllers end the Jobs, its Workflow controller the Workflow, and
    its NodeRecord writer records every node. Rows: how long each step took, the API requests of
    the records (every client's, and the ``noderecords`` ones per node), the manager's CPU and
    peak RSS, and the NodeRecords its cache holds."""
    assert manager.pid is not None
    pid = manager.pid
    rows: list[tuple[str, str]] = []
    names = [str(t.metadata.name) async for t in client.list(resources.TrainJob, namespace=namespace)]
    uid = str((await client.get(resources.Workflow, "scale", namespace=namespace)).metadata.uid)
    marks: dict[str, float] = {}
    follow = asyncio.create_task(follow_records(client, uid, args.nodes, marks))
    workflow_end = asyncio.create_task(wait_workflow_ended(client, namespace, "scale"))
    await asyncio.sleep(1)  # let the watches start
    before = api_requests(cp)
    cpu_before = cpu_seconds(pid)
    started = time.monotonic()
    await bounded([lambda n=n: end_trainjob(client, namespace, n) for n in names], 16)  # type: ignore[misc]
    all_ended = time.monotonic()
    wf = await asyncio.wait_for(workflow_end, timeout=args.timeout)
    end_seen = time.monotonic()
    at_end = api_requests(cp)
    cpu_at_end = cpu_seconds(pid)
    try:
        await asyncio.wait_for(asyncio.shield(follow), timeout=args.timeout)
    except TimeoutError:
        follow.cancel()
        got = marks.get("records", 0)
        print(f"timed out: {got} of {args.nodes} records\n{manager.log_tail(30)}", file=sys.stderr)
    done = time.monotonic()
    after = api_requests(cp)
    cpu = cpu_seconds(pid) - cpu_at_end
    verdict = ended(wf)
    rows.append(
        (
            f"{tag}end all {len(names)} TrainJobs (benchmark: GET + PUT status, 16 at a time)",
            f"{all_ended - started:.2f} s",
        )
    )
    rows.append(
        (
            f"{tag}TrainJobs ended -> Workflow {verdict[0] if verdict else '?'} (seen by a watch)",
            f"{end_seen - all_ended:.2f} s",
        )
    )
    rows.append(
        (
            f"{tag}... API requests meanwhile (all clients, the TrainJob writes included)",
            f"{sum((at_end - before).values())}",
        )
    )
    if "first record" in marks:
        rows.append(
            (
                f"{tag}Workflow ended -> first NodeRecord holds its result",
                f"{max(marks['first record'] - end_seen, 0):.2f} s",
            )
        )
    if "all records" in marks:
        value = f"{marks['all records'] - end_seen:.2f} s"
    else:
        value = f"not reached in {args.timeout:.0f} s ({marks.get('records', 0)} so far)"
    rows.append((f"{tag}Workflow ended -> all {args.nodes} NodeRecords hold its result", value))
    phase = after - at_end
    conflicts = phase.pop(("409", "conflicts"), 0)
    top = ", ".join(f"{verb} {res} {n}" for (verb, res), n in phase.most_common(8))
    rows.append((f"{tag}API requests, Workflow ended -> all records (all clients)", f"{sum(phase.values())}"))
    rows.append((f"{tag}... by verb and resource (top 8)", top))
    rows.append((f"{tag}... of which 409 Conflict", f"{conflicts}"))
    whole = after - before  # the record writes that came before the Workflow's end was seen too
    rows.append(
        (f"{tag}noderecords requests (whole phase), per node", per_node(whole, "noderecords", args.nodes))
    )
    rows.append(
        (
            f"{tag}noderecords/status requests (whole phase), per node",
            per_node(whole, "noderecords/status", args.nodes),
        )
    )
    rows.append(
        (f"{tag}manager CPU, Workflow ended -> all records", f"{cpu:.1f} s of {done - end_seen:.0f} s")
    )
    rows.append((f"{tag}manager CPU, whole phase", f"{cpu_seconds(pid) - cpu_before:.1f} s"))
    rows.append((f"{tag}manager RSS after the records", f"{proc_status(pid, 'VmRSS') / 2**20:.0f} MiB"))
    rows.append(
        (
            f"{tag}manager peak RSS (VmHWM) with the records written",
            f"{proc_status(pid, 'VmHWM') / 2**20:.0f} MiB",
        )
    )
    try:
        cached = manager.metric("nvcre_informer_cached_objects", kind="NodeRecord")
    except OSError:
        cached = None
    rows.append((f"{tag}... NodeRecords in its cache", "n/a" if cached is None else f"{cached:.0f}"))
    return rows


async def fan_out(
    cp: ControlPlane,
    client: AsyncClient,
    args: argparse.Namespace,
    workdir: Path,
    pool: str,
    variant: tuple[str, Path | None],
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """One manager (``variant``: a label and the source tree it runs, None for this one) fans a
    Workflow over the nodes out; its rows, and what the comparison needs. Before it stops, the
    manager deletes the Workflow again (and its Jobs), so that the next one starts clean."""
    label, source = variant
    tag = f"[{label}] "
    groups = args.nodes // args.num_nodes
    rows: list[tuple[str, str]] = []
    manager = BenchManager(
        cp,
        workdir,
        name=f"bench-manager-{'base' if source else 'tree'}",
        extra_args=(f"--max-concurrent-reconciles={args.workers}", "--log-level=warning"),
        profile=args.profile if source is None else None,
        source=source,
    )
    t1 = time.monotonic()
    manager.start(timeout=300)
    try:
        assert manager.pid is not None
        pid = manager.pid
        rows.append((f"{tag}manager start until /readyz (caches synced)", f"{time.monotonic() - t1:.1f} s"))
        rows.append((f"{tag}manager RSS when ready", f"{proc_status(pid, 'VmRSS') / 2**20:.0f} MiB"))
        idle_from = cpu_seconds(pid)
        await asyncio.sleep(args.idle)
        idle = (cpu_seconds(pid) - idle_from) / args.idle
        rows.append(
            (
                f"{tag}manager CPU while idle ({args.nodes} nodes heartbeating)",
                f"{idle * 100:.0f} % of a core",
            )
        )
        cpu_before = cpu_seconds(pid)

        namespace = f"bench-workflow-{'base' if source else 'tree'}"
        await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
        marks: dict[str, float] = {}
        watches = [
            asyncio.create_task(watch_count(client, resources.Job, namespace, groups, marks, "Job")),
            asyncio.create_task(
                watch_count(client, resources.TrainJob, namespace, groups, marks, "TrainJob")
            ),
        ]
        await asyncio.sleep(0.5)  # let both watches start before the clock does
        body = workflow("scale", namespace, pool, args.num_nodes)
        requests_before = api_requests(cp)
        created = time.monotonic()
        await client.create(resources.Workflow.from_dict(body))
        try:
            await asyncio.wait_for(asyncio.gather(*watches), timeout=args.timeout)
        except TimeoutError:
            print(f"timed out; marks so far: {marks}\n{manager.log_tail(30)}", file=sys.stderr)
            raise
        for mark in ("first Job", "all Jobs", "all TrainJobs"):
            rows.append(
                (
                    f"{tag}Workflow created -> {mark.replace('all ', f'all {groups} ')}",
                    f"{marks[mark] - created:.2f} s",
                )
            )
        requests = api_requests(cp) - requests_before
        conflicts = requests.pop(("409", "conflicts"), 0)
        total = sum(requests.values())
        top = ", ".join(f"{verb} {res} {n}" for (verb, res), n in requests.most_common(10))
        rows.append((f"{tag}API requests during the fan-out (all clients)", f"{total}"))
        rows.append((f"{tag}... per Job", f"{total / groups:.1f}"))
        rows.append((f"{tag}... by verb and resource (top 10)", top))
        rows.append((f"{tag}... of which 409 Conflict", f"{conflicts}"))
        rows.append((f"{tag}manager CPU for the fan-out", f"{cpu_seconds(pid) - cpu_before:.1f} s"))
        rows.append((f"{tag}manager peak RSS (VmHWM)", f"{proc_status(pid, 'VmHWM') / 2**20:.0f} MiB"))
        if args.pods:
            pods_running = await run_pods(client, namespace)
            rows.append(
                (
                    f"{tag}Workflow created -> all {len(pods_running)} pods Running",
                    f"{max(pods_running.values()) - created:.2f} s",
                )
            )
            await asyncio.sleep(args.settle)  # the Job controller follows the pods meanwhile
            rows += peak_with_pods(tag, "manager peak RSS with one pod per node (VmHWM)", pid, manager)
        measured = await fan_out_result(client, namespace, marks, created, total / groups)
        if args.records and source is None:
            rows += await records_phase(cp, client, args, namespace, manager, tag)
        await client.delete(resources.Workflow, "scale", namespace=namespace)
        if args.pods:  # what the garbage collector does once their JobSets go (none runs here)
            names = [str(p.metadata.name) async for p in client.list(Pod, namespace=namespace)]
            await bounded(
                [lambda n=n: client.delete(Pod, n, namespace=namespace, grace_period=0) for n in names], 32
            )  # type: ignore[misc]
        if not await wait_gone(client, resources.Workflow, namespace, args.timeout):
            print(f"{tag}the Workflow was not gone; the next manager sees it", file=sys.stderr)
        return rows, measured
    finally:
        manager.stop()


async def scenario(cp: ControlPlane, args: argparse.Namespace, workdir: Path) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    pool = f"bench-{secrets.token_hex(2)}"
    client = cp.async_client()
    try:
        t0 = time.monotonic()
        await create_nodes(client, args.nodes, pool)
        rows.append((f"create {args.nodes} nodes (32 concurrent)", f"{time.monotonic() - t0:.1f} s"))
        await wait_ready(client, args.nodes, timeout=max(300, args.timeout))
        rows.append((f"... all {args.nodes} Ready (kwok)", f"{time.monotonic() - t0:.1f} s"))
        if args.unrelated_pods:
            rows += await memory_rows(cp, client, args, workdir)

        variants: list[tuple[str, Path | None]] = []
        if args.baseline:  # first, so that "this tree" never runs on a warmer API server
            variants.append((args.baseline, export_source(args.baseline, workdir)))
        variants.append(("this tree", None))
        measured: dict[str, dict[str, Any]] = {}
        for variant in variants:
            variant_rows, measured[variant[0]] = await fan_out(cp, client, args, workdir, pool, variant)
            rows += variant_rows

        # The floor: a plain client creates the same objects (nothing reconciles them: every
        # manager has stopped).
        last = measured["this tree"]
        bodies = last["runtimes"] + last["jobs"] + last["trainjob_bodies"]
        plain: dict[int, float] = {}
        for limit in (1, 16):
            what = "one at a time" if limit == 1 else f"{limit} concurrent"
            plain[limit] = await plain_create(client, f"bench-plain-{limit}", bodies, limit)
            rows.append(
                (
                    f"plain client: same {len(last['runtimes'])} TrainingRuntimes + "
                    f"{len(last['jobs'])} Jobs + {len(last['trainjob_bodies'])} TrainJobs, {what}",
                    f"{plain[limit]:.2f} s",
                )
            )
        floor = len(bodies) / max(len(last["jobs"]), 1)
        for label, m in measured.items():
            rows.append(
                (
                    f"[{label}] all TrainJobs / plain one at a time (target <= 1.5)",
                    f"{m['trainjobs'] / plain[1]:.1f}x",
                )
            )
            rows.append(
                (
                    f"[{label}] requests per Job (target <= 4; plain floor {floor:.0f})",
                    f"{m['per_job']:.1f}",
                )
            )
        return rows
    finally:
        await client.close()


# ---------------------------------------------------------------------------------------------
# --sandbox: the simulated cluster of ``nvcrectl sandbox``, where the pods really exist


def sandbox_workflow(nodes: list[Node], namespace: str, num_nodes: int) -> dict[str, Any]:
    """The Workflow ``examples/workloadrun/basic.yaml`` renders (as the WorkloadRun controller
    does, against the sandbox's nodes) with ``numNodes`` ``num_nodes``, named ``scale``."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"]["numNodes"] = num_nodes
    run = WorkloadRun.model_validate(document)
    body = build_workflow(run, [n.to_dict() for n in nodes], resolve=False).workflow
    body["metadata"] = {"name": "scale", "namespace": namespace}  # no WorkloadRun owns it here
    return body


def pods_per_group(workflow: dict[str, Any], num_nodes: int) -> int:
    """``num_nodes`` workers, and one launcher if the Workflow's TrainingRuntime has one."""
    jobs = [
        rj.get("name")
        for dependency in workflow["spec"].get("dependencies") or ()
        if dependency.get("kind") == "TrainingRuntime"
        for rj in dependency["spec"]["template"]["spec"].get("replicatedJobs") or ()
    ]
    return num_nodes + (1 if "launcher" in jobs else 0)


def audit_ids(cp: ControlPlane) -> set[str]:
    return {str(e.get("auditID")) for e in cp.audit_events()}


def manager_requests(cp: ControlPlane, before: set[str]) -> Counter[tuple[str, str]]:
    """The manager's requests (audit log: its user and user agent) not among ``before``."""
    counts: Counter[tuple[str, str]] = Counter()
    for event in by_manager(cp.audit_events()):
        if str(event.get("auditID")) in before:
            continue
        ref = event.get("objectRef") or {}
        resource = str(ref.get("resource")) + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        counts[(str(event.get("verb")), resource)] += 1
    return counts


async def follow_sandbox(
    client: AsyncClient,
    namespace: str,
    groups: int,
    want_pods: int,
    marks: dict[str, float],
    counts: dict[str, int],
) -> None:
    """Record when all Jobs, TrainJobs and ``want_pods`` pods exist, the pods are Running, and
    the Workflow's status shows every group Running (or past it); ``counts``: how many so far."""

    async def objects(resource: Any, label: str) -> None:
        seen: set[str] = set()
        async for event, obj in client.watch(resource, namespace=namespace):
            if event == "ADDED":
                seen.add(str(obj.metadata.name))
                counts[f"all {label}"] = len(seen)
                if len(seen) >= groups:
                    marks[f"all {label}"] = time.monotonic()
                    return

    async def pods() -> None:
        seen: set[str] = set()
        running: set[str] = set()
        async for _, pod in client.watch(Pod, namespace=namespace):
            name = str(pod.metadata.name if pod.metadata else "")
            seen.add(name)
            counts["all pods"] = len(seen)
            if len(seen) >= want_pods:
                marks.setdefault("all pods", time.monotonic())
            if pod.status and pod.status.phase == "Running":
                running.add(name)
                counts["all pods Running"] = len(running)
                if len(running) >= want_pods:
                    marks["all pods Running"] = time.monotonic()
                    return

    async def groups_started() -> None:
        started: set[str] = set()
        async for _, wf in client.watch(resources.Workflow, namespace=namespace):
            status = (wf.to_dict().get("status") or {}).get("orchestration") or {}
            for group in status.get("groups") or ():
                if group.get("phase") in STARTED and group["name"] not in started:
                    started.add(group["name"])
                    if len(started) == 1:
                        marks["first group Running"] = time.monotonic()
            counts["last group Running"] = len(started)
            if len(started) >= groups:
                marks["last group Running"] = time.monotonic()
                return

    await asyncio.gather(
        objects(resources.Job, "Jobs"), objects(resources.TrainJob, "TrainJobs"), pods(), groups_started()
    )


async def sandbox_fan_out(
    cluster: Cluster,
    client: AsyncClient,
    args: argparse.Namespace,
    workdir: Path,
    nodes: list[Node],
    runner: int,
    variant: tuple[str, Path | None],
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """One manager fans the Workflow out on the sandbox until every group runs; its rows and
    what the floor needs. With ``--baseline`` the Workflow is deleted after (the garbage
    collector removes its pods) so that the next manager starts on an idle sandbox."""
    cp = cluster.control_plane
    label, source = variant
    tag = f"[{label}] "
    groups = args.nodes // args.num_nodes
    rows: list[tuple[str, str]] = []
    manager = BenchManager(
        cp,
        workdir,
        name=f"sandbox-manager-{'base' if source else 'tree'}",
        extra_args=(f"--max-concurrent-reconciles={args.workers}", "--log-level=warning"),
        profile=args.profile if source is None else None,
        source=source,
    )
    t1 = time.monotonic()
    manager.start(timeout=supervisor.ready_timeout(args.nodes))
    try:
        assert manager.pid is not None
        pid = manager.pid
        rows.append((f"{tag}manager start until /readyz", f"{time.monotonic() - t1:.1f} s"))
        rows.append((f"{tag}manager RSS when ready", f"{proc_status(pid, 'VmRSS') / 2**20:.0f} MiB"))
        namespace = f"sandbox-scale-{'base' if source else 'tree'}"
        await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
        marks: dict[str, float] = {}
        counts: dict[str, int] = {}
        body = sandbox_workflow(nodes, namespace, args.num_nodes)
        pods = groups * pods_per_group(body, args.num_nodes)
        follow = asyncio.create_task(follow_sandbox(client, namespace, groups, pods, marks, counts))
        runtimes: dict[str, Any] = {}
        record = asyncio.create_task(record_created(client, resources.TrainingRuntime, namespace, runtimes))
        await asyncio.sleep(1)  # let the watches start before the clock does
        before_ids = audit_ids(cp)
        before_all = api_requests(cp)
        cpu_before = cpu_seconds(pid)
        runner_before = cpu_seconds(runner)
        created = time.monotonic()
        await client.create(resources.Workflow.from_dict(body))
        fan_out_requests: Counter[tuple[str, str]] | None = None
        all_requests: Counter[tuple[str, str]] | None = None
        deadline = created + args.timeout
        while not follow.done():
            if fan_out_requests is None and "all TrainJobs" in marks:
                fan_out_requests = manager_requests(cp, before_ids)
                all_requests = api_requests(cp) - before_all
            if time.monotonic() > deadline:  # report what was reached
                follow.cancel()
                print(f"timed out; marks so far: {marks}\n{manager.log_tail(30)}", file=sys.stderr)
                break
            await asyncio.sleep(0.2)
        else:
            follow.result()
        record.cancel()
        until_running = manager_requests(cp, before_ids)
        cpu = cpu_seconds(pid) - cpu_before
        runner_cpu = cpu_seconds(runner) - runner_before
        ended = time.monotonic()
        if fan_out_requests is None or all_requests is None:  # every mark came in one wait
            fan_out_requests, all_requests = until_running, api_requests(cp) - before_all
        for mark in (
            "all Jobs",
            "all TrainJobs",
            "first group Running",
            "last group Running",
            "all pods",
            "all pods Running",
        ):
            what = mark.replace("all ", f"all {pods if 'pods' in mark else groups} ")
            if "group" in mark:  # the Workflow controller's phase: the group's Job is launched
                what = f"{mark} (of {groups}; Workflow status: its Job launched)"
            if mark == "all pods Running":  # what really runs: the last group is Running
                what = f"all {pods} pods Running = the last group Running"
            if mark in marks:
                value = f"{marks[mark] - created:.2f} s"
            else:
                value = f"not reached in {args.timeout:.0f} s ({counts.get(mark, 0)} so far)"
            rows.append((f"{tag}Workflow created -> {what}", value))
        total = sum(fan_out_requests.values())
        top = ", ".join(f"{verb} {res} {n}" for (verb, res), n in fan_out_requests.most_common(8))
        rows.append((f"{tag}manager's API requests until all TrainJobs (audit log)", f"{total}"))
        rows.append((f"{tag}... per Job", f"{total / groups:.1f}"))
        rows.append((f"{tag}... by verb and resource (top 8)", top))
        everyone = all_requests.copy()
        everyone.pop(("409", "conflicts"), None)
        rows.append(
            (
                f"{tag}... all clients meanwhile (scheduler, JobSet, Trainer, Job controller...)",
                f"{sum(everyone.values())}",
            )
        )
        running_total = sum(until_running.values())
        rows.append(
            (
                f"{tag}manager's API requests until every pod Running; per Job",
                f"{running_total}; {running_total / groups:.1f}",
            )
        )
        rows.append((f"{tag}manager CPU until every pod Running", f"{cpu:.1f} s"))
        rows.append(
            (
                f"{tag}runner CPU meanwhile (polls {args.nodes} nodes and every pod)",
                f"{runner_cpu:.1f} s of {ended - created:.0f} s",
            )
        )
        await asyncio.sleep(args.settle)  # the Job controller follows the pods meanwhile
        rows += peak_with_pods(tag, f"manager peak RSS, {pods} pods Running (VmHWM)", pid, manager)
        measured = await fan_out_result(
            client, namespace, marks, created, total / groups, list(runtimes.values())
        )
        if args.baseline:  # the next manager must start on a sandbox without this workload
            await client.delete(resources.Workflow, "scale", namespace=namespace)
            if not await wait_gone(client, Pod, namespace, args.timeout):
                print(f"{tag}pods were left; the next manager sees them", file=sys.stderr)
        return rows, measured
    finally:
        manager.stop()


def suspended(trainjob: dict[str, Any]) -> dict[str, Any]:
    """A floor TrainJob that Trainer admits (its webhooks run) but runs no pods for."""
    return {**trainjob, "spec": {**trainjob["spec"], "suspend": True}}


async def sandbox_scenario(
    cluster: Cluster, args: argparse.Namespace, workdir: Path, nodes: list[Node], runner: int
) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    client = cluster.control_plane.async_client()
    try:
        variants: list[tuple[str, Path | None]] = []
        if args.baseline:  # first, so that "this tree" never runs on a warmer API server
            variants.append((args.baseline, export_source(args.baseline, workdir)))
        variants.append(("this tree", None))
        measured: dict[str, dict[str, Any]] = {}
        for variant in variants:
            variant_rows, measured[variant[0]] = await sandbox_fan_out(
                cluster, client, args, workdir, nodes, runner, variant
            )
            rows += variant_rows
        # The floor: every manager has stopped; the workload of the last keeps running.
        last = measured["this tree"]
        bodies = last["runtimes"] + last["jobs"] + [suspended(t) for t in last["trainjob_bodies"]]
        plain = await plain_create(client, "sandbox-plain", bodies, 1)
        rows.append(
            (
                f"plain client: same {len(last['runtimes'])} TrainingRuntimes + {len(last['jobs'])} Jobs + "
                f"{len(last['trainjob_bodies'])} TrainJobs (suspended), one at a time",
                f"{plain:.2f} s",
            )
        )
        for label, m in measured.items():
            ratio = "n/a" if m["trainjobs"] is None else f"{m['trainjobs'] / plain:.1f}x"
            rows.append(
                (
                    f"[{label}] all TrainJobs / plain one at a time (target <= 1.5)",
                    ratio,
                )
            )
            rows.append(
                (f"[{label}] manager's requests per Job (target <= 4; floor 3)", f"{m['per_job']:.1f}")
            )
        ready = sum(1 for n in [n async for n in client.list(Node)] if node_ready(n))
        rows.append(("sandbox nodes Ready at the end", f"{ready} of {args.nodes}"))
        return rows
    finally:
        await client.close()


def run_sandbox(args: argparse.Namespace, workdir: Path) -> list[tuple[str, str]]:
    """Start the components of ``nvcrectl sandbox up`` (its supervisor's own functions) with the
    API server's audit log of the manager's user, run the scenario, stop everything."""
    options = supervisor.Options(nodes=args.nodes)
    nodes = supervisor.sandbox_nodes(options)
    control_plane = ControlPlane(
        binaries=bins.ensure((*bins.REQUIRED, *bins.CHAIN)),
        workdir=workdir / "cluster",
        audit_users=MANAGER_USERS,
    )
    rows: list[tuple[str, str]] = []
    t0 = time.monotonic()
    runner: Process | None = None
    with Cluster(control_plane, nodes=args.nodes) as cluster:
        try:
            rows.append(
                ("sandbox cluster started (control plane, kwok, chain)", f"{time.monotonic() - t0:.1f} s")
            )
            t1 = time.monotonic()
            with control_plane.client() as client:
                supervisor.create_nodes(client, nodes, options)
            rows.append(
                (
                    f"create {args.nodes} nodes ({supervisor.NODE_CREATES} concurrent) until Ready",
                    f"{time.monotonic() - t1:.1f} s",
                )
            )
            cluster_dir = control_plane.workdir
            assert cluster_dir is not None
            runner = Process(
                supervisor.RUNNER,
                supervisor.runner_argv(cluster, cluster_dir, options),
                cluster_dir / f"{supervisor.RUNNER}.log",
            ).start()
            supervisor.wait_runner_ready(runner, cluster_dir, supervisor.ready_timeout(args.nodes))
            rows.append(("... runner's first poll", f"{time.monotonic() - t1:.1f} s"))
            assert runner.pid is not None
            rows += asyncio.run(sandbox_scenario(cluster, args, workdir, nodes, runner.pid))
            alive = cluster.running and runner.running()
            rows.append(("sandbox components all alive at the end", "yes" if alive else "NO"))
        finally:
            if runner is not None:
                runner.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--num-nodes", type=int, default=8, help="the Workflow's numNodes (nodes per Job)")
    parser.add_argument("--workers", type=int, default=10, help="--max-concurrent-reconciles")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--idle", type=float, default=30, help="seconds to watch the idle manager's CPU")
    parser.add_argument("--profile", type=Path, help="write the manager's cProfile stats here")
    parser.add_argument(
        "--unrelated-pods",
        type=int,
        default=20_000,
        help="pods of other workloads for the memory rows (0: none)",
    )
    parser.add_argument(
        "--pod-namespaces", type=int, default=20, help="namespaces the unrelated pods live in"
    )
    parser.add_argument(
        "--pods",
        action="store_true",
        help="then run the pods JobSet would (one per node, Running by kwok) and read the manager's RSS",
    )
    parser.add_argument("--settle", type=float, default=3, help="seconds after /readyz before reading RSS")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure the fan-out (and the memory rows) with the manager of this git revision",
    )
    parser.add_argument(
        "--records",
        action="store_true",
        help="then end every TrainJob (as Trainer would) and measure the manager writing every node's "
        "NodeRecord: time, requests, peak RSS (this tree's manager only)",
    )
    parser.add_argument(
        "--paced",
        action="store_true",
        help="pace kwok's heartbeats for the fleet (at most 20 node and 20 lease writes a second), "
        "as the sandbox does; needed at 16,384 nodes",
    )
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help="on the simulated cluster of `nvcrectl sandbox` (scheduler, controllers, JobSet, Trainer, "
        "runner): the pods really exist and run; until the last group Running",
    )
    args = parser.parse_args()
    started = time.monotonic()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="nvcre-bench-") as tmp:
        if args.sandbox:
            rows = run_sandbox(args, Path(tmp))
        else:
            with ControlPlane() as cp, Kwok(cp, nodes=args.nodes if args.paced else 0):
                rows = asyncio.run(scenario(cp, args, Path(tmp)))
    width = max(len(r[0]) for r in rows)
    where = "sandbox" if args.sandbox else "kwok (heartbeats paced)" if args.paced else "kwok"
    print(f"\nworkflow_scale: {args.nodes} {where} nodes, numNodes {args.num_nodes}, {os.cpu_count()} CPUs")
    print(f"load average at the start / end: {load[0]:.1f} / {os.getloadavg()[0]:.1f}")
    print(f"{'measurement':<{width}}  value")
    print(f"{'-' * width}  -------")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"(whole run {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
