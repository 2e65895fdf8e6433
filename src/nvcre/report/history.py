"""The report's node history (pure): what the nodes' NodeRecords say beyond this run.

* **Repeat failures**: each failed node of this run with failed results of *other* runs in its
  record within :data:`FAILURE_WINDOW_DAYS` days up to this run's result (the newest result of
  this run the record holds; the report's time while it holds none): ``3rd failure in 30 days``
  counts this run's failure and two earlier failed results. Every category and every run
  counts, as ``summary.failuresLast30Days`` does; this run's own results (its Certification's or
  WorkloadRun's UID, or one of its Workflows') never do.
* **Not certified**: each node of this run's target (:func:`target_nodes`) that did not pass in
  this run and whose record holds no passed result (``never certified``; no record at all reads
  the same), or whose last pass is more than ``Default.STALE_AFTER_DAYS`` days before the
  report's time.

Nothing is said (:func:`node_history` is None) without the report's time, when the records
could not be read, when no node of the run has a record, or when they say neither; so a report
without records is the report it was before records existed. Rules on one record are in
:mod:`nvcre.fleet.history`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nvcre.api.v1alpha1.constants import Default
from nvcre.api.v1alpha1.meta import format_time
from nvcre.api.v1alpha1.noderecord import FAILURE_WINDOW_DAYS
from nvcre.fleet import history as fh

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class RepeatFailure:
    """A failed node of this run that failed before: ``failures`` counts this run's failure."""

    node: str
    failures: int
    days: int = FAILURE_WINDOW_DAYS

    @property
    def text(self) -> str:
        return f"{fh.ordinal(self.failures)} failure in {self.days} days"


@dataclass(frozen=True)
class UncertifiedNode:
    """A node of the target with no recent pass: never (``last_pass`` empty), or ``days`` ago."""

    node: str
    last_pass: str = ""
    """RFC 3339, empty when it never passed."""
    days: int | None = None
    """Whole days from its last pass to the report's time."""

    @property
    def text(self) -> str:
        if not self.last_pass:
            return "never certified"
        return f"last passed {self.days} days ago ({self.last_pass[:10]})"


@dataclass(frozen=True)
class NodeHistory:
    repeat_failures: tuple[RepeatFailure, ...] = ()
    """Worst first (most failures), then by name."""
    not_certified: tuple[UncertifiedNode, ...] = ()
    """Never certified first, then the oldest pass first, then by name."""
    window_days: int = FAILURE_WINDOW_DAYS
    stale_after_days: int = Default.STALE_AFTER_DAYS


def _names(values: Iterable[Any]) -> set[str]:
    return {str(v) for v in values or () if v}


def target_nodes(workflows: Iterable[Obj]) -> list[str]:
    """The nodes of a run's target the report knows, sorted: every node its Workflows placed in a
    group (this iteration's, earlier iterations', a diagnosis's) and every node they excluded
    (cordoned, another GPU architecture, too few GPUs). Nodes an ``Unpinned`` placement left out
    of every group are not known to the report."""
    out: set[str] = set()
    for workflow in workflows:
        orchestration = ((workflow.get("status") or {}).get("orchestration")) or {}
        groups = list(orchestration.get("groups") or ())
        for iteration in orchestration.get("iterationHistory") or ():
            groups.extend(iteration.get("groups") or ())
        for group in groups:
            out |= _names(group.get("nodes") or ())
        out |= _names(orchestration.get("excludedNodes") or ())
        diagnose = orchestration.get("diagnose") or {}
        for key in ("healthyNodes", "suspectNodes", "faultyNodes"):
            out |= _names(diagnose.get(key) or ())
        for result in (diagnose.get("screeningResults") or {}).values():
            out |= _names(result.get("nodes") or ())
    return sorted(out)


def run_uids(run: Obj, workflows: Iterable[Obj]) -> set[str]:
    """The UIDs this run's results carry: its Certification's or WorkloadRun's, its Workflows'."""
    return _names((obj.get("metadata") or {}).get("uid") for obj in (run, *workflows))


def node_history(
    records: Sequence[Obj] | None,
    *,
    uids: Collection[str],
    failed: Iterable[str],
    target: Iterable[str],
    passed: Collection[str],
    now: datetime | None,
    window_days: int = FAILURE_WINDOW_DAYS,
    stale_after_days: int = Default.STALE_AFTER_DAYS,
) -> NodeHistory | None:
    """The repeat failures among ``failed`` (this run's failed nodes) and the nodes of ``target``
    not certified within ``stale_after_days`` of ``now`` (those in ``passed``, this run's passed
    nodes, are). ``records``: the NodeRecords read (any others are ignored); None when they could
    not be read."""
    if records is None or now is None:
        return None
    failed_nodes, target_set = sorted(_names(failed)), _names(target)
    by_name = {str((r.get("metadata") or {}).get("name") or ""): r for r in records}
    if not any(n in by_name for n in target_set.union(failed_nodes)):
        return None
    repeats = []
    for node in failed_nodes:
        record = by_name.get(node)
        until = fh.run_time(record, uids) or now
        earlier = fh.earlier_failures(record, until, uids, window_days)
        if earlier:
            repeats.append(RepeatFailure(node, earlier + 1, window_days))
    uncertified = []
    for node in sorted(target_set - set(passed)):
        last = fh.last_pass(by_name.get(node))
        if not fh.stale(last, now, stale_after_days):
            continue
        if last is None:
            uncertified.append(UncertifiedNode(node))
        else:
            uncertified.append(UncertifiedNode(node, format_time(last), fh.whole_days(last, now)))
    if not repeats and not uncertified:
        return None
    return NodeHistory(
        repeat_failures=tuple(sorted(repeats, key=lambda r: (-r.failures, r.node))),
        not_certified=tuple(sorted(uncertified, key=lambda u: (bool(u.last_pass), u.last_pass, u.node))),
        window_days=window_days,
        stale_after_days=stale_after_days,
    )
