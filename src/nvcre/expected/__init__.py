"""What each fleet's hardware should measure: the catalog's expected-performance table.

The table ships with the catalog (``nvcre/catalog/expected-performance.yaml``): one row per GPU
architecture, platform, collective (or training entry) and group shape, each with the published
source of its figure. These functions look figures up in it; the matching rules are in
:mod:`nvcre.expected.table` and ``docs/expected-performance.md``. Nothing here talks to a cluster
or imports another part of nvcre, so the launch, verdict and CLI code share one lookup.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Final

from nvcre.expected.table import (
    ANY_PLATFORM,
    AVG_STEP_TIME,
    AVG_TFLOPS_PER_GPU,
    BUS_BANDWIDTH,
    COLLECTIVES,
    NIC_LOOPBACK,
    NO_PUBLISHED_FIGURE,
    ExpectedFigure,
    ExpectedTableError,
    GroupShape,
    Row,
    Span,
    Table,
    collective_name,
    parse_table,
)

TABLE_RESOURCE: Final = "catalog/expected-performance.yaml"
"""The packaged table, relative to the ``nvcre`` package."""


@cache
def table() -> Table:
    """The packaged table, read once."""
    try:
        text = resources.files("nvcre").joinpath(TABLE_RESOURCE).read_text()
    except OSError as error:
        raise ExpectedTableError(f"{TABLE_RESOURCE}: cannot read packaged data: {error}") from error
    return parse_table(text, TABLE_RESOURCE)


TABLE_VERSION: Final = table().version
"""The table's ``version``: reports and messages name it next to a figure."""


def expected_bandwidth(arch: str, platform: str, collective: str, shape: GroupShape) -> ExpectedFigure | None:
    """The expected nccl-tests bus bandwidth (GB/s) of ``collective`` on a group of ``shape``.

    ``arch`` and ``platform`` are nvcre's detected names (``h100``, ``aws``); ``collective`` a
    testType, nccl-tests binary or catalog variant (:func:`collective_name`). ``None`` when no
    published figure applies: judge nothing against the table then.
    """
    return table().bandwidth(arch, platform, collective, shape)


def expected_training(arch: str, platform: str, entry: str, nodes: int) -> list[ExpectedFigure]:
    """The expected ``avgStepTimeSec`` / ``avgTFLOPsPerGPU`` of a catalog training entry
    (``nemotron5-8b`` or ``training/nemotron5-8b``) on groups of ``nodes`` nodes; empty when none
    is published."""
    return table().training(arch, platform, entry, nodes)


def rows() -> list[Row]:
    """Every row of the packaged table, in file order."""
    return list(table().rows)


__all__ = [
    "ANY_PLATFORM",
    "AVG_STEP_TIME",
    "AVG_TFLOPS_PER_GPU",
    "BUS_BANDWIDTH",
    "COLLECTIVES",
    "NIC_LOOPBACK",
    "NO_PUBLISHED_FIGURE",
    "TABLE_RESOURCE",
    "TABLE_VERSION",
    "ExpectedFigure",
    "ExpectedTableError",
    "GroupShape",
    "Row",
    "Span",
    "Table",
    "collective_name",
    "expected_bandwidth",
    "expected_training",
    "parse_table",
    "rows",
    "table",
]
