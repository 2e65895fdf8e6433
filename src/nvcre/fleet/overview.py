"""What ``nvcrectl node history`` and ``nvcrectl fleet`` show, as pure functions of NodeRecords
and Nodes (plain dicts, as the API server returns them).

:func:`history` turns one record into rows, oldest first, each with its trend: every measured key
judged against a node's past (:data:`nvcre.fleet.baselines.METRICS`) compared with the median of
the passing results of the same category and shape before it, as the record's own
``busBandwidthVsBaseline`` is (up to :data:`Default.BASELINE_RESULTS` of them; none before it:
no trend).

:func:`fleet` files each node under exactly one :data:`STATES` member, from its newest result
(every category, the order of the record's summary):

* ``certified``: the newest result passed, within :data:`Default.STALE_AFTER_DAYS` days of ``now``;
* ``stale``: the newest result passed, longer ago than that;
* ``regressed``: the newest result failed with cause ``Regression`` (below the node's own baseline);
* ``failing``: the newest result failed with any other cause;
* ``never``: a GPU Node without a record, or a record without a result.

It counts them overall, by topology domain and by GPU type. A node's domain is the single domain
its newest result's group spanned; else its Node's network-block label (the platform's, as
isolation tells domains apart when no topology key is set), else its ``nvidia.com/gpu.clique``
label; else ``unknown``. Its GPU type is its Node's ``nvidia.com/gpu.product`` label (``unknown``
without one, or for a record whose Node is not among the GPU Nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from nvcre.api.v1alpha1.constants import Default, FailureCause, NodeLabel
from nvcre.fleet import baselines
from nvcre.fleet.records import PASSED, record_node, result_time
from nvcre.measure.thresholds import AVG_STEP_TIME, BUS_BANDWIDTH, GOODPUT_RATIO
from nvcre.orchestration.isolation import domain_key
from nvcre.platform import node_platform

CERTIFIED: Final = "certified"
FAILING: Final = "failing"
REGRESSED: Final = "regressed"
STALE: Final = "stale"
NEVER: Final = "never"
STATES: Final = (CERTIFIED, FAILING, REGRESSED, STALE, NEVER)
"""Every state a node is filed under, in the order the counts list them."""
UNKNOWN: Final = "unknown"
"""The domain or GPU type of a node that has none."""
SHOWN_VALUES: Final = (BUS_BANDWIDTH, AVG_STEP_TIME, GOODPUT_RATIO)
"""The measured values a history row shows (the JSON keeps every value the record holds)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_mapping(obj.get("metadata")).get("name") or "")


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(obj.get("metadata")).get("labels"))


