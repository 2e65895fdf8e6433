"""A healthy simulated fleet measures what the expected-performance table says its hardware should.

For every bandwidth row of the packaged table (nvcre.expected) whose GPU the simulator models, a
healthy group of the row's shape (its smallest and its largest node count, in one topology
domain, across the row's domains, or in one NVLink clique) runs the row's collective as the
catalog runs it (mpirun, one rank per GPU, a sweep to 16 GiB), and the bus bandwidth nvcre would
take from that log (the largest out-of-place busbw) is within 5% of the row's figure.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from nvcre.expected import BUS_BANDWIDTH, Row, Span, rows
from nvcre.platform.gpu_defaults import resolve_gpu_defaults
from nvcre.platform.synthetic import PRODUCT_LABELS
from nvcre.sandbox import Member, node_model, simulate
from nvcre.sandbox.model import GPUS

#: The platform a row for ``any`` platform is simulated on (no row of its own there).
ANY = "onprem"
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+\w+\s+\S+\s+-?\d+\s+\S+\s+\S+\s+(\S+)\s")


def _cases() -> list[Any]:
    cases = []
    for row in rows():
        if row.key == BUS_BANDWIDTH and PRODUCT_LABELS.get(row.arch) in GPUS:
            cases += [pytest.param(row, n, id=f"{row.id}@{n}") for n in dict.fromkeys((row.low, row.high))]
    return cases


def group(row: Row, nodes: int) -> list[Member]:
    """``nodes`` healthy nodes of the row's GPU and platform, in the row's domains (cliques)."""
    product = PRODUCT_LABELS[row.arch]
    platform = ANY if row.platform == "any" else row.platform
    gpus = resolve_gpu_defaults(row.arch, platform).gpus_per_node
    domains = row.domains if row.span is Span.ACROSS else 1
    members = []
    for i in range(nodes):
        domain = f"domain-{i * domains // nodes}"
        clique = domain if row.span in (Span.MNNVL, Span.ACROSS) and row.arch.startswith("gb") else None
        model = node_model(f"n{i}", product, platform, gpus=gpus, domain=domain, nvlink_domain=clique)
        members.append(Member(f"n{i}", model))
    return members


@pytest.mark.parametrize(("row", "nodes"), _cases())
def test_a_healthy_group_measures_its_rows_figure(row: Row, nodes: int) -> None:
    members = group(row, nodes)
    gpus = members[0].node.gpus
    command = [
        "mpirun", "-N", str(gpus), f"/opt/nccl-tests/build/{row.subject}_perf",
        "-b", "1G", "-e", "16G", "-f", "2", "-n", "20",
    ]  # fmt: skip
    sim = simulate(command, members, seed=7)
    busbw = [float(m.group(3)) for m in map(ROW.match, (line.text for line in sim.lines)) if m]
    assert sim.exit_code == 0 and busbw, "a healthy run prints its table"
    assert 0.95 <= max(busbw) / row.value <= 1.05, (max(busbw), row.value, row.id)


def test_every_bandwidth_row_with_a_simulated_gpu_is_checked() -> None:
    """The rows left out are those of GPUs the simulator has no model of (none today)."""
    checked = {case.values[0].id for case in _cases()}
    bandwidth = {r.id for r in rows() if r.key == BUS_BANDWIDTH}
    assert checked == bandwidth
