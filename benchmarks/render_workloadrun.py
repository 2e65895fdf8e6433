"""Render time of a WorkloadRun: in process (``build_workflow``) and as a cold CLI invocation
(and the cold start of ``nvcrectl --help``).

Run: ``python benchmarks/render_workloadrun.py [--repeat N] [--cold N] [--baseline SRC]``. Prints a
table of the median and p95 per scenario. ``--baseline`` names the ``src`` folder of another tree
(for example ``git archive main src | tar -x -C /tmp/main``): each cold row then runs in both
trees, alternating invocations so both see the same load, and adds the baseline's median.
Every cold invocation is a fresh interpreter with bytecode already compiled (one untimed run per
tree first, bytecode writing on), as for an installed ``nvcrectl``. Nothing here asserts a time;
compare runs by eye.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
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


def _environment(src: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    return env


def cold_cli(args: list[str], repeat: int, trees: Sequence[Path | None]) -> list[list[float]]:
    """Fresh interpreters running ``nvcrectl ARGS`` (as the console script does) in each tree
    (``None``: this one), alternating; the times per tree."""
    command = [sys.executable, "-c", "from nvcre.cli.main import main; main()", *args]
    environments = [_environment(tree) for tree in trees]
    for env in environments:  # compile the bytecode, untimed
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    times: list[list[float]] = [[] for _ in trees]
    for _ in range(repeat):
        for samples, env in zip(times, environments, strict=True):
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
            samples.append(time.perf_counter() - start)
    return times


def row(name: str, times: list[float], baseline: list[float] | None = None) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    line = f"| {name:<41} | {len(times):>5} | {statistics.median(times) * 1e3:>10.2f} | {p95 * 1e3:>9.2f} |"
    if baseline is not None:
        line += f" {statistics.median(baseline) * 1e3:>16.2f} |" if baseline else f" {'':>16} |"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200, help="in-process iterations per scenario")
    parser.add_argument("--cold", type=int, default=10, help="cold CLI invocations per scenario")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="src folder of another tree to time the cold rows in"
    )
    options = parser.parse_args()
    trees: list[Path | None] = [None] if options.baseline is None else [None, options.baseline.resolve()]
    extra = (f" {'baseline median':>16} |", f"{'-' * 18}|") if options.baseline else ("", "")
    print(f"| {'scenario':<41} | {'runs':>5} | {'median ms':>10} | {'p95 ms':>9} |{extra[0]}")
    print(f"|{'-' * 43}|{'-' * 7}|{'-' * 12}|{'-' * 11}|{extra[1]}")
    for name, func in scenarios():
        print(row(name, measure(func, options.repeat), [] if options.baseline else None), flush=True)
    render = ["workloadrun", "render", str(EXAMPLE)]
    cold_rows = [
        ("cold nvcrectl --help (target 300)", ["--help"]),
        ("cold CLI --gpu-arch h100", [*render, "--gpu-arch", "h100"]),
        ("cold CLI --platform aws h100 (target 500)", [*render, "--platform", "aws", "--gpu-arch", "h100"]),
    ]
    for name, args in cold_rows:
        times = cold_cli(args, options.cold, trees)
        print(row(name, times[0], times[1] if options.baseline else None), flush=True)


if __name__ == "__main__":
    main()
