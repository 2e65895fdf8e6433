"""How long the test control plane takes to start and stop; prints a table of medians.

    .venv/bin/python benchmarks/controlplane_start.py [--runs 3]

Scenarios (binaries are always taken from the build cache; building is not measured here):

* ``cold``    fresh etcd data dir, fresh certificates, empty CRD parse memo (first start on a
              machine after ``build``);
* ``warm``    fresh etcd data dir, CRD parse memo warm (every later test session);
* ``restart`` the same etcd data dir again: CRDs already stored, applying them is a no-op;
* ``+kwok``   kwok start on top of a warm control plane, and 8 fake GPU nodes becoming Ready.

Columns are cumulative seconds since ``start()``: etcd healthy, kube-apiserver ready, CRDs
Established; then ``stop()`` time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lightkube.resources.core_v1 import Node

from nvcre.testing import binaries as bins
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.kwok import Kwok
from nvcre.testing.nodes import create_gpu_nodes, gpu_node_names, node_ready
from nvcre.testing.waiting import wait_for

Row = dict[str, float]


def _start_stop(binaries: bins.Binaries, workdir: Path | None = None) -> Row:
    cp = ControlPlane(binaries=binaries, workdir=workdir)
    started = time.monotonic()
    cp.start()
    total = time.monotonic() - started
    stopping = time.monotonic()
    cp.stop()
    return {**cp.timings, "total": total, "stop": time.monotonic() - stopping}


def cold(binaries: bins.Binaries) -> Row:
    memo = tempfile.mkdtemp(prefix="nvcre-bench-cache-")
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = memo  # empty CRD memo; binaries are passed in explicitly
    try:
        return _start_stop(binaries)
    finally:
        if previous is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = previous
        shutil.rmtree(memo, ignore_errors=True)


def warm(binaries: bins.Binaries) -> Row:
    return _start_stop(binaries)


def restart_factory(binaries: bins.Binaries) -> tuple[Callable[[bins.Binaries], Row], Callable[[], None]]:
    workdir = Path(tempfile.mkdtemp(prefix="nvcre-bench-restart-"))
    _start_stop(binaries, workdir)  # populate etcd once
    return (lambda b: _start_stop(b, workdir)), (lambda: shutil.rmtree(workdir, ignore_errors=True))


def with_kwok(binaries: bins.Binaries) -> Row:
    with ControlPlane(binaries=binaries) as cp:
        started = time.monotonic()
        with Kwok(cp), cp.client() as client:
            kwok_up = time.monotonic() - started
            create_gpu_nodes(client, 8)
            names = gpu_node_names(8)
            wait_for(
                lambda: all(node_ready(client.get(Node, n)) for n in names), timeout=60, what="8 nodes Ready"
            )
            nodes_ready = time.monotonic() - started
    return {"kwok": kwok_up, "8 nodes Ready": nodes_ready}


def median_row(rows: list[Row]) -> Row:
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (median is shown)")
    args = parser.parse_args()

    lookup_started = time.monotonic()
    binaries = bins.ensure(bins.REQUIRED)  # builds on first use (not part of the table)
    lookup = time.monotonic() - lookup_started
    print(f"binary lookup (warm cache): {lookup * 1000:.0f} ms", file=sys.stderr)

    restart, cleanup = restart_factory(binaries)
    scenarios: list[tuple[str, Callable[[bins.Binaries], Row]]] = [
        ("cold", cold),
        ("warm", warm),
        ("restart", restart),
    ]
    results: list[tuple[str, Row]] = []
    try:
        for name, run in scenarios:
            rows = []
            for index in range(args.runs):
                rows.append(run(binaries))
                print(f"{name} run {index + 1}/{args.runs}: {rows[-1]['total']:.2f}s", file=sys.stderr)
            results.append((name, median_row(rows)))
        kwok_rows = [with_kwok(binaries) for _ in range(args.runs)]
    finally:
        cleanup()

    cpus = os.cpu_count()
    print(
        f"\ncontrol plane start, median of {args.runs} runs, {cpus} CPUs, kube-apiserver "
        f"{binaries.versions.kubernetes}, etcd {binaries.versions.etcd}"
    )
    header = ("scenario", "etcd", "apiserver", "CRDs", "total", "stop")
    print(" | ".join(f"{h:>10}" for h in header))
    print("-|-".join("-" * 10 for _ in header))
    for name, row in results:
        cells = [row["etcd"], row["apiserver"], row["crds"], row["total"], row["stop"]]
        print(" | ".join([f"{name:>10}", *(f"{c:>9.2f}s" for c in cells)]))
    kwok_row = median_row(kwok_rows)
    print(
        f"\nkwok on a warm control plane: ready {kwok_row['kwok']:.2f}s, "
        f"8 fake GPU nodes Ready after {kwok_row['8 nodes Ready']:.2f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
