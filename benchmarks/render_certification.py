"""Render time of a Certification with every catalog category (9 Workflows).

    .venv/bin/python benchmarks/render_certification.py [--repeat N]

Prints one row per scenario: the catalog load (compile + zero render of every entry, once per
process), then a whole 9-category Certification rendered on synthetic nodes (offline, as
``nvcrectl certification render --platform P``) and on sets of discovered nodes (64 and 4,096,
as the controller does), with the per-category mean and the slowest category.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeat", type=int, default=10, help="renders of the whole Certification per scenario"
    )
    args = parser.parse_args()

    load_samples = _time(lambda: load_catalog_from(ENTRIES_DIR), 3)
    cert = _certification()
    scenarios: list[tuple[str, list[dict[str, Any]], bool]] = [
        ("offline onprem/h100", synthetic_nodes("onprem", "h100"), True),
        ("offline aws/gb300", synthetic_nodes("aws", "gb300"), True),
        ("offline oci/gb300", synthetic_nodes("oci", "gb300"), True),
        ("64 nodes azure/h100", synthetic_nodes("azure", "h100", count=64), False),
        ("4096 nodes aws/h100", synthetic_nodes("aws", "h100", count=4096), False),
    ]
    rows: list[tuple[str, float, float, float, float]] = []
    for name, nodes, offline in scenarios:
        _render_all(cert, nodes, offline)  # warm-up
        totals: list[float] = []
        per_category: list[float] = []
        for _ in range(args.repeat):
            samples = _render_all(cert, nodes, offline)
            totals.append(sum(samples))
            per_category.extend(samples)
        rows.append(
            (name, statistics.median(totals), min(totals), statistics.mean(per_category), max(per_category))
        )

    print(f"catalog load (9 entries, compile + zero render): {statistics.median(load_samples) * 1000:.1f} ms")
    print()
    header = ("scenario", "9 categories median", "min", "per category mean", "slowest category")
    print(f"{header[0]:<22} {header[1]:>20} {header[2]:>10} {header[3]:>18} {header[4]:>17}")
    for name, median, best, mean, worst in rows:
        print(
            f"{name:<22} {median * 1000:>17.1f} ms {best * 1000:>7.1f} ms {mean * 1000:>15.1f} ms "
            f"{worst * 1000:>14.1f} ms"
        )


if __name__ == "__main__":
    main()
