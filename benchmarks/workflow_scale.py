"""One Workflow over 1,024 kwok GPU nodes: how fast nvcre-manager fans out 128 Jobs + 128 TrainJobs.

Run: ``.venv/bin/python benchmarks/workflow_scale.py`` (options: ``--nodes``, ``--num-nodes``,
``--workers``, ``--profile FILE``). Prints a table; nothing here asserts a time.

It starts a real etcd + kube-apiserver + kwok, creates ``--nodes`` fake GPU nodes concurrently
(async client), waits until kwok reports them Ready, starts ``nvcre-manager`` as a subprocess
(cluster-admin kubeconfig, no leader election), and creates one Workflow with ``numNodes``
``--num-nodes`` targeting all of them. It reports, from the Workflow's creation:

* the manager's CPU use while idle for ``--idle`` seconds (informers following kwok's heartbeats);
* the first Job, all Jobs, and all TrainJobs existing (watched, not polled);
* the API requests served meanwhile (kube-apiserver's ``apiserver_request_total``, nodes and
  leases left out: those are kwok's heartbeats), and how many were 409 Conflicts;
* the manager's CPU seconds spent on it and its peak RSS (``VmHWM`` of ``/proc/<pid>/status``);

then stops the manager and, as the floor to compare with, has a plain client create the very
same Jobs and TrainJobs (bare copies: no owners, no status) in fresh namespaces, one at a time
and 16 at a time. ``--profile FILE`` runs the manager under cProfile and writes its stats there.
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

from lightkube import AsyncClient
from lightkube.codecs import from_dict
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node
from prometheus_client.parser import text_string_to_metric_families

from nvcre.controllers import resources
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.nodes import GpuNodeSpec, gpu_node, gpu_node_names, node_ready
from nvcre.testing.workloads import POOL_LABEL, workflow

CLK_TCK = os.sysconf("SC_CLK_TCK")
QUIET = {"nodes", "leases"}  # kwok's heartbeats and leases, not the manager's


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


class ProfiledManager(ManagerProcess):
    """The manager under ``python -m cProfile -o FILE`` (stats are written on SIGTERM)."""

    def __init__(self, *args: Any, profile: Path | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.profile = profile

    def argv(self) -> list[str]:
        argv = super().argv()
        if self.profile is None:
            return argv
        return [argv[0], "-m", "cProfile", "-o", str(self.profile), *argv[1:]]


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


def bare(obj: Any) -> dict[str, Any]:
    data = obj.to_dict()
    meta = data["metadata"]
    data["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if meta.get(k)}
    data.pop("status", None)
    return dict(data)


async def plain_create(
    client: AsyncClient, namespace: str, bodies: list[dict[str, Any]], limit: int
) -> float:
    await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    objects = [from_dict({**b, "metadata": {**b["metadata"], "namespace": namespace}}) for b in bodies]
    started = time.monotonic()
    await bounded([lambda o=o: client.create(o) for o in objects], limit)  # type: ignore[misc]
    return time.monotonic() - started


async def scenario(cp: ControlPlane, args: argparse.Namespace, workdir: Path) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    groups = args.nodes // args.num_nodes
    pool = f"bench-{secrets.token_hex(2)}"
    client = cp.async_client()
    try:
        t0 = time.monotonic()
        await create_nodes(client, args.nodes, pool)
        rows.append((f"create {args.nodes} nodes (32 concurrent)", f"{time.monotonic() - t0:.1f} s"))
        await wait_ready(client, args.nodes)
        rows.append((f"... all {args.nodes} Ready (kwok)", f"{time.monotonic() - t0:.1f} s"))

        manager = ProfiledManager(
            cp,
            workdir,
            name="bench-manager",
            extra_args=(f"--max-concurrent-reconciles={args.workers}", "--log-level=warning"),
            profile=args.profile,
        )
        t1 = time.monotonic()
        manager.start(timeout=300)
        assert manager.pid is not None
        pid = manager.pid
        rows.append(("manager start until /readyz (caches synced)", f"{time.monotonic() - t1:.1f} s"))
        rows.append(("manager RSS when ready", f"{proc_status(pid, 'VmRSS') / 2**20:.0f} MiB"))
        idle_from = cpu_seconds(pid)
        await asyncio.sleep(args.idle)
        idle = (cpu_seconds(pid) - idle_from) / args.idle
        rows.append(
            (f"manager CPU while idle ({args.nodes} nodes heartbeating)", f"{idle * 100:.0f} % of a core")
        )
        cpu_before = cpu_seconds(pid)

        namespace = "bench-workflow"
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
        for label in ("first Job", "all Jobs", "all TrainJobs"):
            rows.append(
                (
                    f"Workflow created -> {label.replace('all ', f'all {groups} ')}",
                    f"{marks[label] - created:.2f} s",
                )
            )
        requests = api_requests(cp) - requests_before
        conflicts = requests.pop(("409", "conflicts"), 0)
        top = ", ".join(f"{verb} {res} {n}" for (verb, res), n in requests.most_common(10))
        rows.append(("API requests during the fan-out (all clients)", f"{sum(requests.values())}"))
        rows.append(("... by verb and resource (top 10)", top))
        rows.append(("... of which 409 Conflict", f"{conflicts}"))
        rows.append(("manager CPU for the fan-out", f"{cpu_seconds(pid) - cpu_before:.1f} s"))
        rows.append(("manager peak RSS (VmHWM)", f"{proc_status(pid, 'VmHWM') / 2**20:.0f} MiB"))

        jobs = [bare(j) async for j in client.list(resources.Job, namespace=namespace)]
        trainjobs = [bare(t) async for t in client.list(resources.TrainJob, namespace=namespace)]
        manager.stop()  # nothing may reconcile the plain copies
        for limit in (1, 16):
            label = "one at a time" if limit == 1 else f"{limit} concurrent"
            seconds = await plain_create(client, f"bench-plain-{limit}", jobs + trainjobs, limit)
            rows.append(
                (
                    f"plain client: same {len(jobs)} Jobs + {len(trainjobs)} TrainJobs, {label}",
                    f"{seconds:.2f} s",
                )
            )
        return rows
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--num-nodes", type=int, default=8, help="the Workflow's numNodes (nodes per Job)")
    parser.add_argument("--workers", type=int, default=10, help="--max-concurrent-reconciles")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--idle", type=float, default=30, help="seconds to watch the idle manager's CPU")
    parser.add_argument("--profile", type=Path, help="write the manager's cProfile stats here")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nvcre-bench-") as tmp, ControlPlane() as cp, Kwok(cp):
        rows = asyncio.run(scenario(cp, args, Path(tmp)))
    width = max(len(r[0]) for r in rows)
    print(f"\nworkflow_scale: {args.nodes} kwok nodes, numNodes {args.num_nodes}, {os.cpu_count()} CPUs")
    print(f"{'measurement':<{width}}  value")
    print(f"{'-' * width}  -------")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"(whole run {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
