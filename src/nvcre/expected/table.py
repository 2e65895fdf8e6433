"""The expected-performance table: its rows, the checks a row must pass, and the matching rules.

A pure module over the table's text: nothing here reads a file or imports the rest of nvcre, so
the measurement, orchestration and CLI layers can all use it.

Matching a group shape to bandwidth rows (the same rules ``docs/expected-performance.md`` states):

* the architecture must be the row's; the platform must be the row's, or the row's platform is
  ``any`` (a figure that only the hardware inside a node or an NVLink rack decides). A row for the
  platform wins over an ``any`` row. An unknown platform (and ``onprem`` without its own row) gets
  the ``any`` rows only: there is no fallback from one platform's network to another's;
* the collective is normalised first (:func:`collective_name`);
* the shape picks the span: one node is ``node`` whatever else the shape says; a group spanning two
  or more topology domains is ``across`` and needs a row for exactly that many domains; a group
  inside one NVLink clique with multi-node NVLink on is ``mnnvl``; any other group is ``domain``
  (one network block, or no topology labels at all);
* the group's node count must lie in the row's node range.

No row, no figure: the caller says "no published figure" and judges nothing against the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import yaml

from nvcre import yamlio

BUS_BANDWIDTH: Final = "busBandwidthGBps"
AVG_STEP_TIME: Final = "avgStepTimeSec"
AVG_TFLOPS_PER_GPU: Final = "avgTFLOPsPerGPU"
TRAINING_KEYS: Final = (AVG_STEP_TIME, AVG_TFLOPS_PER_GPU)

ANY_PLATFORM: Final = "any"
NO_PUBLISHED_FIGURE: Final = "no published figure"

COLLECTIVES: Final = ("all_reduce", "all_gather", "alltoall")
"""The collectives a bandwidth row may name (the catalog's multi-node testType values)."""

NIC_LOOPBACK: Final = "nic_loopback_all_reduce"
"""The catalog's ``nccl-loopback`` entry: an all_reduce on one node through the NIC loopback path."""

_ALIASES: Final = {
    "all_reduce": (
        "allreduce",
        "all_reduce_perf",
        "all_reduce_perf_mpi",
        "nccl-all-reduce",
        "nccl-loopback-nvswitch",
    ),
    "all_gather": ("allgather", "all_gather_perf", "all_gather_perf_mpi", "nccl-all-gather"),
    "alltoall": ("all_to_all", "alltoall_perf", "alltoall_perf_mpi", "nccl-alltoall"),
    NIC_LOOPBACK: ("nccl-loopback",),
}
_CANONICAL: Final = {alias: name for name, aliases in _ALIASES.items() for alias in (name, *aliases)}


def collective_name(name: str) -> str:
    """The table's name for a collective given as a testType, an nccl-tests binary or a catalog variant.

    ``all_reduce``, ``all_reduce_perf``, ``all_reduce_perf_mpi`` and ``nccl-all-reduce`` are all
    ``all_reduce``; so is ``nccl-loopback-nvswitch`` (an all_reduce over one node's NVLink). The
    catalog's ``nccl-loopback`` (SHM and P2P off: the NIC loopback path) is ``nic_loopback_all_reduce``,
    for which nothing is published. The testType ``loopback_all_reduce`` names both loopback entries
    and is kept as it is, so it matches no row: pass the catalog variant to tell them apart. Any
    other name comes back lower-cased, without a directory.
    """
    base = name.strip().rsplit("/", 1)[-1].lower()
    return _CANONICAL.get(base, base)


class Span(StrEnum):
    NODE = "node"
    DOMAIN = "domain"
    MNNVL = "mnnvl"
    ACROSS = "across"


@dataclass(frozen=True)
class GroupShape:
    """The nodes one group of a workload runs on, as far as its expected performance goes."""

    nodes: int
    """Nodes in the group."""
    domains: int = 1
    """Topology domains (network blocks or NVLink cliques) the group spans; 0 (no labels) counts as 1."""
    mnnvl: bool = False
    """The group is inside one NVL72 clique with multi-node NVLink on."""

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"a group has at least 1 node, got {self.nodes}")
        if self.domains < 0:
            raise ValueError(f"a group spans 0 or more topology domains, got {self.domains}")

    @property
    def span(self) -> Span:
        if self.nodes == 1:
            return Span.NODE
        if self.domains >= 2:
            return Span.ACROSS
        return Span.MNNVL if self.mnnvl else Span.DOMAIN

    def __str__(self) -> str:
        return _shape_text(self.span, self.nodes, self.nodes, self.domains)


@dataclass(frozen=True)
class ExpectedFigure:
    """One expected value and where it comes from."""

    value: float
    """GB/s for bandwidth, seconds for step time, TFLOP/s for TFLOP/s."""
    key: str
    """The threshold key it is for: ``busBandwidthGBps``, ``avgStepTimeSec`` or ``avgTFLOPsPerGPU``."""
    source: str
    """The short citation messages print."""
    row: str
    """The row's stable id, e.g. ``h100/aws/all_reduce/2-nodes``."""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _nodes_text(low: int, high: int) -> str:
    return _plural(low, "node") if low == high else f"{low}-{high} nodes"


