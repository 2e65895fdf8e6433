"""The report of a Certification or WorkloadRun from the objects nvcre wrote (pure).

Inputs are the dicts read from the cluster: the run, its Workflows, their Jobs, measurements and
node-result ConfigMaps. Verdict values come from :mod:`nvcre.measure.thresholds` (the same rules
the Job controller judged with), so the report never disagrees with the verdict it explains.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import (
    Annotation,
    ConditionStatus,
    ConditionType,
    Default,
    FailedNodeReason,
    FailureCause,
    JobReason,
    Label,
    WorkflowOwnerReason,
    WorkflowReason,
)
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import PENDING, condition_of, run_state
from nvcre.measure import thresholds as th
from nvcre.measure import verdicts
from nvcre.measure.early import early_value
from nvcre.orchestration.result_configmaps import failed_entries, succeeded_names
from nvcre.report.history import NodeHistory, node_history, run_uids, target_nodes
from nvcre.report.model import (
    BandwidthRow,
    CategoryReport,
    CategoryState,
    Clique,
    Diagnosis,
    DomainMetrics,
    FailedGroup,
    FailureLog,
    GroupBandwidth,
    GroupMetrics,
    ImageRun,
    Iteration,
    NodeFinding,
    NodeStatus,
    Release,
    Report,
    Result,
    Retest,
    StageResult,
    Stopped,
    TransientFailure,
)
from nvcre.report.trends import node_trends

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class WorkflowObjects:
    """A Workflow and what belongs to it (Jobs by the workflow label, measurements by the job
    label, the node-result ConfigMaps its status refers to)."""

    workflow: Obj
    jobs: Sequence[Obj] = ()
    bandwidths: Sequence[Obj] = ()
    goodputs: Sequence[Obj] = ()
    failed_nodes: Obj | None = None
    succeeded_nodes: Obj | None = None


@dataclass(frozen=True)
class CertificationObjects:
    certification: Obj
    workflows: Sequence[WorkflowObjects] = ()
    now: datetime | None = field(default=None, compare=False)
    """When the objects were read: the end of a running category's runtime, and the time the
    node history is judged at."""
    records: Sequence[Obj] | None = None
    """The NodeRecords of the run's nodes (others are ignored); None when not read."""


@dataclass(frozen=True)
class WorkloadRunObjects:
    workloadrun: Obj
    workflow: WorkflowObjects | None = None
    now: datetime | None = field(default=None, compare=False)
    records: Sequence[Obj] | None = None


# --- small readers --------------------------------------------------------------------------


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _status(obj: Obj | None) -> Mapping[str, Any]:
    status: Mapping[str, Any] = (obj or {}).get("status") or {}
    return status


def _labels(obj: Obj) -> Mapping[str, str]:
    labels: Mapping[str, str] = _meta(obj).get("labels") or {}
    return labels


def _orchestration(workflow: Obj) -> Mapping[str, Any]:
    orchestration: Mapping[str, Any] = _status(workflow).get("orchestration") or {}
    return orchestration


def _time(text: Any) -> datetime | None:
    try:
        return parse_time(str(text)) if text else None
    except ValueError:
        return None


def format_runtime(seconds: float) -> str:
    """``<m>m <s>s`` (cli.md 4.5)."""
    total = max(int(seconds), 0)
    return f"{total // 60}m {total % 60}s"


def _span(start: datetime | None, end: datetime | None) -> str:
    return format_runtime((end - start).total_seconds()) if start and end else ""


def workflow_state(obj: Obj | None) -> CategoryState:
    """The run state of a run or Workflow (:func:`nvcre.conditions.run_state`) as the report
    shows it (:func:`normalise_phase`); one with conditions but no True execution condition yet
    is already running."""
    state = run_state(obj)[0]
    if state == PENDING and _status(obj).get("conditions"):
        state = ConditionType.IN_PROGRESS
    return normalise_phase(state)


def normalise_phase(phase: str | None) -> CategoryState:
    """A run state as the report shows it (cli.md 4.5): ``InProgress`` is ``Running``."""
    if phase in ("Succeeded", "Failed", "Pending"):
        return phase  # type: ignore[return-value]
    return "Running" if phase else "Pending"


def _current_reason(obj: Obj, state: CategoryState) -> str:
    kinds = {
        "Failed": ConditionType.FAILED,
        "Succeeded": ConditionType.SUCCEEDED,
        "Running": ConditionType.IN_PROGRESS,
        "Pending": ConditionType.IN_PROGRESS,
    }
    condition = condition_of(obj, kinds[state]) or {}
    if state == "Succeeded":
        return ""
    message = str(condition.get("message") or "")
    return message or str(condition.get("reason") or "")


_WAITING: Final = (JobReason.WORKLOAD_SCHEDULING_BLOCKED, JobReason.WORKLOAD_PENDING)