def _results(record: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    status = _mapping(record.get("status"))
    out = []
    for category in status.get("categories") or ():
        if isinstance(category, Mapping):
            results = [r for r in category.get("results") or () if isinstance(r, Mapping)]
            out.append((str(category.get("name") or ""), results))
    return out


def newest(record: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The record's newest result with its category (by time, then category name, as the
    record's summary orders them; of equal ones, the later written); None when it has none."""
    found = [(result_time(r), category, r) for category, results in _results(record) for r in results]
    if not found:
        return None
    # Times are whole seconds, so two runs can end in one: the position breaks the tie (``max``
    # alone keeps the first of equal keys, the older result).
    latest = max(range(len(found)), key=lambda i: (found[i][0], found[i][1], i))
    _, category, result = found[latest]
    return category, result


# --- history ---------------------------------------------------------------------------------------


def trend(
    before: Sequence[Mapping[str, Any]], result: Mapping[str, Any]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """``result``'s change against the results ``before`` it (same category, oldest first), by
    key, in percent rounded to 0.1 (-17.5: 17.5 % below; for step time a positive change is
    slower), and the baselines it is against (``{key: {value, results}}``)."""
    changes: dict[str, float] = {}
    bases: dict[str, dict[str, float]] = {}
    for key in baselines.METRICS:
        found = baselines.against_earlier(before, result, key)
        if found is not None:
            changes[key] = found[0]
            bases[key] = {"value": round(found[1].value, 2), "results": found[1].results}
    return changes, bases


def _ref(value: Any, *fields: str) -> dict[str, Any] | None:
    ref = _mapping(value)
    if not ref:
        return None
    return {f: ref.get(f) for f in fields}


def history(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every result of the record as a row, oldest first (by time, then category). Every row has
    every key (None when the record has no such field): time, category, run (kind, namespace,
    name), workflow and job (namespace, name), group, groupSize, domains, partners, values,
    vsBaseline and baseline (by key, :func:`trend`), verdict, reason, cause, message."""
    rows: list[tuple[datetime, str, dict[str, Any]]] = []
    for category, results in _results(record):
        for index, result in enumerate(results):
            changes, bases = trend(results[:index], result)
            row = {
                "time": result.get("time"),
                "category": category,
                "run": _ref(result.get("run"), "kind", "namespace", "name"),
                "workflow": _ref(result.get("workflow"), "namespace", "name"),
                "job": _ref(result.get("job"), "namespace", "name"),
                "group": result.get("group"),
                "groupSize": result.get("groupSize"),
                "domains": list(result.get("domains") or ()),
                "partners": list(result.get("partners") or ()),
                "values": dict(sorted(_mapping(result.get("values")).items())),
                "vsBaseline": changes,
                "baseline": bases,
                "verdict": result.get("verdict"),
                "reason": result.get("reason"),
                "cause": result.get("cause"),
                "message": result.get("message"),
            }
            rows.append((result_time(result), category, row))
    rows.sort(key=lambda t: (t[0], t[1]))
    return [row for _, _, row in rows]


# --- the fleet -------------------------------------------------------------------------------------


def state_of(record: Mapping[str, Any] | None, now: datetime, stale_after_days: int) -> str:
    """The one state a node is filed under (module docstring)."""
    found = newest(record) if record is not None else None
    if found is None:
        return NEVER
    _, result = found
    if result.get("verdict") == PASSED:
        recent = now - result_time(result) <= timedelta(days=stale_after_days)
        return CERTIFIED if recent else STALE
    return REGRESSED if result.get("cause") == FailureCause.REGRESSION else FAILING


def node_domain(result: Mapping[str, Any] | None, node: Mapping[str, Any] | None) -> str:
    """The node's topology domain (module docstring)."""
    domains = list((result or {}).get("domains") or ())
    if len(domains) == 1 and domains[0]:
        return str(domains[0])
    if node is None:
        return UNKNOWN
    labels = _labels(node)
    for key in (domain_key({}, node_platform(node)), NodeLabel.GPU_CLIQUE):
        if key and labels.get(key):
            return str(labels[key])
    return UNKNOWN


def gpu_type(node: Mapping[str, Any] | None) -> str:
    """The Node's ``nvidia.com/gpu.product`` label; :data:`UNKNOWN` without one."""
    return str(_labels(node).get(NodeLabel.GPU_PRODUCT) or UNKNOWN) if node is not None else UNKNOWN


@dataclass(frozen=True)
class FleetNode:
    name: str
    state: str
    domain: str
    gpu_type: str
    node_found: bool
    """A GPU Node of that name was listed (False: a record whose Node is gone, or not a GPU Node)."""
    category: str | None
    """The newest result's."""
    last_result_time: str | None
    last_pass_time: str | None
    cause: str | None
    """The newest result's cause, when it failed."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "domain": self.domain,
            "gpuType": self.gpu_type,
            "nodeFound": self.node_found,
            "lastCategory": self.category,
            "lastResultTime": self.last_result_time,
            "lastPassTime": self.last_pass_time,
            "cause": self.cause,
        }


def _last_pass(record: Mapping[str, Any]) -> str | None:
    passes = [r for _, results in _results(record) for r in results if r.get("verdict") == PASSED]
    return str(max(passes, key=result_time).get("time")) if passes else None


def fleet_nodes(
    records: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    now: datetime,
    stale_after_days: int = Default.STALE_AFTER_DAYS,
) -> list[FleetNode]:
    """Every GPU Node and every recorded node, by name, each with its state, domain and GPU type."""
    by_node = {_name(node): node for node in nodes if _name(node)}
    by_record = {record_node(record): record for record in records if record_node(record)}
    out = []
    for name in sorted({*by_node, *by_record}):
        node, record = by_node.get(name), by_record.get(name)
        found = newest(record) if record is not None else None
        category, result = found if found is not None else (None, None)
        state = state_of(record, now, stale_after_days)
        out.append(
            FleetNode(
                name=name,
                state=state,
                domain=node_domain(result, node),
                gpu_type=gpu_type(node),
                node_found=node is not None,
                category=category,
                last_result_time=str(result.get("time")) if result is not None else None,
                last_pass_time=_last_pass(record) if record is not None else None,
                cause=str(result["cause"])
                if result and state in (FAILING, REGRESSED) and result.get("cause")
                else None,
            )
        )
    return out


def counts(nodes: Iterable[FleetNode]) -> dict[str, int]:
    """``nodes`` and one count per state (every state, zeros included)."""
    out = dict.fromkeys(("nodes", *STATES), 0)
    for node in nodes:
        out["nodes"] += 1
        out[node.state] += 1
    return out


def _grouped(nodes: Sequence[FleetNode], field: str, label: str) -> list[dict[str, Any]]:
    keys = sorted({getattr(n, field) for n in nodes}, key=lambda k: (k == UNKNOWN, k))
    return [{label: key, **counts(n for n in nodes if getattr(n, field) == key)} for key in keys]


def fleet(
    records: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    now: datetime,
    stale_after_days: int = Default.STALE_AFTER_DAYS,
) -> dict[str, Any]:
    """``nvcrectl fleet -o json``: ``staleAfterDays``; ``total`` (nodes and a count per state);
    ``byDomain`` and ``byGpuType`` (the same counts per domain / GPU type, sorted, ``unknown``
    last); ``nodes`` (each node, by name: :meth:`FleetNode.to_dict`)."""
    found = fleet_nodes(records, nodes, now, stale_after_days)
    return {
        "staleAfterDays": stale_after_days,
        "total": counts(found),
        "byDomain": _grouped(found, "domain", "domain"),
        "byGpuType": _grouped(found, "gpu_type", "gpuType"),
        "nodes": [n.to_dict() for n in found],
    }


__all__ = [
    "CERTIFIED",
    "FAILING",
    "NEVER",
    "REGRESSED",
    "STALE",
    "STATES",
    "UNKNOWN",
    "FleetNode",
    "counts",
    "fleet",
    "fleet_nodes",
    "gpu_type",
    "history",
    "newest",
    "node_domain",
    "state_of",
    "trend",
]
