"""Render time of a Certification with every catalog category (9 Workflows).

    .venv/bin/python benchmarks/render_certification.py [--repeat N] [--baseline SRC --rounds R]

Prints one row per scenario: the catalog load (compile + zero render of every entry, once per
process), then a whole 9-category Certification rendered on synthetic nodes (offline, as
``nvcrectl certification render --platform P``) and on sets of discovered nodes (64 and 4,096,
as the controller does), with the per-category mean and the slowest category.

``--baseline`` names the ``src`` folder of another tree (``git archive main src | tar -x -C
/tmp/main``): the benchmark then runs ``--rounds`` times in each tree, alternating fresh
processes so both see the same load, and prints the median of each tree's medians side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nvcre.api.v1alpha1.certification import Certification
from nvcre.catalog import load_catalog, render_category
from nvcre.catalog.loader import ENTRIES_DIR, load_catalog_from
from nvcre.platform import synthetic_nodes


def _certification() -> Certification:
    categories = [{"domain": e.domain, "variant": e.variant} for e in load_catalog().list()]
    return Certification.model_validate(
        {
            "metadata": {"name": "bench", "namespace": "nvcre"},
            "spec": {
                "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "bench"},
                "categories": categories,
            },
        }
    )


def _time(fn: Callable[[], Any], repeat: int) -> list[float]:
    samples: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def _render_all(cert: Certification, nodes: Sequence[Mapping[str, Any]], offline: bool) -> list[float]:
    per_category: list[float] = []
    for index in range(len(cert.spec.categories)):
        start = time.perf_counter()
        render_category(cert, index, nodes, offline=offline)
        per_category.append(time.perf_counter() - start)
    return per_category


SCENARIOS: list[tuple[str, str, str, int, bool]] = [
    ("offline onprem/h100", "onprem", "h100", 1, True),
    ("offline aws/gb300", "aws", "gb300", 1, True),
    ("offline oci/gb300", "oci", "gb300", 1, True),
    ("64 nodes azure/h100", "azure", "h100", 64, False),
    ("4096 nodes aws/h100", "aws", "h100", 4096, False),
]


def measure(repeat: int) -> dict[str, Any]:
    """Catalog load and per scenario (median, min, per-category mean, slowest category), seconds."""
    load_samples = _time(lambda: load_catalog_from(ENTRIES_DIR), 3)
    cert = _certification()
    rows: dict[str, list[float]] = {}
    for name, platform, arch, count, offline in SCENARIOS:
        nodes = synthetic_nodes(platform, arch, count=count)
        _render_all(cert, nodes, offline)  # warm-up
        totals: list[float] = []
        per_category: list[float] = []
        for _ in range(repeat):
            samples = _render_all(cert, nodes, offline)
            totals.append(sum(samples))
            per_category.extend(samples)
        rows[name] = [
            statistics.median(totals),
            min(totals),
            statistics.mean(per_category),
            max(per_category),
        ]
    return {"load": statistics.median(load_samples), "rows": rows}


def _in_tree(src: Path | None, repeat: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, __file__, "--repeat", str(repeat), "--json"]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeat", type=int, default=10, help="renders of the whole Certification per scenario"
    )
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.add_argument("--baseline", type=Path, default=None, help="src folder of another tree")
    parser.add_argument("--rounds", type=int, default=3, help="processes per tree with --baseline")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.repeat)))
        return
    if args.baseline is None:
        result = measure(args.repeat)
        print(f"catalog load (9 entries, compile + zero render): {result['load'] * 1000:.1f} ms")
        print()
        header = ("scenario", "9 categories median", "min", "per category mean", "slowest category")
        print(f"{header[0]:<22} {header[1]:>20} {header[2]:>10} {header[3]:>18} {header[4]:>17}")
        for name, (median, best, mean, worst) in result["rows"].items():
            print(
                f"{name:<22} {median * 1000:>17.1f} ms {best * 1000:>7.1f} ms {mean * 1000:>15.1f} ms "
                f"{worst * 1000:>14.1f} ms"
            )
        return
    runs: dict[str, list[dict[str, Any]]] = {"this tree": [], "baseline": []}
    for _ in range(args.rounds):
        runs["this tree"].append(_in_tree(None, args.repeat))
        runs["baseline"].append(_in_tree(args.baseline.resolve(), args.repeat))
    print(f"{args.rounds} processes per tree, alternating; median of their 9-category medians")
    print(f"{'scenario':<22} {'this tree':>12} {'baseline':>12}")
    load = {tree: statistics.median(r["load"] for r in results) for tree, results in runs.items()}
    print(f"{'catalog load':<22} {load['this tree'] * 1000:>9.1f} ms {load['baseline'] * 1000:>9.1f} ms")
    for name, *_ in SCENARIOS:
        tree, base = (statistics.median(r["rows"][name][0] for r in runs[key]) for key in runs)
        print(f"{name:<22} {tree * 1000:>9.1f} ms {base * 1000:>9.1f} ms")


if __name__ == "__main__":
    main()
