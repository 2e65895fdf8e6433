"""Reading logs without freezing the manager: adversarial lines, throughput, event-loop lag.

    .venv/bin/python benchmarks/log_parsing.py [lines] [throughput] [lag] [--baseline REV]

* ``lines``: the time one 1 MiB line takes through each built-in LogProfile's parser (the
  controller's: ``nccl.Parser`` or ``GoodputParser``), for adversarial lines (spaces, digits,
  ``8 8 8 ...``, a tqdm progress bar redrawn with ``\\r``, the patterns' own near-misses), in a
  child process each; with ``--baseline REV`` the same on that revision's code (e.g. ``main``,
  Python's backtracking ``re``), stopped after ``--limit`` seconds. Also the line as the
  controllers see it since the line cap (its first 64 KiB).
* ``throughput``: the parsers' MB/s on generated logs (nccl-tests with kubelet prefixes; Megatron
  iterations between noise), next to ``grep -cE`` with the profile's row/step regex on the same
  file in the same run (CPU seconds of a child process; both must count the same rows).
* ``executors``: the same question without an API server: the loop's lag while adversarial lines
  from memory are parsed on the loop, in ``runtime.offload``'s threads (the GIL is shared), or in
  a process pool (batches pickled across).
* ``lag``: the manager's event-loop lag while its BandwidthMeasurement and GoodputMeasurement
  controllers read adversarial logs through a real kube-apiserver + kwok: the real controllers,
  in process, on the manager's loop, with a sampler of the loop's lag (``runtime.looplag``),
  once as shipped (parsing in ``runtime.offload``'s worker threads) and once with the parsing
  put back on the loop. Percentiles of the lag over the reads.

Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _nccl_rows import HEADER, ROW_REGEX
from _revisions import export_source

MIB = 1 << 20
KINDS = ("spaces", "digits", "digit-runs", "progress-bar", "near-miss")


def adversarial(kind: str, size: int = MIB) -> str:
    """One line of about ``size`` bytes that makes a backtracking engine work hard."""
    if kind == "spaces":
        return " " * size
    if kind == "digits":
        return "1" * size
    if kind == "digit-runs":
        return "8 " * (size // 2)
    if kind == "progress-bar":  # NeMo's tqdm validation bar, redrawn with \r, never a newline
        head = "Epoch 0: :   0%|          | 2000/603000 [1:03:17<317:00:58, v_num=, reduced_train_loss=2.600"
        parts, total, step = [head], len(head), 0
        while total < size:
            bar = "\u2588" * (step % 10) + " " * (10 - step % 10)
            part = (
                f"\rValidation DataLoader 0: {step % 100:3d}%|{bar}| {step}/100000 [00:20<00:25,  2.53it/s]"
            )
            parts.append(part)
            total += len(part.encode())
            step += 1
        return "".join(parts)
    if kind == "near-miss":  # each profile's own words, never completed
        words = (
            "iteration 20/ 500 | elapsed time per iteration (ms): | throughput per GPU (TFLOP/s/GPU): "
            "global_step= reduced_train_loss= train_step_timing in s 8 2 float sum -1 0.1 "
            "saving checkpoint at iteration to NCCL INFO Using network "
        )
        return words * (size // len(words))
    raise ValueError(kind)


# --- lines ---------------------------------------------------------------------------------------


def child_line(profile_name: str, kind: str, size: int) -> dict[str, Any]:
    """Seconds of one line through the profile's parser (in this process's ``nvcre``)."""
    from nvcre.measure.builtin import builtin_profiles
    from nvcre.measure.goodput import GoodputParser
    from nvcre.measure.nccl import Parser
    from nvcre.measure.profile import compile_profile

    manifest = next(p for p in builtin_profiles() if p["metadata"]["name"] == profile_name)
    profile = compile_profile(manifest)
    nccl = getattr(profile, "reader", "") == "NcclTests" or "bandwidthResult" in profile.patterns
    feed: Callable[[str], object] = Parser(profile).parse_line if nccl else GoodputParser(profile).feed
    line = adversarial(kind, size)
    started = time.process_time()
    feed(line)
    return {"seconds": time.process_time() - started}


def _timed_child(args: list[str], *, source: Path | None, limit: float) -> float | None:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=limit,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return None
    return float(json.loads(out.stdout)["seconds"])


def _cell(seconds: float | None, limit: float) -> str:
    if seconds is None:
        return f"> {limit:.0f} s"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def lines_table(baseline: str | None, source: Path | None, limit: float) -> None:
    from nvcre.measure.builtin import builtin_profiles

    profiles = [str(p["metadata"]["name"]) for p in builtin_profiles()]
    header = ["profile", "line (1 MiB)", "this tree", "this tree, 64 KiB cut"]
    if baseline:
        header.append(f"{baseline} (1 MiB, stopped at {limit:.0f} s)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in profiles:
        for kind in KINDS:
            row = [name, kind]
            row.append(_cell(_timed_child(["line", name, kind, str(MIB)], source=None, limit=600), 600))
            row.append(_cell(_timed_child(["line", name, kind, str(64 * 1024)], source=None, limit=600), 600))
            if source is not None:
                row.append(
                    _cell(_timed_child(["line", name, kind, str(MIB)], source=source, limit=limit), limit)
                )
            print("| " + " | ".join(row) + " |", flush=True)


# --- throughput ----------------------------------------------------------------------------------


def ere(regex: str) -> str:
    """An RE2 pattern of the built-in profiles as POSIX ERE for ``grep -E`` (same lines match); one
    anchored at ``^`` may follow a kubelet timestamp, which the parsers strip before matching."""
    out = re.sub(r"\(\?P?<\w+>", "(", regex).replace("(?:", "(").replace("*?", "*")
    for perl, posix in (
        (r"[\d.]", "[0-9.]"),
        (r"\d", "[0-9]"),
        (r"\s", "[[:space:]]"),
        (r"\S", "[^[:space:]]"),
        (r"\w", "[[:alnum:]_]"),
    ):
        out = out.replace(perl, posix)
    return "^([0-9]{4}-[^ ]* )?" + out[1:] if out.startswith("^") else out


def nccl_log(path: Path, megabytes: int) -> None:
    """nccl-tests output as ``kubectl logs --timestamps`` returns it (one row in about 3 lines)."""
    start, index = datetime(2026, 3, 10, 14, 0, tzinfo=UTC), 0
    with open(path, "w") as out:
        while out.tell() < megabytes * 1_000_000:
            lines = ["nccl-ar-node-0-0:41:41 [0] NCCL INFO Using network IB", HEADER]
            for power in range(3, 35):
                size, alg = 1 << power, min(260.11, (1 << power) / 6.6e7)
                lines.append(
                    f"{size:>12} {size // 4:>13}     float     sum      -1  {size / 1e5 + 10:8.1f}  "
                    f"{alg:6.2f}  {alg * 1.875:6.2f}      0  {size / 1e5 + 11:8.1f}  {alg:6.2f}  {alg * 1.875:6.2f}      0"
                )
                lines.append(f"nccl-ar-node-0-1:44:44 [3] NCCL INFO comm 0x55{power:04x} rank 3 nranks 16")
            for line in lines:
                stamp = (start + timedelta(microseconds=index)).strftime("%Y-%m-%dT%H:%M:%S.%f")
                out.write(f"{stamp}000Z {line}\n")
                index += 1


def megatron_log(path: Path, megabytes: int) -> None:
    """Megatron-LM iterations, each after four lines of other output."""
    with open(path, "w") as out:
        step = 0
        while out.tell() < megabytes * 1_000_000:
            step += 1
            out.write(
                f"[2026-03-10 14:04:24.172217] iteration {step:8d}/  500000 | consumed samples: {step * 256:12d} | "
                "elapsed time per iteration (ms): 2130.2 | throughput per GPU (TFLOP/s/GPU): 802.1 | "
                "learning rate: 5.999E-05 | global batch size:   256 | lm loss: 7.655310E+00 | loss scale: 1.0 |\n"
                " [Rank 0] (after 20 iterations) memory (MB) | allocated: 23012.5 | max allocated: 40113.2\n"
                "NCCL INFO comm 0x5593 rank 3 nranks 16 cudaDev 3 busId 5e000 - Init COMPLETE\n"
                "WARNING: some optimizer state is not sharded; falling back to the slow path\n"
                "time (ms) | forward-backward: 2088.03 | optimizer: 31.80 | batch-generator: 1.49\n"
            )


def child_parse(kind: str, path: str) -> dict[str, Any]:
    from nvcre.measure.builtin import builtin_profiles
    from nvcre.measure.goodput import GoodputParser
    from nvcre.measure.nccl import Aggregate, Parser
    from nvcre.measure.profile import compile_profile

    try:
        from nvcre.measure.lines import read_lines
    except ImportError:  # a baseline from before the line cap: its text-mode reading

        def read_lines(log: Any) -> Any:
            return (line.decode(errors="replace").rstrip("\r\n") for line in log)

    name = "nccl-bandwidth" if kind == "nccl" else "megatron-training"
    profile = compile_profile(next(p for p in builtin_profiles() if p["metadata"]["name"] == name))
    started = time.process_time()
    with open(path, "rb") as log:
        if kind == "nccl":
            parser, aggregate = Parser(profile), Aggregate()
            for line in read_lines(log):
                aggregate.add(parser.parse_line(line))
            rows = aggregate.rows
        else:
            steps, rows, last = GoodputParser(profile), 0, None
            for line in read_lines(log):
                steps.feed(line)
                if steps.window.last_step is not last:
                    rows, last = rows + 1, steps.window.last_step
    return {"seconds": time.process_time() - started, "rows": rows}


def throughput_table(megabytes: int, baseline: str | None, source: Path | None, workdir: Path) -> None:
    from nvcre.measure.builtin import builtin_profiles

    manifests = {str(p["metadata"]["name"]): p for p in builtin_profiles()}
    cases = (
        ("nccl", nccl_log, ROW_REGEX),
        (
            "megatron",
            megatron_log,
            manifests["megatron-training"]["spec"]["patterns"]["trainingStep"]["regex"],
        ),
    )
    print("| log | reader | CPU seconds | MB/s | rows |")
    print("|---|---|---|---|---|")
    for kind, generate, regex in cases:
        path = workdir / f"{kind}.log"
        generate(path, megabytes)
        mb = path.stat().st_size / 1e6
        readers: list[tuple[str, Path | None]] = [("parser", None)]
        if source is not None:
            readers.append((f"parser ({baseline})", source))
        for label, code in readers:
            env = {**os.environ, **({"PYTHONPATH": str(code)} if code else {})}
            out = subprocess.run(
                [sys.executable, __file__, "--child", "parse", kind, str(path)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            parsed = json.loads(out.stdout)
            print(
                f"| {kind} {mb:.0f} MB | {label} | {parsed['seconds']:.2f} | {mb / parsed['seconds']:.1f} | "
                f"{parsed['rows']} |"
            )
        started = os.times()
        grep = subprocess.run(
            ["grep", "-cE", ere(regex), str(path)], capture_output=True, text=True, check=False
        )
        ended = os.times()
        cpu = (ended.children_user - started.children_user) + (
            ended.children_system - started.children_system
        )
        print(
            f"| {kind} {mb:.0f} MB | grep -cE | {cpu:.2f} | {mb / cpu:.1f} | {grep.stdout.strip()} |",
            flush=True,
        )
        path.unlink()


# --- lag -----------------------------------------------------------------------------------------


def adversarial_cri(path: Path, megabytes: int, rows: list[str]) -> int:
    """A CRI log file of ``megabytes`` MB: adversarial lines of 256 KiB (each cut at 64 KiB by the
    reader), each kind in turn, with ``rows`` (real lines) between; returns its size."""
    lines = [adversarial(kind, 256 * 1024) for kind in KINDS]
    start = datetime.now(UTC)  # after the pod's start, before the Job's end (a goodput read's window)
    with open(path, "w") as out:
        index = 0
        while out.tell() < megabytes * 1_000_000:
            for line in [*lines, *rows]:
                stamp = (start + timedelta(microseconds=index)).strftime("%Y-%m-%dT%H:%M:%S.%f")
                out.write(f"{stamp}000Z stdout F {line}\n")
                index += 1
    return path.stat().st_size


async def on_the_loop(items: AsyncIterable[Any], work: Callable[[list[Any]], object], **_: Any) -> None:
    """What the controllers did before ``runtime.offload``: every line parsed on the loop."""
    async for item in items:
        work([item])


ONES = "[" + ",".join(["1"] * 30) + "]"
ADVERSARIAL_THRESHOLD = f"{ONES}.all(a, {ONES}.all(b, a == b && value > 0.0))"
"""The costliest threshold admission accepts: within 256 characters, 8 macros, nesting 2; it
reaches its 2,000-step budget (InvalidThresholdExpression), evaluated on the event loop."""
HUNDREDS = "[" + ",".join(["1"] * 300) + "]"
ADVERSARIAL_HEALTH = f"{HUNDREDS}.all(a, {HUNDREDS}.all(b, a == b))"
"""A 1.2 KB node-health expression that runs to its 10,000-step budget on every node, every pass."""


def lag_run(megabytes: int, offloaded: bool, workdir: Path, expressions: bool = False) -> dict[str, Any]:
    """One Workflow whose Job measures bandwidth (launcher) and goodput (worker) over adversarial
    logs, with the manager's controllers in this process; the loop's lag over the reads. With
    ``expressions`` the Job also has the adversarial threshold and node-health expressions."""
    from lightkube import AsyncClient, Client, KubeConfig
    from lightkube.resources.core_v1 import Namespace, Pod

    from nvcre import resources
    from nvcre.manager.main import build, parse_args
    from nvcre.runtime import looplag, offload
    from nvcre.testing.controlplane import ControlPlane
    from nvcre.testing.inspect import trainjob_of
    from nvcre.testing.kwok import PHASE_ANNOTATION, Kwok, register_pod_log
    from nvcre.testing.nodes import GpuNodeSpec, create_gpu_nodes
    from nvcre.testing.waiting import wait_for
    from nvcre.testing.workloads import POOL_LABEL, create_trainjob_pods, finish_trainjob, workflow

    if not offloaded:
        offload.in_batches = on_the_loop  # type: ignore[assignment]
    ns, name = "bench", "lag"
    corpus = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    nccl_rows = (
        (corpus / "nccl" / "cre-real-a100-allreduce-2node-pdt-timestamps.log").read_text().splitlines()
    )
    nccl_rows = [line.split(" ", 1)[1] if line[:2] == "20" else line for line in nccl_rows]
    steps = [
        line.split(" ", 1)[1] if line[:2] == "20" else line
        for log in sorted((corpus / "nemo").glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
    ]
    with ControlPlane() as cp, Kwok(cp) as kwok, cp.client() as kube:
        kube.create(Namespace.from_dict({"metadata": {"name": ns}}))
        create_gpu_nodes(kube, 2, GpuNodeSpec(labels={POOL_LABEL: "lag"}), prefix="lag")
        profile = next(
            p for p in kube.list(resources.LogProfile) if p.metadata.name == "nemo-training"
        ).to_dict()
        profile["metadata"] = {"name": "nemo-on-node"}
        profile["spec"]["workerStrategy"] = {"type": "Single", "replicatedJobName": "node"}
        kube.create(resources.LogProfile.from_dict(profile))
        measure = {
            "bandwidthMeasurement": {
                "logProfileRef": "nccl-bandwidth",
                "sampleInterval": "5s",
                "testType": "all_reduce",
            },
            "goodputMeasurement": {"logProfileRef": "nemo-on-node", "sampleInterval": "5s"},
        }
        if expressions:
            measure["thresholds"] = {"busBandwidthGBps": ADVERSARIAL_THRESHOLD}
            measure["nodeHealthMonitor"] = {"cel": {"expression": ADVERSARIAL_HEALTH}}
        kube.create(resources.Workflow.from_dict(workflow(name, ns, "lag", 2, mpi=True, job_spec=measure)))
        kubeconfig = cp.write_kubeconfig(workdir / "kubeconfig")
        samples: list[float] = []
        timings: dict[str, float] = {}
        outcomes: dict[str, str] = {}

        async def main() -> None:
            client = AsyncClient(config=KubeConfig.from_file(str(kubeconfig)), field_manager="nvcre-manager")
            manager = build(parse_args(["--metrics-bind-address=0", "--health-probe-bind-address=0"]), client)
            stop = asyncio.Event()
            running = asyncio.create_task(manager.run(stop))
            sampler = asyncio.create_task(looplag.sample(samples.append, interval=0.05))
            await asyncio.to_thread(play, kube)
            stop.set()
            sampler.cancel()
            await running
            await client.close()

        def play(kube: Client) -> None:
            trainjob_of(kube, ns, f"{name}-job", timeout=120)
            pods = [p["metadata"]["name"] for p in create_trainjob_pods(kube, ns, f"{name}-job-workload")]
            for pod in pods:
                wait_for(
                    lambda pod=pod: kube.get(Pod, pod, namespace=ns).status.phase == "Running", 60, what=pod
                )
            launcher = next(p for p in pods if "-launcher-" in p)
            size = 0
            for pod in pods:
                container = "launcher" if pod == launcher else "node"
                path = workdir / "log.cri"
                size += adversarial_cri(path, megabytes, (nccl_rows if pod == launcher else steps) * 20)
                shutil.move(str(path), kwok.logs_dir / f"{ns}_{pod}_{container}.log")
                register_pod_log(kube, kwok.logs_dir, ns, pod, "", container=container, append=True)
            samples.clear()  # the lag while the logs are read: sampled from here
            started = time.monotonic()
            time.sleep(12)  # running samples of every log, on the 5 s interval
            for pod in pods:
                kube.patch(
                    Pod, pod, {"metadata": {"annotations": {PHASE_ANNOTATION: "Succeeded"}}}, namespace=ns
                )
            for pod in pods:
                wait_for(
                    lambda pod=pod: kube.get(Pod, pod, namespace=ns).status.phase == "Succeeded", 60, what=pod
                )
            finish_trainjob(kube, ns, f"{name}-job-workload", succeeded=True, measurements=False)

            def complete(resource: Any, suffix: str) -> bool:
                status = kube.get(resource, f"{name}-job-{suffix}", namespace=ns).status or {}
                return any(
                    c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions") or ()
                )

            wait_for(
                lambda: complete(resources.BandwidthMeasurement, "bandwidth"),
                1800,
                what="bandwidth final read",
            )
            wait_for(
                lambda: complete(resources.GoodputMeasurement, "goodput"), 1800, what="goodput final read"
            )
            timings.update(seconds=time.monotonic() - started, megabytes=size / 1e6)
            for resource, suffix in (
                (resources.BandwidthMeasurement, "bandwidth"),
                (resources.GoodputMeasurement, "goodput"),
            ):
                status = kube.get(resource, f"{name}-job-{suffix}", namespace=ns).status or {}
                done = next(c for c in status["conditions"] if c["type"] == "Complete")
                outcomes[suffix] = f"{done['reason']}: {done['message'][:100]}"
            if expressions:

                def judged() -> dict[str, Any] | None:
                    job = kube.get(resources.Job, f"{name}-job", namespace=ns).to_dict()
                    found = [
                        c for c in job["status"].get("conditions") or () if c["type"] == "ValidationFailed"
                    ]
                    return found[0] if found else None

                verdict = wait_for(judged, 600, what="the Job's verdict")
                outcomes["verdict"] = f"{verdict['reason']}: {verdict['message'][:100]}"

        asyncio.run(main())
    ordered = sorted(samples)
    return {
        **timings,
        "outcomes": outcomes,
        "samples": len(ordered),
        "p50": statistics.median(ordered),
        "p99": ordered[math.ceil(len(ordered) * 0.99) - 1],
        "max": ordered[-1],
    }


_WORKER_PARSER: Any = None


def _parse_in_worker(batch: list[str]) -> int:
    """A process pool's work: the batch through the worker's own parser (rows found)."""
    global _WORKER_PARSER
    if _WORKER_PARSER is None:
        from nvcre.measure.builtin import builtin_profiles
        from nvcre.measure.nccl import Parser
        from nvcre.measure.profile import compile_profile

        manifest = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth")
        _WORKER_PARSER = Parser(compile_profile(manifest))
    return sum(1 for line in batch if _WORKER_PARSER.parse_line(line) is not None)


def executors_run(megabytes: int, mode: str) -> dict[str, Any]:
    """The loop's lag while ``megabytes`` MB of adversarial lines (cut at 64 KiB, real rows between)
    are parsed: on the loop, in ``runtime.offload``'s threads, or in a process pool (batches
    pickled across). No API server: lines come from memory, 64 KiB at a time, as fast as asked."""
    from concurrent.futures import ProcessPoolExecutor

    from nvcre.measure.builtin import builtin_profiles
    from nvcre.measure.lines import LineSplitter
    from nvcre.measure.nccl import Parser
    from nvcre.measure.profile import compile_profile
    from nvcre.runtime import looplag, offload

    manifest = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth")
    parser = Parser(compile_profile(manifest))
    unit = (
        "\n".join(
            [
                *(adversarial(kind, 256 * 1024) for kind in KINDS),
                *["  1048576  262144  float  sum  -1  95.40  10.99  20.61  0"] * 2000,
            ]
        )
        + "\n"
    )
    data = unit.encode() * max(1, megabytes * 1_000_000 // len(unit.encode()))
    samples: list[float] = []

    async def lines() -> Any:
        splitter = LineSplitter()
        for start in range(0, len(data), 64 * 1024):
            for line in splitter.feed(data[start : start + 64 * 1024]):
                yield line  # as a stream whose next bytes are already buffered: no wait

    async def main() -> float:
        sampler = asyncio.create_task(looplag.sample(samples.append, interval=0.01))
        await asyncio.sleep(0)  # the sampler's first sleep starts before the parsing
        started = time.monotonic()
        if mode == "loop":
            async for line in lines():
                parser.parse_line(line)
        elif mode == "threads":
            await offload.in_batches(lines(), lambda batch: [parser.parse_line(line) for line in batch])
        else:  # the same batches, one in flight, pickled to a worker process
            with ProcessPoolExecutor(max_workers=offload.THREADS) as pool:
                offload.executor = lambda: pool  # type: ignore[assignment]
                await offload.in_batches(lines(), _parse_in_worker)
        seconds = time.monotonic() - started
        await asyncio.sleep(0.02)  # the sample the parsing held up, if it held up every one
        sampler.cancel()
        return seconds

    seconds = asyncio.run(main())
    ordered = sorted(samples)
    return {
        "seconds": seconds,
        "megabytes": len(data) / 1e6,
        "samples": len(ordered),
        "p50": statistics.median(ordered),
        "p99": ordered[math.ceil(len(ordered) * 0.99) - 1],
        "max": ordered[-1],
    }


def executors_table(megabytes: int) -> None:
    print("| parsing (no API server) | MB | seconds | lag samples | p50 | p99 | max |")
    print("|---|---|---|---|---|---|---|")
    for mode in ("loop", "threads", "processes"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", "executors", str(megabytes), mode],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.splitlines()[-1])
        print(
            f"| {mode} | {r['megabytes']:.0f} | {r['seconds']:.1f} | {r['samples']} | "
            f"{r['p50'] * 1000:.1f} ms | {r['p99'] * 1000:.1f} ms | {r['max'] * 1000:.1f} ms |",
            flush=True,
        )


def lag_table(megabytes: int, workdir: Path) -> None:
    print("| parsing | logs read (MB) | seconds | lag samples | p50 | p99 | max |")
    print("|---|---|---|---|---|---|---|")
    runs = (
        (True, False, "worker threads (runtime.offload)"),
        (False, False, "on the event loop"),
        (True, True, "worker threads, with the costliest threshold and node-health expressions"),
    )
    for offloaded, expressions, where in runs:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "lag",
                str(megabytes),
                "1" if offloaded else "0",
                str(workdir),
                "1" if expressions else "0",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.splitlines()[-1])
        print(
            f"| {where} | {r['megabytes']:.0f} | {r['seconds']:.0f} | {r['samples']} | "
            f"{r['p50'] * 1000:.1f} ms | {r['p99'] * 1000:.1f} ms | {r['max'] * 1000:.1f} ms |",
            flush=True,
        )
        for kind, outcome in r["outcomes"].items():
            print(f"  {where}: {kind} {outcome}", file=sys.stderr)


def main() -> None:
    arguments = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    arguments.add_argument("parts", nargs="*", help="lines, throughput, executors, lag (default: all)")
    arguments.add_argument(
        "--baseline", help="also run the lines and the throughput on this git revision (e.g. main)"
    )
    arguments.add_argument("--limit", type=float, default=20.0, help="seconds a baseline line may take")
    arguments.add_argument("--mb", type=int, default=20, help="MB of each generated log (throughput)")
    arguments.add_argument(
        "--lag-mb", type=int, default=32, help="MB of adversarial log per pod (lag, executors)"
    )
    arguments.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = arguments.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "line":
            print(json.dumps(child_line(rest[0], rest[1], int(rest[2]))))
        elif kind == "parse":
            print(json.dumps(child_parse(rest[0], rest[1])))
        elif kind == "executors":
            print(json.dumps(executors_run(int(rest[0]), rest[1])))
        else:
            print(json.dumps(lag_run(int(rest[0]), rest[1] == "1", Path(rest[2]), rest[3:] == ["1"])))
        return
    parts = args.parts or ["lines", "throughput", "executors", "lag"]
    unknown = set(parts) - {"lines", "throughput", "executors", "lag"}
    if unknown:
        arguments.error(f"unknown parts {sorted(unknown)}")
    workdir = Path(tempfile.mkdtemp(prefix="nvcre-bench-logs-"))
    try:
        source = export_source(args.baseline, workdir) if args.baseline else None
        if "lines" in parts:
            lines_table(args.baseline, source, args.limit)
        if "throughput" in parts:
            throughput_table(args.mb, args.baseline, source, workdir)
        if "executors" in parts:
            executors_table(args.lag_mb)
        if "lag" in parts:
            lag_table(args.lag_mb, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
