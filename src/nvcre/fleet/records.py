"""The per-node record's rules (the NodeRecord kind), as pure functions of plain data.

:func:`node_results` turns an ended Workflow, its Jobs, their measurements and its failed-nodes
entries into one result per node; :func:`fold` adds results to a record's status (a result whose
Workflow or Job is already recorded is skipped, so writing again changes nothing), keeps the
newest :data:`MAX_RESULTS` per category and computes the summary as of ``now``.

A node's verdict is the Workflow's: ``Failed`` when the Workflow's failed-nodes record names it
(with that entry's reason, cause and message), else ``Passed`` only if one of its Jobs passed
(a record that cannot be read is never a pass: the group's failure is recorded instead). Its values, group and partners
are those of its latest Job in the Workflow whose outcome agrees with that verdict
(:func:`_deciding_jobs`): a node failed by isolation shows its failed re-test's bandwidth, as the
report does, and a healthy partner lent to that re-test keeps its own group's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import Annotation, ConditionType, Kind, Label
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.api.v1alpha1.noderecord import (
    FAILED,
    FAILURE_WINDOW_DAYS,
    MAX_CATEGORIES,
    MAX_PARTNERS,
    MAX_RESULTS,
    PASSED,
)
from nvcre.conditions import condition_true, ended
from nvcre.fleet import baselines
from nvcre.measure.thresholds import BUS_BANDWIDTH, measured_values, number
from nvcre.measure.verdicts import group_nodes
from nvcre.orchestration.completion import group_failure

RUN_KINDS = (Kind.CERTIFICATION, Kind.WORKLOAD_RUN)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The time of a result whose time cannot be read (it sorts first)."""

Result = dict[str, Any]
"""A ``NodeResult`` in its wire form (camelCase)."""


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


def _ref(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = _meta(obj)
    ref = {"namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid")}
    return {k: str(v) for k, v in ref.items() if v}


def category_of(workflow: Mapping[str, Any]) -> str:
    """``domain/variant`` of a catalog category's Workflow; ``workloadrun/<name>`` of a
    WorkloadRun's; ``workflow/<name>`` of a Workflow created alone."""
    labels = _meta(workflow).get("labels") or {}
    domain, variant = labels.get(Label.CATEGORY_DOMAIN), labels.get(Label.CATEGORY_VARIANT)
    if domain and variant:
        return f"{domain}/{variant}"
    run = run_of(workflow)
    if run is not None and run["kind"] == Kind.WORKLOAD_RUN:
        return f"workloadrun/{run['name']}"
    return f"workflow/{_meta(workflow).get('name', '')}"


def run_of(workflow: Mapping[str, Any]) -> dict[str, str] | None:
    """The Certification or WorkloadRun the Workflow belongs to (its controller owner)."""
    meta = _meta(workflow)
    for owner in meta.get("ownerReferences") or ():
        if owner.get("controller") and owner.get("kind") in RUN_KINDS:
            ref = {"kind": owner["kind"], "namespace": meta.get("namespace"), "name": owner.get("name")}
            ref["uid"] = owner.get("uid")
            return {k: str(v) for k, v in ref.items() if v}
    return None


def _floors(job: Mapping[str, Any]) -> dict[str, float]:
    expected = (job.get("spec") or {}).get("expectedPerformance") or {}
    fraction = number(expected.get("floorFraction"))
    if fraction is None:
        return {}
    out = {}
    for figure in expected.get("figures") or ():
        value = number(figure.get("value"))
        if figure.get("key") and value is not None:
            out[str(figure["key"])] = round(fraction * value, 2)
    return out