def _blocked(groups: Sequence[_Group]) -> str:
    """Why a running group's workload does not run (``WorkloadSchedulingBlocked: ...``), if so."""
    for group in groups:
        condition = condition_of(group.job or {}, ConditionType.IN_PROGRESS) or {}
        if condition.get("status") == ConditionStatus.TRUE and condition.get("reason") in _WAITING:
            return f"{condition['reason']} ({group.name}): {condition.get('message') or ''}".rstrip(": ")
    return ""


# --- measured values against thresholds -----------------------------------------------------

_SHORT: Final = {
    th.BUS_BANDWIDTH: ("busbw", "{:.1f} GB/s"),
    th.ALG_BANDWIDTH: ("algbw", "{:.1f} GB/s"),
    th.GOODPUT_RATIO: ("goodput", "{:.4f}"),
    th.AVG_TFLOPS_PER_GPU: ("TFLOPs/GPU", "{:.1f}"),
    th.AVG_STEP_TIME: ("step time", "{:.2f}s"),
}
_NEGATED: Final = {">=": "<", ">": "<=", "<=": ">", "<": ">=", "==": "!=", "!=": "=="}
_SIMPLE: Final = re.compile(r"^\s*value\s*(>=|<=|==|!=|>|<)\s*([-+0-9.eE]+)\s*$")


def _against(expression: str) -> str:
    """``value >= 400`` violated reads ``< 400``; any other expression is quoted."""
    match = _SIMPLE.match(expression)
    if match:
        return f"{_NEGATED[match.group(1)]} {match.group(2)}"
    return f'violates "{expression}"'


def violations(job: Obj, bandwidth: Obj | None, goodput: Obj | None) -> list[str]:
    """Each threshold the Job's final measurements (or its early verdict) violate, as ``busbw
    182.4 GB/s < 400``.

    Judged by :func:`nvcre.measure.thresholds.evaluate`, one key at a time; then each expected
    floor missed (``busbw 191.4 GB/s < floor 389.7 GB/s (expected 487.1 GB/s, AWS p5 EFA)``).
    """
    limits = {str(k): str(v) for k, v in ((job.get("spec") or {}).get("thresholds") or {}).items()}
    values = th.measured_values(bandwidth, goodput)
    stopped = early_value(job, bandwidth) if th.BUS_BANDWIDTH not in values else None
    if stopped is not None:  # an early verdict stopped it before its final measurement
        values[th.BUS_BANDWIDTH] = stopped
    out = []
    for key in sorted(limits):
        if key not in values or key not in _SHORT:
            continue
        if th.evaluate({key: limits[key]}, {key: values[key]}).failed:
            label, fmt = _SHORT[key]
            out.append(f"{label} {fmt.format(values[key])} {_against(limits[key])}")
    for floor in verdicts.floors(job):
        if floor.key in values and floor.key in _SHORT and verdicts.floor_violation(floor, values[floor.key]):
            label, fmt = _SHORT[floor.key]
            bound = "> ceiling" if floor.key in verdicts.LOWER_IS_BETTER else "< floor"
            limit = floor.value / floor.fraction if floor.key in verdicts.LOWER_IS_BETTER else floor.floor
            out.append(
                f"{label} {fmt.format(values[floor.key])} {bound} {fmt.format(limit)} "
                f"(expected {fmt.format(floor.value)}, {floor.source})"
            )
    return out


# --- per-Workflow pieces --------------------------------------------------------------------


@dataclass(frozen=True)
class _Group:
    name: str
    phase: str
    nodes: tuple[str, ...]
    domains: tuple[str, ...]
    job: Obj | None
    bandwidth: Obj | None
    goodput: Obj | None


def _by_job(measurements: Iterable[Obj]) -> dict[str, Obj]:
    return {str(_labels(m).get(Label.JOB, "")): m for m in measurements}


def _groups(objects: WorkflowObjects) -> list[_Group]:
    """The groups of the current iteration, each with its Job and measurements."""
    jobs = {_name(j): j for j in objects.jobs}
    jobs_by_group = {str(_labels(j).get(Label.GROUP, "")): j for j in objects.jobs}
    bandwidths = _by_job(objects.bandwidths)
    goodputs = _by_job(objects.goodputs)
    out = []
    for group in _orchestration(objects.workflow).get("groups") or ():
        ref = (group.get("jobRef") or {}).get("name")
        job = jobs.get(str(ref)) if ref else jobs_by_group.get(str(group.get("name")))
        name = _name(job) if job else ""
        out.append(
            _Group(
                name=str(group.get("name")),
                phase=str(group.get("phase") or "Pending"),
                nodes=tuple(group.get("nodes") or ()),
                domains=tuple(group.get("domains") or ()),
                job=job,
                bandwidth=bandwidths.get(name) if job else None,
                goodput=goodputs.get(name) if job else None,
            )
        )
    return out


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def _job_reason(job: Obj | None) -> str:
    """Why a group's Job failed: its validation verdict, else its Failed condition."""
    if job is None:
        return ""
    for kind in (ConditionType.VALIDATION_FAILED, ConditionType.HARDWARE_FAILED, ConditionType.FAILED):
        condition = condition_of(job, kind)
        if condition and condition.get("status") == ConditionStatus.TRUE:
            return str(condition.get("message") or condition.get("reason") or "")
    return ""