def _shape_text(span: Span, low: int, high: int, domains: int) -> str:
    nodes = _nodes_text(low, high)
    if span is Span.NODE:
        return nodes
    if span is Span.MNNVL:
        return f"{nodes} in one NVLink clique (MNNVL)"
    if span is Span.ACROSS:
        return f"{nodes} across {domains} domains"
    return f"{nodes} in one domain"


@dataclass(frozen=True)
class Row:
    """One row of the table: a figure for one architecture, platform, subject and shape."""

    arch: str
    platform: str
    subject: str
    """A collective for a bandwidth row, a catalog training entry for a training row."""
    key: str
    value: float
    low: int
    """The smallest node count the row serves."""
    high: int
    """The largest node count the row serves."""
    span: Span
    domains: int
    """Topology domains the group spans: the row's count for ``across``, else 1."""
    interconnect: str
    cite: str
    source: str
    derived: str = ""

    @property
    def id(self) -> str:
        nodes = f"{self.low}-node" if self.low == self.high == 1 else f"{self.nodes_id}-nodes"
        if self.span is Span.MNNVL:
            nodes = f"mnnvl-{nodes}"
        elif self.span is Span.ACROSS:
            nodes = f"{nodes}-{self.domains}-domains"
        subject = self.subject if self.key == BUS_BANDWIDTH else f"{self.subject}/{self.key}"
        return f"{self.arch}/{self.platform}/{subject}/{nodes}"

    @property
    def nodes_id(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"

    @property
    def shape(self) -> str:
        """The shapes it serves, in words: ``3-4 nodes in one domain``."""
        return _shape_text(self.span, self.low, self.high, self.domains)

    def serves(self, shape: GroupShape) -> bool:
        return (
            self.span is shape.span
            and self.low <= shape.nodes <= self.high
            and (self.span is not Span.ACROSS or self.domains == shape.domains)
        )

    def figure(self) -> ExpectedFigure:
        return ExpectedFigure(value=self.value, key=self.key, source=self.cite, row=self.id)


class ExpectedTableError(ValueError):
    """The table is malformed (a build defect of the packaged file): the message names the field."""


_BANDWIDTH_FIELDS: Final = frozenset(
    {"arch", "platform", "interconnect", "collective", "nodes", "span", "domains", BUS_BANDWIDTH}
    | {"cite", "source", "derived"}
)
_TRAINING_FIELDS: Final = frozenset(
    {"arch", "platform", "interconnect", "entry", "nodes", *TRAINING_KEYS, "cite", "source", "derived"}
)
_NAME: Final = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_RANGE: Final = re.compile(r"^(\d+)(?:-(\d+))?$")


def _text(where: str, raw: Mapping[str, Any], field: str, *, required: bool = True) -> str:
    value = raw.get(field)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise ExpectedTableError(f"{where}.{field}: must be a non-empty string")
    return " ".join(value.split())


def _name(where: str, raw: Mapping[str, Any], field: str) -> str:
    value = _text(where, raw, field)
    if not _NAME.match(value):
        raise ExpectedTableError(f"{where}.{field}: {value!r} must be a lower-case name")
    return value


def _nodes(where: str, raw: Mapping[str, Any]) -> tuple[int, int]:
    value = raw.get("nodes")
    match = _RANGE.match(str(value)) if isinstance(value, int | str) and not isinstance(value, bool) else None
    if match is None:
        raise ExpectedTableError(f"{where}.nodes: {value!r} must be a node count (2) or a range (3-4)")
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if not 1 <= low <= high:
        raise ExpectedTableError(f"{where}.nodes: {value!r} must be a count >= 1 or a range low-high")
    return low, high


def _number(where: str, raw: Mapping[str, Any], field: str) -> float:
    value = raw.get(field)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ExpectedTableError(f"{where}.{field}: {value!r} must be a number > 0")
    return float(value)


def _check_fields(where: str, raw: Any, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise ExpectedTableError(f"{where}: must be a mapping")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ExpectedTableError(f"{where}.{unknown[0]}: unknown field")
    return raw


def _bandwidth_row(where: str, raw: Any) -> Row:
    raw = _check_fields(where, raw, _BANDWIDTH_FIELDS)
    low, high = _nodes(where, raw)
    collective = _name(where, raw, "collective")
    if collective not in COLLECTIVES:
        raise ExpectedTableError(
            f"{where}.collective: {collective!r} must be one of {', '.join(COLLECTIVES)}"
        )
    default = Span.NODE if high == 1 else Span.DOMAIN
    try:
        span = Span(raw.get("span", default))
    except ValueError:
        raise ExpectedTableError(
            f"{where}.span: {raw.get('span')!r} must be one of {', '.join(s.value for s in Span)}"
        ) from None
    if (span is Span.NODE) != (low == high == 1):
        raise ExpectedTableError(f"{where}.span: span node is exactly one node, and one node is span node")
    domains = raw.get("domains", 1)
    if span is Span.ACROSS:
        if type(domains) is not int or domains < 2:
            raise ExpectedTableError(f"{where}.domains: span across needs domains >= 2, got {domains!r}")
    elif "domains" in raw:
        raise ExpectedTableError(f"{where}.domains: only a row with span across names its domains")
    return Row(
        arch=_name(where, raw, "arch"),
        platform=_name(where, raw, "platform"),
        subject=collective,
        key=BUS_BANDWIDTH,
        value=_number(where, raw, BUS_BANDWIDTH),
        low=low,
        high=high,
        span=span,
        domains=domains,
        interconnect=_text(where, raw, "interconnect"),
        cite=_text(where, raw, "cite"),
        source=_text(where, raw, "source"),
        derived=_text(where, raw, "derived", required=False),
    )


def _training_row(where: str, raw: Any) -> Row:
    raw = _check_fields(where, raw, _TRAINING_FIELDS)
    keys = [key for key in TRAINING_KEYS if key in raw]
    if len(keys) != 1:
        raise ExpectedTableError(f"{where}: needs exactly one of {', '.join(TRAINING_KEYS)}")
    low, high = _nodes(where, raw)
    return Row(
        arch=_name(where, raw, "arch"),
        platform=_name(where, raw, "platform"),
        subject=_name(where, raw, "entry"),
        key=keys[0],
        value=_number(where, raw, keys[0]),
        low=low,
        high=high,
        span=Span.NODE if high == 1 else Span.DOMAIN,
        domains=1,
        interconnect=_text(where, raw, "interconnect", required=False),
        cite=_text(where, raw, "cite"),
        source=_text(where, raw, "source"),
        derived=_text(where, raw, "derived", required=False),
    )


def _check_overlaps(rows: tuple[Row, ...], name: str) -> None:
    """Two rows for the same architecture, platform, subject, key and span may not share a shape."""
    seen: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        group = (row.arch, row.platform, row.subject, row.key, row.span.value, str(row.domains))
        for other in seen.get(group, ()):
            if row.low <= other.high and other.low <= row.high:
                raise ExpectedTableError(f"{name}: rows {other.id} and {row.id} serve the same shapes")
        seen.setdefault(group, []).append(row)


@dataclass(frozen=True)
class Table:
    version: str
    rows: tuple[Row, ...]

    def _matching(self, arch: str, platform: str, subject: str, keep: Callable[[Row], bool]) -> list[Row]:
        arch, platform = arch.strip().lower(), platform.strip().lower()
        found = [
            row
            for row in self.rows
            if row.arch == arch
            and row.subject == subject
            and row.platform in (platform, ANY_PLATFORM)
            and keep(row)
        ]
        own = [row for row in found if row.platform == platform]
        return own or found

    def bandwidth(
        self, arch: str, platform: str, collective: str, shape: GroupShape
    ) -> ExpectedFigure | None:
        """The expected bus bandwidth of ``collective`` on a group of ``shape``; ``None``: no published figure."""
        name = collective_name(collective)
        rows = self._matching(
            arch, platform, name, lambda row: row.key == BUS_BANDWIDTH and row.serves(shape)
        )
        return rows[0].figure() if rows else None

    def training(self, arch: str, platform: str, entry: str, nodes: int) -> list[ExpectedFigure]:
        """The expected step time and/or TFLOP/s per GPU of a catalog training entry on ``nodes`` nodes."""
        name = entry.strip().lower().removeprefix("training/")
        rows = self._matching(
            arch, platform, name, lambda row: row.key in TRAINING_KEYS and row.low <= nodes <= row.high
        )
        return [row.figure() for row in sorted(rows, key=lambda row: row.key)]


def parse_table(text: str, name: str = "expected-performance.yaml") -> Table:
    """The table in ``text``; :class:`ExpectedTableError` names the first malformed field."""
    try:
        raw = yamlio.load(text)
    except yaml.YAMLError as error:
        raise ExpectedTableError(f"{name}: not valid YAML: {error}") from error
    raw = _check_fields(name, raw, frozenset({"version", "bandwidth", "training"}))
    version = raw.get("version")
    if not isinstance(version, str) or not version.strip():
        raise ExpectedTableError(f'{name}.version: must be a non-empty string (quote it: version: "1")')
    rows: list[Row] = []
    for section, parse in (("bandwidth", _bandwidth_row), ("training", _training_row)):
        entries = raw.get(section)
        if not isinstance(entries, list):
            raise ExpectedTableError(f"{name}.{section}: must be a list (empty: [])")
        rows += [parse(f"{name}.{section}[{index}]", entry) for index, entry in enumerate(entries)]
    table = Table(version=version.strip(), rows=tuple(rows))
    _check_overlaps(table.rows, name)
    return table
