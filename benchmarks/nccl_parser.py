"""NCCL log parsing: throughput on a generated 200 MB log, next to ``grep -cE`` with a row
regex on the same file, and the memory of reading it through the API as the controller does.

    .venv/bin/python benchmarks/nccl_parser.py [--mb 200] [--no-api]

The log is nccl-tests output as ``kubectl logs --timestamps`` returns it: kubelet prefixes,
``NCCL INFO`` lines, headers and repeated cycles of a 8 B - 16 GiB sweep (one row in three lines).
Rows:

* ``tables``   ``nvcre.measure.nccl`` with the built-in ``nccl-bandwidth`` profile (``reader:
               NcclTests``, what the controller and ``nvcrectl analyze nccl`` run) over the file, in
               a child process: MB/s and its peak RSS;
* ``patterns`` the same with a profile of the reader ``Patterns`` and :data:`ROW_REGEX` as its
               ``bandwidthResult`` (a LogProfile of one's own), for comparison;
* ``grep -cE`` :data:`ROW_REGEX` translated to POSIX ERE (``\\d`` -> ``[0-9]``, ...; led by an
               optional kubelet prefix, which the parsers strip before matching), same file;
* ``api``      (without ``--no-api``) the same lines served by kwok through a real kube-apiserver and
               read with ``controllers.podlogs.stream_lines`` into the parser, as the controller's final
               read does, in a child process: MB/s and peak RSS (the point: it does not grow with the log).

The counts of rows must agree. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _nccl_rows import ROW_REGEX

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import Parser
from nvcre.measure.profile import compile_profile

PROFILE = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth")
PATTERNS = {
    "metadata": {"name": "nccl-rows"},
    "spec": {
        "timestamp": PROFILE["spec"]["timestamp"],
        "patterns": {"bandwidthResult": {"regex": ROW_REGEX}},
    },
}


def ere(regex: str) -> str:
    """The row regex in POSIX ERE for ``grep -E``, led by an optional kubelet prefix."""
    out = re.sub(r"\(\?P<\w+>", "(", regex).replace("(?:", "(")
    for python, posix in (
        (r"\d", "[0-9]"),
        (r"\s", "[[:space:]]"),
        (r"\S", "[^[:space:]]"),
        (r"\w", "[[:alnum:]_]"),
        (r"[[0-9].]", "[0-9.]"),
    ):
        out = out.replace(python, posix)
    return "^([0-9]{4}-[^ ]* )?" + out.removeprefix("^")


def _cycle() -> list[str]:
    lines = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20",
        *(
            f"nccl-ar-node-0-{r % 2}:{40 + r}:{40 + r} [{r % 8}] NCCL INFO Channel {c:02d}/0 : {r} -> {r + 1} via NET/IB/0"
            for r in range(4)
            for c in range(6)
        ),
        "nccl-ar-node-0-0:41:41 [0] NCCL INFO Using network IB",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    ]
    for power in range(3, 35):
        size = 1 << power
        alg = min(260.11, size / 6.6e7)
        lines.append(
            f"{size:>12} {size // 4:>13}     float     sum      -1  {size / 1e5 + 10:8.1f}  {alg:6.2f}  {alg * 1.875:6.2f}      0"
            f"  {size / 1e5 + 11:8.1f}  {alg:6.2f}  {alg * 1.875:6.2f}      0"
        )
        lines.append(f"nccl-ar-node-0-1:44:44 [3] NCCL INFO comm 0x55{power:04x} rank 3 nranks 16 - progress")
        lines.append("#")
    return [*lines, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 272.909"]


def generate(path: Path, megabytes: int, *, cri: bool) -> tuple[int, int]:
    """Write about ``megabytes`` MB of log (CRI format for kwok, else kubelet-prefixed); (bytes, rows)."""
    cycle, rows = _cycle(), 0
    per_cycle = sum(1 for line in cycle if line[:12].strip().isdigit())
    start = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    written, index, target = 0, 0, megabytes * 1_000_000
    with open(path, "w") as out:
        while written < target:
            chunk = []
            for line in cycle:
                stamp = (start + timedelta(microseconds=index)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
                chunk.append(f"{stamp} stdout F {line}\n" if cri else f"{stamp} {line}\n")
                index += 1
            text = "".join(chunk)
            out.write(text)
            written += len(text)
            rows += per_cycle
    return written, rows


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child_parse(path: str, reader: str = "tables") -> dict[str, Any]:
    parser = Parser(compile_profile(PROFILE if reader == "tables" else PATTERNS))
    aggregate = parser.aggregate()
    before = peak_rss_mb()
    started = time.perf_counter()
    with open(path, errors="replace") as log:
        for line in log:
            aggregate.add(parser.parse_line(line))
    return {
        "seconds": time.perf_counter() - started,
        "rows": aggregate.rows,
        "rss0": before,
        "rss": peak_rss_mb(),
    }


def child_api(kubeconfig: str, namespace: str, pod: str) -> dict[str, Any]:
    from lightkube import AsyncClient, KubeConfig

    from nvcre.controllers.podlogs import stream_lines

    async def run() -> dict[str, Any]:
        client = AsyncClient(config=KubeConfig.from_file(kubeconfig))
        parser = Parser(compile_profile(PROFILE))
        aggregate = parser.aggregate()
        before = peak_rss_mb()
        started = time.perf_counter()
        count = 0
        async for line in stream_lines(client, pod, namespace, "node"):
            aggregate.add(parser.parse_line(line))
            count += len(line) + 1
        seconds = time.perf_counter() - started
        await client.close()
        return {
            "seconds": seconds,
            "rows": aggregate.rows,
            "bytes": count,
            "rss0": before,
            "rss": peak_rss_mb(),
        }

    return asyncio.run(run())


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout))


def api_row(cri: Path, workdir: Path) -> dict[str, Any]:
    from lightkube import ApiError
    from lightkube.models.core_v1 import Container, PodSpec
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Namespace, Pod

    from nvcre.testing.controlplane import ControlPlane
    from nvcre.testing.kwok import Kwok, register_pod_log
    from nvcre.testing.nodes import create_gpu_nodes, node_ready
    from nvcre.testing.waiting import wait_for

    with ControlPlane() as cp, Kwok(cp) as kwok, cp.client() as kube:
        (node,) = create_gpu_nodes(kube, 1)
        name = str(node.metadata.name if node.metadata else "")
        wait_for(lambda: node_ready(kube.get(type(node), name)), 60, what="node Ready")
        kube.create(Namespace(metadata=ObjectMeta(name="bench")))
        spec = PodSpec(nodeName=name, containers=[Container(name="node", image="img")])
        kube.create(Pod(metadata=ObjectMeta(name="launcher", namespace="bench"), spec=spec))

        def running() -> bool:
            status = kube.get(Pod, "launcher", namespace="bench").status
            return status is not None and status.phase == "Running"

        wait_for(running, 60, what="pod Running")
        target = kwok.logs_dir / "bench_launcher_node.log"
        shutil.move(str(cri), target)
        register_pod_log(kube, kwok.logs_dir, "bench", "launcher", "", container="node", append=True)
        wait_for(
            lambda: next(iter(kube.log("launcher", namespace="bench", tail_lines=1)), None),
            60,
            what="log served",
            ignore=(ApiError,),
        )
        kubeconfig = cp.write_kubeconfig(workdir / "kubeconfig")
        return _child("api", str(kubeconfig), "bench", "launcher")


def main() -> None:
    arguments = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    arguments.add_argument("--mb", type=int, default=200, help="size of the generated log in MB")
    arguments.add_argument(
        "--no-api", action="store_true", help="skip the read through kube-apiserver + kwok"
    )
    arguments.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = arguments.parse_args()
    if args.child:
        kind, *rest = args.child
        print(json.dumps(child_parse(*rest) if kind == "parse" else child_api(*rest)))
        return
    workdir = Path(tempfile.mkdtemp(prefix="nvcre-bench-nccl-"))
    try:
        log = workdir / "nccl.log"
        size, rows = generate(log, args.mb, cri=False)
        mb = size / 1e6
        print(f"log: {mb:.0f} MB, {rows} rows (kubelet-prefixed lines)")
        print(
            f"{'reader':<10} {'seconds':>8} {'MB/s':>8} {'rows':>9} {'peak RSS MB':>12} {'RSS at start':>12}"
        )
        for reader in ("tables", "patterns"):
            parsed = _child("parse", str(log), reader)
            print(
                f"{reader:<10} {parsed['seconds']:8.2f} {mb / parsed['seconds']:8.1f} {parsed['rows']:>9} "
                f"{parsed['rss']:12.1f} {parsed['rss0']:12.1f}"
            )
        started = time.perf_counter()
        grep = subprocess.run(
            ["grep", "-cE", ere(ROW_REGEX), str(log)], capture_output=True, text=True, check=False
        )
        seconds = time.perf_counter() - started
        print(
            f"{'grep -cE':<10} {seconds:8.2f} {mb / seconds:8.1f} {grep.stdout.strip():>9} {'':>12} {'':>12}"
        )
        if not args.no_api:
            log.unlink()
            cri = workdir / "cri.log"
            _, cri_rows = generate(cri, args.mb, cri=True)
            api = api_row(cri, workdir)
            served = api["bytes"] / 1e6
            print(
                f"{'api':<10} {api['seconds']:8.2f} {served / api['seconds']:8.1f} {api['rows']:>9} "
                f"{api['rss']:12.1f} {api['rss0']:12.1f}"
            )
            print(f"api: {served:.0f} MB served by kwok (of a {args.mb} MB CRI file holding {cri_rows} rows)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