def _failure_log(job: Obj | None) -> FailureLog | None:
    record = _status(job).get("failureLog")
    if not record or not record.get("podName"):
        return None
    return FailureLog(
        pod=str(record.get("podName") or ""),
        node=str(record.get("nodeName") or ""),
        exit_code=int(record.get("exitCode") or 0),
        reason=str(record.get("reason") or ""),
        tail=str(record.get("tail") or ""),
    )


_MEASURED_CAUSES: Final = (FailureCause.BANDWIDTH_OUTLIER, FailureCause.STEP_TIME_OUTLIER)
"""Failed-node causes whose message names the measured value (against the peers' median)."""


def _findings(objects: WorkflowObjects, groups: Sequence[_Group]) -> list[NodeFinding]:
    """Every failed node once per reason, from the failed-nodes ConfigMap (the record) and the
    Jobs' ``failedNodes``; a threshold violation names the measured value against its limit. A
    diagnosis blames only the nodes it confirmed (the record): its rounds' Jobs name whole
    groups, suspects included."""
    entries: dict[tuple[str, str], failednodes.Entry] = {}
    for entry in failed_entries(objects.failed_nodes):
        entries.setdefault((entry["name"], entry["reason"]), entry)
    orchestration = _orchestration(objects.workflow)
    isolation = orchestration.get("isolation") or {}
    # a diagnosis or an isolation round blames only the nodes it confirmed (the record)
    for group in () if orchestration.get("diagnose") or isolation else groups:
        for raw in _status(group.job).get("failedNodes") or ():
            entry = failednodes.normalise(raw)
            entries.setdefault((entry["name"], entry["reason"]), entry)
    jobs = {_name(j): j for j in objects.jobs}
    bandwidths, goodputs = _by_job(objects.bandwidths), _by_job(objects.goodputs)
    retests = {
        str(r["suspect"]): jobs[r["jobName"]]
        for r in isolation.get("retests") or ()
        if not r.get("passed") and r.get("jobName") in jobs
    }
    group_of: dict[str, _Group] = {}
    for group in groups:
        for node in group.nodes:
            if node not in group_of or group.phase == "Failed":
                group_of[node] = group
    out = []
    for (node, reason), entry in sorted(entries.items()):
        home = group_of.get(node)
        detail, cause, message = "", entry["cause"], entry["message"]
        retest = retests.get(node)
        if cause in _MEASURED_CAUSES:
            detail = message
        elif reason == FailedNodeReason.THRESHOLD_VIOLATION and retest is not None:
            # its own re-test's value (the partners are in the message: the line has no room)
            detail = "; ".join(violations(retest, bandwidths.get(_name(retest)), goodputs.get(_name(retest))))
        elif reason == FailedNodeReason.THRESHOLD_VIOLATION and home and home.job:
            detail = "; ".join(violations(home.job, home.bandwidth, home.goodput))
        out.append(
            NodeFinding(
                node=node,
                reason=reason,
                group=home.name if home else "",
                detail=detail,
                message=message,
                cause=cause,
            )
        )
    return out


def _failed_groups(groups: Sequence[_Group], findings: Sequence[NodeFinding]) -> list[FailedGroup]:
    by_group: dict[str, list[NodeFinding]] = {}
    for finding in findings:
        by_group.setdefault(finding.group, []).append(finding)
    return [
        FailedGroup(
            name=g.name,
            nodes=g.nodes,
            reason=_job_reason(g.job),
            failure_log=_failure_log(g.job),
            findings=tuple(by_group.get(g.name, ())),
        )
        for g in groups
        if g.phase == "Failed"
    ]


def _iterations(workflow: Obj, state: CategoryState) -> list[Iteration]:
    """One line per iteration when the Workflow runs more than one (or has a history)."""
    orchestration = _orchestration(workflow)
    history = list(orchestration.get("iterationHistory") or ())
    planned = int(((workflow.get("spec") or {}).get("orchestration") or {}).get("iterations") or 1)
    if planned <= 1 and not history:
        return []
    out = []
    current = int(orchestration.get("currentIteration") or len(history) + 1)
    records = [(int(r.get("iteration") or i + 1), list(r.get("groups") or ())) for i, r in enumerate(history)]
    if not any(number == current for number, _ in records):
        records.append((current, list(orchestration.get("groups") or ())))
    last = records[-1][0] if records else current
    for number, record_groups in records:
        phases = {str(g.get("phase")) for g in record_groups}
        starts = [t for t in (_time(g.get("startTime")) for g in record_groups) if t]
        ends = [t for t in (_time(g.get("completionTime")) for g in record_groups) if t]
        runtime = _span(min(starts) if starts else None, max(ends) if ends else None)
        if "Failed" in phases:
            final = number == last and state == "Failed"
            out.append(Iteration(number, "Failed" if final else "Restarted", runtime))
        elif phases and phases <= {"Succeeded"}:
            out.append(Iteration(number, "Succeeded", runtime))
        else:
            out.append(Iteration(number, "Running", runtime))
    return out


