"""Render time of a WorkloadRun: in process (``build_workflow``) and as a cold CLI invocation
(and the cold start of ``nvcrectl --help``).

Run: ``python benchmarks/render_workloadrun.py [--repeat N] [--cold N]``. Prints a table of the
median and p95 per scenario. Nothing here asserts a time; compare runs by eye.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.platform import synthetic_nodes
from nvcre.render.workloadrun import build_workflow

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "workloadrun" / "nccl-all-reduce.yaml"
PVC_EXAMPLE = REPO / "examples" / "workloadrun" / "nccl-from-pvc.yaml"


def load(path: Path) -> WorkloadRun:
    return WorkloadRun.model_validate(yaml.safe_load(path.read_text()))


def scenarios() -> list[tuple[str, Callable[[], Any]]]:
    run = load(EXAMPLE)
    pvc = load(PVC_EXAMPLE)
    nodes_256 = synthetic_nodes("aws", "h100", count=256)
    return [
        ("offline, unresolved (h100)", lambda: build_workflow(run, None, resolve=False, gpu_arch="h100")),
        (
            "offline --platform aws h100",
            lambda: build_workflow(run, None, resolve=True, platform="aws", gpu_arch="h100"),
        ),
        (
            "offline --platform aws gb300",
            lambda: build_workflow(run, None, resolve=True, platform="aws", gpu_arch="gb300"),
        ),
        (
            "offline volumes+config onprem",
            lambda: build_workflow(pvc, None, resolve=True, platform="onprem", gpu_arch="h100"),
        ),
        ("controller, 256 nodes", lambda: build_workflow(run, nodes_256, resolve=False)),
        ("dry-run, 256 nodes resolved", lambda: build_workflow(run, nodes_256, resolve=True)),
    ]


def measure(func: Callable[[], Any], repeat: int) -> list[float]:
    func()  # warm caches (table load, CEL compile)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return times


def cold_cli(args: list[str], repeat: int) -> list[float]:
    """A fresh interpreter running ``nvcrectl ARGS`` (as the console script does), each time."""
    command = [sys.executable, "-c", "from nvcre.cli.main import main; main()", *args]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def row(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"| {name:<34} | {len(times):>5} | {statistics.median(times) * 1e3:>10.2f} | {p95 * 1e3:>9.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200, help="in-process iterations per scenario")
    parser.add_argument("--cold", type=int, default=10, help="cold CLI invocations per scenario")
    options = parser.parse_args()
    print(f"| {'scenario':<34} | {'runs':>5} | {'median ms':>10} | {'p95 ms':>9} |")
    print(f"|{'-' * 36}|{'-' * 7}|{'-' * 12}|{'-' * 11}|")
    for name, func in scenarios():
        print(row(name, measure(func, options.repeat)), flush=True)
    print(row("cold nvcrectl --help (target 300)", cold_cli(["--help"], options.cold)), flush=True)
    render = ["workloadrun", "render", str(EXAMPLE)]
    print(
        row("cold CLI --gpu-arch h100", cold_cli([*render, "--gpu-arch", "h100"], options.cold)),
        flush=True,
    )
    cold = cold_cli([*render, "--platform", "aws", "--gpu-arch", "h100"], options.cold)
    print(row("cold CLI --platform aws h100 (target 500)", cold), flush=True)


if __name__ == "__main__":
    main()
