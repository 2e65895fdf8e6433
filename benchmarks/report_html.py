"""The HTML report of a large Certification: its size and how fast a browser shows it.

    .venv/bin/python benchmarks/report_html.py [--nodes 512 4096] [--repeat 5]

For each fleet size, a Certification of two categories over ``N`` gcp H100 nodes in topology
blocks of 64 (the catalog's NCCL all-reduce and a Nemotron training run, 8 nodes a group, one
node 40 % slow), its objects made by the controllers' own pure functions as the report goldens
make theirs (:mod:`tests.golden.report_inputs`); then the report model built from them, the page
rendered (:mod:`nvcre.report.html`), and the page opened from a file in headless Chromium
(:mod:`nvcre.testing.browser`, a fresh tab each time): the time to its load event and to its
first screenshot (layout and paint done). Medians of ``--repeat`` runs. Needs ``chromium``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.golden.report_inputs

from tests.golden import report_inputs as ri  # noqa: E402

from nvcre.report.html import render_html  # noqa: E402
from nvcre.report.model import Report  # noqa: E402
from nvcre.testing.browser import chromium, chromium_path, png_colours  # noqa: E402


class _EveryGroup(dict[str, Any]):
    """The same run for every group: a fault names one node, the others' simulations ignore it."""

    def __init__(self, run: ri.GroupRun) -> None:
        super().__init__()
        self.run = run

    def get(self, key: str, default: Any = None) -> ri.GroupRun:
        return self.run


def certification(count: int) -> dict[str, Any]:
    fleet = ri.nodes(count, platform="gcp", domain_size=64)
    names = sorted(str(n["metadata"]["name"]) for n in fleet)
    slow_node = names[len(names) // 3]
    cert = ri._certification(
        "cert-fleet",
        [
            ri._all_reduce("value >= 300", nodes_per_job=8),
            {"domain": "training", "variant": "nemotron5-8b", "options": {"nodesPerJob": 8}},
        ],
    )
    bandwidth = _EveryGroup(ri.GroupRun(faults=(f"{slow_node}=slow-nic:0.4",)))
    training = _EveryGroup(ri.GroupRun(goodput=ri.GOODPUT))

    def play(runs: dict[str, Any]) -> Any:
        return lambda wf: ri.play_workflow(wf, fleet, 8, runs, platform="gcp", topology_key=ri.GCP_BLOCK)

    return ri.certification_case(cert, fleet, [play(bandwidth), play(training)])


def _median(values: list[float]) -> float:
    return statistics.median(values)


def measure(count: int, repeat: int, folder: Path) -> dict[str, Any]:
    started = time.perf_counter()
    objects = certification(count)
    inputs = time.perf_counter() - started
    builds, renders = [], []
    report: Report | None = None
    page = ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        report = ri.report_of(objects)
        t1 = time.perf_counter()
        page = render_html([report])
        builds.append(t1 - t0)
        renders.append(time.perf_counter() - t1)
    assert report is not None
    path = folder / f"report-{count}.html"
    path.write_text(page)
    loads, paints, console, requests, colours = [], [], 0, 0, 0
    with chromium(width=1200, height=900) as browser:
        browser.open(path, screenshot=False)  # warm the browser's own caches once, not counted
        for _ in range(repeat):
            load = browser.open(path)
            loads.append(load.load_seconds)
            paints.append(load.render_seconds)
            console += len(load.console)
            requests += len(load.other_requests)
            colours = png_colours(load.png, stride=16).colours
    return {
        "nodes": count,
        "groups": sum(len(c.bandwidth_groups) or len(c.group_metrics) for c in report.categories),
        "failed": len(report.failed_nodes),
        "inputs": inputs,
        "build": _median(builds),
        "render": _median(renders),
        "bytes": len(page.encode()),
        "load": _median(loads),
        "paint": _median(paints),
        "worst_paint": max(paints),
        "console": console,
        "requests": requests,
        "colours": colours,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[512, 4096])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if chromium_path() is None:
        print("report_html: no chromium on the PATH (apt-get install chromium); skipped")
        return 0
    print(f"report_html: a 2-category Certification, 8 nodes a group, medians of {args.repeat}")
    header = (
        f"{'nodes':>6} {'groups':>7} {'failed':>7} {'model s':>8} {'HTML s':>7} {'page KB':>8} "
        f"{'load s':>7} {'shown s':>8} {'worst shown s':>14} {'console':>8} {'requests':>9}"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="nvcre-report-html-") as folder:
        for count in args.nodes:
            row = measure(count, args.repeat, Path(folder))
            print(
                f"{row['nodes']:>6} {row['groups']:>7} {row['failed']:>7} {row['build']:>8.3f} "
                f"{row['render']:>7.3f} {row['bytes'] / 1024:>8.0f} {row['load']:>7.3f} {row['paint']:>8.3f} "
                f"{row['worst_paint']:>14.3f} {row['console']:>8} {row['requests']:>9}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