def _runtime(workflow: Obj, state: CategoryState, now: datetime | None) -> str:
    """From the Workflow's creation to its terminal condition (or ``now`` while it runs)."""
    start = _time(_meta(workflow).get("creationTimestamp"))
    end = None
    if state in ("Succeeded", "Failed"):
        end = _time((condition_of(workflow, state) or {}).get("lastTransitionTime"))
    elif state == "Running":
        end = now
    return _span(start, end)


def _bandwidth_text(measurement: Obj | None) -> tuple[str, float | None]:
    results = _status(measurement).get("results") or ()
    numbers = [n for n in (_float(r.get("busBW")) for r in results) if n is not None]
    if not numbers:
        return "", None
    best = max(numbers)
    return f"{best:.2f} GB/s", best


def _float(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value else None


def _transport(measurement: Obj | None) -> tuple[str, ...]:
    return tuple(sorted({str(t) for t in _status(measurement).get("transport") or ()}))


def _low(job: Obj | None, value: float | None) -> bool:
    """Below the Job's ``busBandwidthGBps`` threshold (judged by the threshold rule)."""
    expression = ((job or {}).get("spec") or {}).get("thresholds", {}).get(th.BUS_BANDWIDTH)
    if value is None or not expression:
        return False
    return th.evaluate({th.BUS_BANDWIDTH: str(expression)}, {th.BUS_BANDWIDTH: value}).failed


def _bandwidth_limit(job: Obj | None) -> tuple[float | None, str]:
    """The bound a group's bus bandwidth is judged against: its threshold's (``value >= 400``),
    else the expected floor."""
    expression = str(((job or {}).get("spec") or {}).get("thresholds", {}).get(th.BUS_BANDWIDTH) or "")
    match = _SIMPLE.match(expression)
    if match and match.group(1) in (">=", ">"):
        return float(match.group(2)), f"threshold {match.group(1)} {match.group(2)}"
    for floor in verdicts.floors(job or {}):
        if floor.key == th.BUS_BANDWIDTH:
            return floor.floor, f"floor {floor.floor:.1f} GB/s"
    return None, ""


def _sizes(measurement: Obj | None) -> tuple[BandwidthRow, ...]:
    return tuple(
        BandwidthRow(
            int(r["sizeBytes"]),
            str(r.get("algBW") or ""),
            str(r.get("busBW") or ""),
            int(r.get("samples") or 0),
        )
        for r in _status(measurement).get("results") or ()
        if r.get("sizeBytes") is not None
    )


def _bandwidth_groups(groups: Sequence[_Group], findings: Sequence[NodeFinding]) -> list[GroupBandwidth]:
    if not any(
        g.bandwidth is not None or ((g.job or {}).get("spec") or {}).get("bandwidthMeasurement")
        for g in groups
    ):
        return []
    failed = {f.node for f in findings}
    out = []
    for g in groups:
        text, value = _bandwidth_text(g.bandwidth)
        limit_gbps, limit = _bandwidth_limit(g.job)
        out.append(
            GroupBandwidth(
                group=g.name,
                passed=g.phase != "Failed",
                bus_bandwidth=text,
                low=_low(g.job, value),
                provisional=bool(text) and not th.bandwidth_final(g.bandwidth),
                transport=_transport(g.bandwidth),
                failed_nodes=tuple(n for n in g.nodes if n in failed),
                finished=g.phase in ("Succeeded", "Failed"),
                nodes=g.nodes,
                domain=g.domains[0] if g.domains else "",
                value_gbps=value,
                limit_gbps=limit_gbps,
                limit=limit,
                sizes=_sizes(g.bandwidth),
            )
        )
    return out


def _aggregate(bandwidths: Sequence[Obj]) -> tuple[list[BandwidthRow], bool]:
    """Per message size over every measurement: the mean of their values, samples summed.

    One measurement keeps its own strings. Provisional when any measurement is not final.
    """
    with_results = [m for m in bandwidths if _status(m).get("results")]
    if not with_results:
        return [], False
    provisional = any(not th.bandwidth_final(m) for m in with_results)
    if len(with_results) == 1:
        rows = [
            BandwidthRow(int(r["sizeBytes"]), str(r["algBW"]), str(r["busBW"]), int(r.get("samples") or 0))
            for r in _status(with_results[0])["results"]
        ]
        return rows, provisional
    sizes: dict[int, list[Mapping[str, Any]]] = {}
    for m in with_results:
        for r in _status(m)["results"]:
            sizes.setdefault(int(r["sizeBytes"]), []).append(r)
    rows = []
    for size, results in sizes.items():
        alg = [v for v in (_float(r.get("algBW")) for r in results) if v is not None]
        bus = [v for v in (_float(r.get("busBW")) for r in results) if v is not None]
        rows.append(
            BandwidthRow(
                size,
                f"{statistics.fmean(alg):.2f}" if alg else "",
                f"{statistics.fmean(bus):.2f}" if bus else "",
                sum(int(r.get("samples") or 0) for r in results),
            )
        )
    return rows, provisional


def _cliques(workflow: Obj, groups: Sequence[_Group]) -> list[Clique]:
    """Per NVLink clique (the Workflow's topology key is ``nvidia.com/gpu.clique``)."""
    spec = (workflow.get("spec") or {}).get("orchestration") or {}
    if ((spec.get("topology") or {}).get("topologyKey")) != Default.TOPOLOGY_KEY:
        return []
    members: dict[str, list[_Group]] = {}
    for g in groups:
        for domain in g.domains:
            members.setdefault(domain, []).append(g)
    out = []
    for domain in sorted(members):
        in_domain = members[domain]
        nodes = {n for g in in_domain for n in g.nodes}
        validated = {n for g in in_domain if g.phase == "Succeeded" for n in g.nodes}
        values = [v for v in (_bandwidth_text(g.bandwidth)[1] for g in in_domain) if v is not None]
        out.append(
            Clique(
                name=domain,
                validated=len(validated),
                total=len(nodes),
                passed=bool(nodes) and validated == nodes,
                bus_bandwidth=f"{max(values):.2f} GB/s" if values else "",
                transport=tuple(sorted({t for g in in_domain for t in _transport(g.bandwidth)})),
            )
        )
    return out


def _metrics(groups: Sequence[_Group]) -> list[DomainMetrics]:
    """Training metrics averaged per topology domain, flat (one unnamed entry) without domains."""
    measured = [g for g in groups if g.goodput is not None]
    if not measured:
        return []
    by_domain: dict[str, list[_Group]] = {}
    for g in measured:
        by_domain.setdefault(g.domains[0] if g.domains else "", []).append(g)
    if list(by_domain) == [""] or len(by_domain) == 0:
        by_domain = {"": measured}
    out = []
    for domain in sorted(by_domain):
        members = by_domain[domain]

        def mean(field_name: str, members: list[_Group] = members) -> float | None:
            values = [v for v in (_float(_status(g.goodput).get(field_name)) for g in members) if v]
            return statistics.fmean(values) if values else None

        def total(field_name: str, members: list[_Group] = members) -> float | None:
            values = [
                v for v in (_float(_status(g.goodput).get(field_name)) for g in members) if v is not None
            ]
            return sum(values) if values else None

        interruptions = total("interruptionCount")

        out.append(
            DomainMetrics(
                name=domain,
                node_count=len({n for g in members for n in g.nodes}),
                goodput=mean("result"),
                tflops_per_gpu=mean("avgTFLOPSPerGPU"),
                step_time_sec=mean("avgStepTimeSec"),
                provisional=any(not th.measurement_complete(g.goodput) for g in members),
                interruptions=None if interruptions is None else int(interruptions),
                lost_work_sec=total("lostWorkTimeSec"),
            )
        )
    return out


def _group_metrics(groups: Sequence[_Group]) -> list[GroupMetrics]:
    """Each training group's own goodput, step time and TFLOPs/GPU."""
    return [
        GroupMetrics(
            group=g.name,
            nodes=g.nodes,
            domain=g.domains[0] if g.domains else "",
            passed=g.phase != "Failed",
            goodput=_float(_status(g.goodput).get("result")),
            step_time_sec=_float(_status(g.goodput).get("avgStepTimeSec")),
            tflops_per_gpu=_float(_status(g.goodput).get("avgTFLOPSPerGPU")),
            provisional=not th.measurement_complete(g.goodput),
        )
        for g in groups
        if g.goodput is not None
    ]


def _retests(objects: WorkflowObjects) -> list[Retest]:
    """The last isolation round's re-tests, each with its Job's bus bandwidth."""
    isolation = _orchestration(objects.workflow).get("isolation") or {}
    bandwidths = _by_job(objects.bandwidths)
    jobs = {_name(j): j for j in objects.jobs}
    out = []
    for r in isolation.get("retests") or ():
        measurement = bandwidths.get(str(r.get("jobName") or ""))
        text, value = _bandwidth_text(measurement)
        limit_gbps, limit = _bandwidth_limit(jobs.get(str(r.get("jobName") or "")))
        out.append(
            Retest(
                suspect=str(r.get("suspect") or ""),
                partners=tuple(str(p) for p in r.get("partners") or ()),
                passed=bool(r.get("passed")),
                bus_bandwidth=text,
                value_gbps=value,
                sizes=_sizes(measurement),
                limit_gbps=limit_gbps,
                limit=limit,
            )
        )
    return out


def _diagnosis(objects: WorkflowObjects, groups: Sequence[_Group]) -> Diagnosis | None:
    diagnose = _orchestration(objects.workflow).get("diagnose")
    if not diagnose:
        return None
    domain_of: dict[str, str] = {
        str(node): str(domain)
        for domain, result in (diagnose.get("screeningResults") or {}).items()
        for node in result.get("nodes") or ()
    }
    for group in _orchestration(objects.workflow).get("groups") or ():
        for node in group.get("nodes") or ():
            if group.get("domains"):
                domain_of.setdefault(str(node), str(group["domains"][0]))
    for name, result in (_status(objects.workflow).get("nodeResults") or {}).items():
        if result.get("domain"):
            domain_of.setdefault(str(name), str(result["domain"]))
    faulty: dict[str, set[str]] = {}
    confirmed = diagnose.get("faultyNodes")
    names = confirmed if confirmed is not None else [e["name"] for e in failed_entries(objects.failed_nodes)]
    for name in names:
        faulty.setdefault(domain_of.get(name, "unknown"), set()).add(name)
    infra = [_infrastructure_fault(f) for f in diagnose.get("infrastructureFaults") or ()]
    stopped = condition_of(objects.workflow, ConditionType.FAILED) or {}
    measured = [(v, g) for g in groups if (v := _bandwidth_text(g.bandwidth)[1]) is not None]
    top = max(measured, key=lambda item: item[0], default=None)
    bottom = min(measured, key=lambda item: item[0], default=None)

    def bw(item: tuple[float, _Group] | None) -> str:
        return f"{item[0]:.2f} GB/s ({', '.join(item[1].nodes)})" if item else ""

    stages = []
    for stage, key in (
        ("intra-screening", "screeningResults"),
        ("intra-screening-no-nvl", "noNVLScreeningResults"),
    ):
        results = diagnose.get(key) or {}
        if results:
            stages.append(
                StageResult(
                    stage=stage,
                    passed=tuple(sorted(d for d, r in results.items() if r.get("passed"))),
                    failed=tuple(sorted(d for d, r in results.items() if not r.get("passed"))),
                )
            )
    return Diagnosis(
        stage=str(diagnose.get("stage") or ""),
        rounds=int(diagnose.get("round") or 0),
        healthy=tuple(sorted(diagnose.get("healthyNodes") or ())),
        suspect=tuple(sorted(diagnose.get("suspectNodes") or ())),
        faulty_by_domain=tuple((d, tuple(sorted(n))) for d, n in sorted(faulty.items())),
        infra=tuple(infra),
        max_bw=bw(top),
        min_bw=bw(bottom),
        test_results=tuple(stages),
        outcome=str(diagnose.get("outcome") or ""),
        transient=tuple(
            TransientFailure(
                int(t.get("round") or 0),
                str(t.get("group")),
                tuple(t.get("nodes") or ()),
                str(t.get("stage") or ""),
            )
            for t in diagnose.get("transientFailures") or ()
        ),
        limit=str(stopped.get("message") or "")
        if stopped.get("status") == "True" and stopped.get("reason") == WorkflowReason.DIAGNOSE_LIMIT_REACHED
        else "",
    )


def _infrastructure_fault(fault: Mapping[str, Any]) -> str:
    """A bad link between two domains names both; one inside a domain, the halves."""
    sides = f"[{', '.join(fault.get('groupA') or ())}] vs [{', '.join(fault.get('groupB') or ())}]"
    domains = [str(d) for d in fault.get("domains") or ()]
    where = f"link {' <-> '.join(domains)}" if len(domains) == 2 else str(fault.get("domain"))
    return f"{where}: {sides} ({fault.get('stage')})"


def _placement(workflow: Obj) -> str:
    orchestration = _orchestration(workflow)
    mode = orchestration.get("placement") or ((workflow.get("spec") or {}).get("orchestration") or {}).get(
        "placement"
    )
    if mode != "Unpinned":
        return ""
    exercised = {n for g in orchestration.get("groups") or () for n in g.get("nodes") or ()}
    return f"{mode} ({len(exercised)} of {int(orchestration.get('totalNodes') or 0)} target nodes exercised)"


def _mnnvl(workflow: Obj) -> str:
    for dependency in (workflow.get("spec") or {}).get("dependencies") or ():
        if dependency.get("kind") == "ComputeDomain":
            return "enabled (ComputeDomain " + str(_meta(dependency).get("name") or "") + ")"
    return ""


def _provenance(recorded: Mapping[str, Any] | None) -> dict[str, Any]:
    """The card's ``spec_digest`` and ``images`` from a ``status.provenance``."""
    provenance = recorded or {}
    return {
        "spec_digest": str(provenance.get("specDigest") or ""),
        "images": tuple(
            ImageRun(
                image=str(i.get("image") or ""),
                image_ids=tuple(str(d) for d in i.get("imageIDs") or ()),
                mismatch=str(i.get("mismatch") or ""),
            )
            for i in provenance.get("images") or ()
        ),
    }


def category_report(
    domain: str,
    variant: str,
    status: CategoryState,
    objects: WorkflowObjects | None,
    *,
    scale: str = "",
    now: datetime | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> tuple[CategoryReport, list[NodeFinding]]:
    """One category card and the failed nodes it found. ``provenance``: the run's record of it
    (the Certification's category status, the WorkloadRun's status), else the Workflow's."""
    if objects is None:
        card = CategoryReport(
            domain=domain, variant=variant, status=status, scale=scale, **_provenance(provenance)
        )
        return card, []
    workflow = objects.workflow
    orchestration = _orchestration(workflow)
    groups = _groups(objects)
    findings = _findings(objects, groups)
    iterations = _iterations(workflow, status)
    runtime = _runtime(workflow, status, now)
    if runtime and iterations:
        runtime += f" (across {len(iterations)} iterations)"
    rows, provisional = _aggregate(objects.bandwidths)
    card = CategoryReport(
        domain=domain,
        variant=variant,
        status=status,
        reason=_blocked(groups)
        if status == "Running" and _blocked(groups)
        else _current_reason(workflow, status),
        runtime=runtime,
        iterations=tuple(iterations),
        scale=scale,
        nodes_per_job=int(orchestration["nodesPerJob"]) if orchestration.get("nodesPerJob") else None,
        jobs=len(objects.jobs)
        or (int(orchestration["totalGroups"]) if orchestration.get("totalGroups") else None),
        placement=_placement(workflow),
        mnnvl=_mnnvl(workflow),
        failed_groups=tuple(_failed_groups(groups, findings)),
        cliques=tuple(_cliques(workflow, groups)),
        diagnosis=_diagnosis(objects, groups),
        metrics=tuple(_metrics(groups)),
        bandwidth_groups=tuple(_bandwidth_groups(groups, findings)),
        transport=tuple(sorted({t for m in objects.bandwidths for t in _transport(m)})),
        bandwidth=tuple(rows),
        bandwidth_provisional=provisional,
        excluded_nodes=tuple(orchestration.get("excludedNodes") or ()),
        nodes=_node_statuses(objects, findings),
        group_metrics=tuple(_group_metrics(groups)),
        retests=tuple(_retests(objects)),
        **_provenance(provenance or _status(workflow).get("provenance")),
    )
    return card, findings


def _result(state: CategoryState, excluded: Sequence[str]) -> Result:
    if state == "Failed":
        return "FAILED"
    if state == "Succeeded":
        return "INCOMPLETE" if excluded else "PASSED"
    return "RUNNING"


def _unique(findings: Iterable[NodeFinding]) -> tuple[NodeFinding, ...]:
    seen: dict[str, NodeFinding] = {}
    for finding in findings:
        seen.setdefault(finding.node, finding)
    return tuple(seen[name] for name in sorted(seen))


def _header(workflows: Sequence[WorkflowObjects]) -> tuple[str, str, int, tuple[str, ...], str]:
    platform = gpu = reason = ""
    total = 0
    excluded: list[str] = []
    for objects in workflows:
        orchestration = _orchestration(objects.workflow)
        platform = platform or str(orchestration.get("detectedPlatform") or "")
        gpu = gpu or str(orchestration.get("detectedGPUArchitecture") or "")
        total = max(total, int(orchestration.get("totalNodes") or 0))
        for node in orchestration.get("excludedNodes") or ():
            if node not in excluded:
                excluded.append(str(node))
        reason = reason or str(orchestration.get("exclusionReason") or "")
    return platform, gpu, total, tuple(sorted(excluded)), reason


def _scale(workflow: Obj | None, category: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    annotation = str(
        ((_meta(workflow).get("annotations") or {}) if workflow else {}).get(
            Annotation.REQUESTED_TEST_SCALE, ""
        )
    )
    options = category.get("options") or {}
    return annotation or str(options.get("testScale") or spec.get("testScale") or Default.TEST_SCALE)


def _history(
    records: Sequence[Obj] | None,
    run: Obj,
    workflows: Sequence[WorkflowObjects],
    failed: Iterable[NodeFinding],
    now: datetime | None,
) -> NodeHistory | None:
    """What the records say of the run's nodes (:mod:`nvcre.report.history`): a node in a
    Workflow's succeeded-nodes record passed in this run."""
    if records is None:
        return None
    return node_history(
        records,
        uids=run_uids(run, (w.workflow for w in workflows)),
        failed=(f.node for f in failed),
        target=target_nodes(w.workflow for w in workflows),
        passed={n for w in workflows if w.succeeded_nodes for n in succeeded_names(w.succeeded_nodes)},
        now=now,
    )


def certification_report(objects: CertificationObjects) -> Report:
    """The report of a Certification: one card per category, in spec order."""
    cert = objects.certification
    meta = _meta(cert)
    spec: Mapping[str, Any] = cert.get("spec") or {}
    statuses = {
        (str(s.get("domain")), str(s.get("variant"))): s for s in _status(cert).get("categoryStatuses") or ()
    }
    by_name = {str(_meta(w.workflow).get("name")): w for w in objects.workflows}
    by_category = {
        (
            str(_labels(w.workflow).get(Label.CATEGORY_DOMAIN)),
            str(_labels(w.workflow).get(Label.CATEGORY_VARIANT)),
        ): w
        for w in objects.workflows
    }
    cards: list[CategoryReport] = []
    findings: list[NodeFinding] = []
    for category in spec.get("categories") or ():
        key = (str(category.get("domain")), str(category.get("variant")))
        status = statuses.get(key) or {}
        ref = (status.get("workflowRef") or {}).get("name")
        workflow = by_name.get(str(ref)) if ref else by_category.get(key)
        card, found = category_report(
            key[0],
            key[1],
            normalise_phase(status.get("status")),
            workflow,
            scale=_scale(workflow.workflow if workflow else None, category, spec),
            now=objects.now,
            provenance=status.get("provenance"),
        )
        cards.append(card)
        findings.extend(found)
    platform, gpu, total, excluded, reason = _header(objects.workflows)
    state = workflow_state(cert)
    failed = _unique(findings)
    return Report(
        kind="Certification",
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        result=_result(state, excluded),
        platform=platform,
        gpu=gpu,
        total_nodes=total,
        excluded_nodes=excluded,
        exclusion_reason=reason,
        categories=tuple(cards),
        failed_nodes=failed,
        state=state,
        history=_history(objects.records, cert, objects.workflows, failed, objects.now),
        trends=node_trends(
            objects.records, (f.node for f in failed), run_uids(cert, (w.workflow for w in objects.workflows))
        ),
        release=_release(cert),
        stopped=_stopped(cert),
    )


def _node_statuses(objects: WorkflowObjects, findings: Sequence[NodeFinding]) -> tuple[NodeStatus, ...]:
    """Passed: in the succeeded-nodes record once the Workflow wrote it (else in a succeeded
    group); a node of the failed-nodes record is Failed even in a passed group."""
    failed = {f.node for f in findings}
    recorded = set(succeeded_names(objects.succeeded_nodes)) if objects.succeeded_nodes else None
    out: dict[str, NodeStatus] = {}
    for group in _orchestration(objects.workflow).get("groups") or ():
        rack = str((group.get("domains") or [""])[0])
        for node in group.get("nodes") or ():
            ok = node in recorded if recorded is not None else group.get("phase") == "Succeeded"
            passed = ok and node not in failed
            if node not in out or not passed:
                out[str(node)] = NodeStatus(
                    str(node), str(group.get("name")), rack, "Passed" if passed else "Failed"
                )
    return tuple(out[n] for n in sorted(out))


def _release(run: Mapping[str, Any]) -> Release | None:
    condition = condition_of(run, ConditionType.RESOURCES_RELEASED)
    if condition is None:
        return None
    return Release(
        condition.get("status") == ConditionStatus.TRUE,
        str(condition.get("reason") or ""),
        str(condition.get("message") or ""),
    )


RUN_STOPS: Final = (WorkflowOwnerReason.TOO_MANY_NODES, WorkflowOwnerReason.DEADLINE_EXCEEDED)
"""The Failed reasons of a run stopped as a whole (docs/controllers.md#run-limits)."""


def _stopped(run: Mapping[str, Any]) -> Stopped | None:
    condition = condition_of(run, ConditionType.FAILED) or {}
    if condition.get("status") != ConditionStatus.TRUE or condition.get("reason") not in RUN_STOPS:
        return None
    return Stopped(str(condition["reason"]), str(condition.get("message") or ""))


def workloadrun_report(objects: WorkloadRunObjects) -> Report:
    """The report of a WorkloadRun: one category ``workloadrun/<name>`` from its Workflow."""
    run = objects.workloadrun
    meta = _meta(run)
    name = str(meta.get("name") or "")
    state = workflow_state(run)
    spec: Mapping[str, Any] = run.get("spec") or {}
    scale = str((spec.get("orchestration") or {}).get("testScale") or Default.TEST_SCALE)
    category = workflow_state(objects.workflow.workflow) if objects.workflow else state
    status = _status(run)
    card, findings = category_report(
        "workloadrun",
        name,
        category,
        objects.workflow,
        scale=scale,
        now=objects.now,
        provenance=status.get("provenance"),
    )
    workflows = [objects.workflow] if objects.workflow else []
    _, _, total, excluded, reason = _header(workflows)
    return Report(
        kind="WorkloadRun",
        name=name,
        namespace=str(meta.get("namespace") or ""),
        result=_result(state, excluded),
        platform=str(status.get("detectedPlatform") or ""),
        gpu=str(status.get("detectedGPUArchitecture") or ""),
        total_nodes=total,
        excluded_nodes=excluded,
        exclusion_reason=reason,
        categories=(card,),
        failed_nodes=_unique(findings),
        nodes=_node_statuses(objects.workflow, findings) if objects.workflow else (),
        state=state,
        history=_history(objects.records, run, workflows, findings, objects.now),
        trends=node_trends(
            objects.records, (f.node for f in findings), run_uids(run, (w.workflow for w in workflows))
        ),
        release=_release(run),
        stopped=_stopped(run),
    )
