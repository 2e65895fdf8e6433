"""Partitioning a large fleet in process: what the Workflow controller does once per Workflow.

    .venv/bin/python benchmarks/partitioning.py [--nodes 100000] [--repeat 5]

Rows: ``partition`` of ``--nodes`` node names into groups of 8 (with overflow), the same with a
topology key (domains of 18 nodes, packed), and ``discover`` (target matching, cordon and GPU
filtering) over as many Node objects followed by the plain partition. Prints median and best of
``--repeat`` runs (wall clock) and the median CPU time; nothing here asserts a time (target:
under 0.5 s at 100,000 nodes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from nvcre.orchestration.discovery import discover, name_of
from nvcre.orchestration.partition import partition

TOPOLOGY = "topology.k8s.aws/network-node-layer-1"


def node(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gpu-node-{index:06d}",
            "labels": {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "pool": "bench",
                TOPOLOGY: f"nn-{index // 18}",
            },
        },
        "spec": {},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }


def timed(func: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of each run (CPU time is what a shared machine distorts least)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        func()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    nodes = [node(i) for i in range(args.nodes)]
    names = [name_of(n) for n in nodes]
    labels = {name_of(n): n["metadata"]["labels"] for n in nodes}
    target = {"nodeSelector": {"pool": "bench"}}
    scenarios: list[tuple[str, Callable[[], object]]] = [
        ("partition, groups of 8", lambda: partition(names, 8)),
        ("partition by topology (domains of 18), groups of 8", lambda: partition(labels, 8, TOPOLOGY)),
        (
            "discover + partition, groups of 8",
            lambda: partition([name_of(n) for n in discover(nodes, target).nodes], 8),
        ),
    ]
    print(f"partitioning: {args.nodes} nodes, {args.repeat} runs each (target < 500 ms)")
    print(f"{'scenario':<52} {'median ms':>10} {'best ms':>9} {'CPU median ms':>14}")
    for name, func in scenarios:
        wall, cpu = timed(func, args.repeat)
        print(
            f"{name:<52} {statistics.median(wall) * 1e3:>10.1f} {min(wall) * 1e3:>9.1f}"
            f" {statistics.median(cpu) * 1e3:>14.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