def _by_job_uid(measurements: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for m in measurements:
        meta = _meta(m)
        uid = (meta.get("labels") or {}).get(Label.JOB_UID) or (meta.get("annotations") or {}).get(
            Annotation.JOB_UID
        )
        if uid:
            out[str(uid)] = m
    return out


def group_domains(job: Mapping[str, Any]) -> list[str]:
    """The topology domains the Job's group spans (its ``group-domains`` annotation)."""
    annotation = (_meta(job).get("annotations") or {}).get(Annotation.GROUP_DOMAINS, "")
    return [d.strip() for d in str(annotation).split(",") if d.strip()]


def job_passed(job: Mapping[str, Any]) -> bool:
    """The Job ended ``Succeeded`` and its verdict did not fail it (no ``ValidationFailed=True``)."""
    end = ended(job)
    return (
        end is not None
        and end[0] == ConditionType.SUCCEEDED
        and not condition_true(job, ConditionType.VALIDATION_FAILED)
    )


def _deciding_jobs(jobs: Iterable[Mapping[str, Any]], failed: set[str]) -> dict[str, Mapping[str, Any]]:
    """Each node's Job that its result shows: its latest ended Job whose outcome agrees with its
    verdict (a failed Job for a failed node, a passed one for the others), else its latest ended
    Job. So a healthy partner lent to an isolation re-test of a bad node keeps its own group's
    values, and a cleared suspect shows the re-test that cleared it."""
    ordered = sorted(
        ((end[1], str(_meta(job).get("name", "")), job) for job in jobs if (end := ended(job)) is not None),
        key=lambda t: (t[0], t[1]),
    )
    latest: dict[str, Mapping[str, Any]] = {}
    agreeing: dict[str, Mapping[str, Any]] = {}
    for _, _, job in ordered:
        passed = job_passed(job)
        for node in group_nodes(job):
            latest[node] = job
            if passed != (node in failed):
                agreeing[node] = job
    return {node: agreeing.get(node, job) for node, job in latest.items()}


def node_results(
    workflow: Mapping[str, Any],
    jobs: Iterable[Mapping[str, Any]],
    bandwidths: Iterable[Mapping[str, Any]],
    goodputs: Iterable[Mapping[str, Any]],
    failed: Iterable[Mapping[str, Any]],
) -> dict[str, Result]:
    """The result of each node the ended Workflow ran (on any of its ended Jobs), by node name;
    empty while the Workflow has not ended. ``failed``: its failed-nodes entries."""
    end = ended(workflow)
    if end is None:
        return {}
    entries: dict[str, failednodes.Entry] = {}
    for raw in failed:
        entry = failednodes.normalise(raw)
        entries.setdefault(entry["name"], entry)  # sorted by name, then reason: the first reason
    bw, gp = _by_job_uid(bandwidths), _by_job_uid(goodputs)
    run = run_of(workflow)
    out: dict[str, Result] = {}
    for node, job in sorted(_deciding_jobs(jobs, set(entries)).items()):
        uid = str(_meta(job).get("uid") or "")
        members = group_nodes(job)
        partners = [n for n in members if n != node]
        result: Result = {"time": end[1], "workflow": _ref(workflow), "job": _ref(job)}
        if run is not None:
            result["run"] = run
        group = (_meta(job).get("labels") or {}).get(Label.GROUP)
        if group:
            result["group"] = str(group)
        result["groupSize"] = len(members)
        domains = group_domains(job)
        if domains:
            result["domains"] = domains
        if partners:
            result["partners"] = partners[:MAX_PARTNERS]
        values = measured_values(bw.get(uid), gp.get(uid))
        if values:
            result["values"] = dict(sorted(values.items()))
        thresholds = (job.get("spec") or {}).get("thresholds") or {}
        if thresholds:
            result["thresholds"] = {str(k): str(v) for k, v in sorted(thresholds.items())}
        floors = _floors(job)
        if floors:
            result["floors"] = floors
        used = (job.get("status") or {}).get("images")
        if used:
            result["images"] = [dict(i) for i in used]
        failure = entries.get(node)
        if failure is None and not job_passed(job):
            # Not named by the failed-nodes record (unreadable, or gone) but no Job of its
            # passed: never recorded as a pass; the group's failure says why.
            failure = failednodes.entry(node, *group_failure(job))
        if failure is None:
            result["verdict"] = PASSED
        else:
            result["verdict"] = FAILED
            result.update(reason=failure["reason"], cause=failure["cause"], message=failure["message"])
        out[node] = result
    return out


def _uids(result: Mapping[str, Any]) -> set[str]:
    return {
        str(uid)
        for uid in ((result.get("workflow") or {}).get("uid"), (result.get("job") or {}).get("uid"))
        if uid
    }


def recorded(status: Mapping[str, Any] | None, category: str, result: Mapping[str, Any]) -> bool:
    """The record already holds a result of that Workflow or that Job in ``category``."""
    wanted = _uids(result)
    for history in (status or {}).get("categories") or ():
        if history.get("name") == category:
            return any(wanted & _uids(r) for r in history.get("results") or ())
    return False


def record_node(record: Mapping[str, Any]) -> str:
    """The Node a record is of: ``spec.nodeName``, else its name (they are the same)."""
    return str((record.get("spec") or {}).get("nodeName") or _meta(record).get("name") or "")


def result_time(result: Mapping[str, Any]) -> datetime:
    """The result's time; :data:`EPOCH` when it cannot be read (it sorts first)."""
    try:
        return parse_time(str(result.get("time") or ""))
    except ValueError:
        return EPOCH


def summary(categories: Iterable[Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    """The summary of the kept results, as of ``now``."""
    results = sorted(
        ((result_time(r), h.get("name", ""), r) for h in categories for r in h.get("results") or ()),
        key=lambda t: (t[0], t[1]),
    )
    out: dict[str, Any] = {}
    if not results:
        return out
    _, category, last = results[-1]
    out["lastVerdict"] = last.get("verdict")
    out["lastResultTime"] = last.get("time")
    out["lastCategory"] = category
    passes = [r for _, _, r in results if r.get("verdict") == PASSED]
    if passes:
        out["lastPassTime"] = passes[-1].get("time")
    bus = [
        r["values"]["busBandwidthGBps"]
        for _, _, r in results
        if "busBandwidthGBps" in (r.get("values") or {})
    ]
    if bus:
        out["lastBusBandwidthGBps"] = bus[-1]
    out.update(_baselines(categories))
    since = now - timedelta(days=FAILURE_WINDOW_DAYS)
    out["failuresLast30Days"] = sum(1 for t, _, r in results if r.get("verdict") == FAILED and t >= since)
    consecutive = 0
    for _, _, r in reversed(results):
        if r.get("verdict") != FAILED:
            break
        consecutive += 1
    out["consecutiveFailures"] = consecutive
    return out


def _baselines(categories: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``baselines``: per category, for the shape of its newest result, each judged key's median
    over up to :data:`Default.BASELINE_RESULTS` latest passing results; ``busBandwidthVsBaseline``:
    the newest bus bandwidth against the baseline of the passing results before it, in percent."""
    found: list[dict[str, Any]] = []
    newest: tuple[datetime, float] | None = None
    for history in categories:
        results = list(history.get("results") or ())
        if not results:
            continue
        last = results[-1]
        shape = baselines.shape_of(last)
        for key in baselines.METRICS:
            base = baselines.recent(baselines.passing_values(results, shape, key), key)
            if base is not None:
                found.append(
                    {
                        "category": history.get("name"),
                        "groupSize": shape[0],
                        "domains": shape[1],
                        "key": key,
                        "value": round(base.value, 2),
                        "results": base.results,
                    }
                )
        change = baselines.against_earlier(results[:-1], last, BUS_BANDWIDTH)
        if change is not None and (newest is None or result_time(last) >= newest[0]):
            newest = (result_time(last), change[0])
    out: dict[str, Any] = {}
    if found:
        out["baselines"] = found
    if newest is not None:
        out["busBandwidthVsBaseline"] = newest[1]
    return out


def fold(
    status: Mapping[str, Any] | None, category: str, results: Iterable[Mapping[str, Any]], now: datetime
) -> dict[str, Any]:
    """``status`` with ``results`` (of ``category``) added: each one already recorded is skipped;
    each category keeps its newest :data:`MAX_RESULTS` (by time, oldest first), the record its
    :data:`MAX_CATEGORIES` most recently active; the summary is computed as of ``now``. Returns
    a copy equal to ``status`` when nothing was added (nor summarised again)."""
    out = copy.deepcopy(dict(status or {}))
    categories = [dict(h) for h in out.get("categories") or ()]
    history = next((h for h in categories if h.get("name") == category), None)
    added = [dict(r) for r in results if not recorded(out, category, r)]
    if not added:
        return out
    if history is None:
        history = {"name": category, "results": []}
        categories.append(history)
    before = list(history.get("results") or ())
    kept = sorted([*before, *added], key=result_time)[-MAX_RESULTS:]
    if kept == before:
        return out  # only results older than every kept one: nothing to write
    history["results"] = kept
    categories.sort(key=lambda h: max(result_time(r) for r in h["results"]), reverse=True)
    categories = sorted(categories[:MAX_CATEGORIES], key=lambda h: str(h["name"]))
    out["categories"] = categories
    out["summary"] = summary(categories, now)
    return out


__all__ = [
    "EPOCH",
    "FAILED",
    "PASSED",
    "category_of",
    "fold",
    "node_results",
    "record_node",
    "recorded",
    "result_time",
    "run_of",
    "summary",
]
