"""A succeeded Job's verdict (its ``ValidationFailed`` condition) from its final measurements.

The one judge: the Job controller and ``nvcrectl analyze`` both call :func:`judge`. Order:

1. unknown threshold keys (a configuration error, decided at once);
2. as soon as the bandwidth measurement is final, corrupted results (``DataCorruption``: nccl-tests'
   ``#wrong`` or a failed ``Out of bounds`` footer) and NCCL/CUDA failures the launcher printed
   (``FailuresLogged``), whatever the thresholds say;
3. waiting, up to ``measurementTimeout`` after the Job succeeded, for every measurement the Job
   asked for to be terminal and every threshold key to have a value (``MeasurementTimeout``);
4. no data is not a pass: a measurement that ended without final data (its log unreadable, no row
   recognised, a table cut short) fails ``MeasurementUnavailable``, saying which and quoting the
   log's last lines, unless the measurement's ``allowMissingData`` makes it informational;
5. an unexpected network transport (``UnexpectedTransport``) and a bandwidth log that shows fewer
   hosts (or ranks) than the group has nodes (``MeasurementUnavailable``);
6. the thresholds (spec 4.3), then the expected-performance floors of the keys no threshold
   names (``ThresholdViolated``, cause ``BelowExpected``);
7. else a pass: ``ThresholdsMet``, or ``MeasurementsChecked`` when nothing numeric was judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import (
    Annotation,
    ConditionStatus,
    ConditionType,
    Default,
    FailureCause,
    JobReason,
    Label,
    MeasurementReason,
)
from nvcre.api.v1alpha1.meta import format_time, parse_time
from nvcre.conditions import condition_of
from nvcre.durations import format_duration, parse_duration
from nvcre.measure import thresholds as th
from nvcre.measure.thresholds import Verdict

POLL_SECONDS: Final = Default.REQUEUE_SECONDS
"""How often a Job waiting for its measurements looks again (spec 4.3: 15 s)."""
TAIL_LINES: Final = 5
"""Lines of the log quoted when a measurement has no final data."""

BANDWIDTH: Final = "bandwidthMeasurement"
GOODPUT: Final = "goodputMeasurement"
_KEYS_OF: Final = {
    BANDWIDTH: (th.BUS_BANDWIDTH, th.ALG_BANDWIDTH),
    GOODPUT: (th.GOODPUT_RATIO, th.AVG_TFLOPS_PER_GPU, th.AVG_STEP_TIME),
}
_WHAT: Final = {BANDWIDTH: "bandwidth", GOODPUT: "goodput"}


@dataclass(frozen=True)
class Wait:
    """No verdict yet: look again after ``seconds``."""

    seconds: float


def _spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = job.get("spec") or {}
    return spec


def job_thresholds(job: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (_spec(job).get("thresholds") or {}).items()}


def expects_verdict(job: Mapping[str, Any]) -> bool:
    """A Job judged once it succeeds: it has thresholds or measurements."""
    spec = _spec(job)
    return bool(job_thresholds(job) or spec.get(BANDWIDTH) or spec.get(GOODPUT))


def succeeded_at(job: Mapping[str, Any]) -> datetime | None:
    succeeded = condition_of(job, ConditionType.SUCCEEDED)
    if not succeeded or succeeded.get("status") != ConditionStatus.TRUE:
        return None
    try:
        return parse_time(str(succeeded.get("lastTransitionTime")))
    except ValueError:
        return None


def awaiting_verdict(job: Mapping[str, Any]) -> bool:
    """Succeeded, judged, and not judged yet: its group is not finished (spec 4.4)."""
    return (
        succeeded_at(job) is not None
        and expects_verdict(job)
        and condition_of(job, ConditionType.VALIDATION_FAILED) is None
    )


def belongs(measurement: Mapping[str, Any] | None, job: Mapping[str, Any]) -> bool:
    """The measurement was made for this Job, not for an earlier attempt of the same name."""
    if measurement is None:
        return False
    uid = (job.get("metadata") or {}).get("uid")
    meta = measurement.get("metadata") or {}
    recorded = (meta.get("labels") or {}).get(Label.JOB_UID) or (meta.get("annotations") or {}).get(
        Annotation.JOB_UID
    )
    return not uid or not recorded or recorded == uid


def measurement_timeout_ns(job: Mapping[str, Any], default: str = Default.MEASUREMENT_TIMEOUT) -> int:
    """``spec.measurementTimeout``, else ``default``; an unparseable or negative one counts as unset."""
    for text in (_spec(job).get("measurementTimeout"), default):
        if text:
            try:
                ns = parse_duration(str(text))
            except ValueError:
                continue
            if ns >= 0:
                return ns
    return parse_duration(Default.MEASUREMENT_TIMEOUT)


def _status(measurement: Mapping[str, Any] | None) -> Mapping[str, Any]:
    status: Mapping[str, Any] = (measurement or {}).get("status") or {}
    return status


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _quote(lines: Sequence[Any], limit: int = TAIL_LINES) -> str:
    shown = [str(line).strip() for line in list(lines)[-limit:] if str(line).strip()]
    return " | ".join(shown)


def allows_missing_data(job: Mapping[str, Any], kind: str) -> bool:
    """The measurement's ``allowMissingData``: its lack of final data informs, never fails the Job."""
    return bool((_spec(job).get(kind) or {}).get("allowMissingData"))


# --- the data checks on a final bandwidth measurement ---------------------------------------------


def _corrupted(found: str) -> Verdict:
    """``DataCorruption``: what nccl-tests' own check ``found`` fails the Job whatever its bandwidth."""
    return Verdict(
        True,
        JobReason.DATA_CORRUPTION,
        f"nccl-tests {found}: the results are corrupted, whatever the bandwidth",
    )


def data_corruption(count: int) -> Verdict:
    return _corrupted(f"found {count} wrong values (#wrong columns)")


def out_of_bounds(count: int) -> Verdict:
    return _corrupted(f"reported Out of bounds values : {count} FAILED")


def failures_logged(count: int, lines: Sequence[Any]) -> Verdict:
    quoted = _quote(lines, 3)
    return Verdict(
        True,
        JobReason.FAILURES_LOGGED,
        f"the launcher's log reports {count} NCCL/CUDA failure line(s)" + (f": {quoted}" if quoted else ""),
    )


def unexpected_transport(used: list[str], expected: str) -> Verdict:
    named = f"[{', '.join(used)}]" if used else "no network transport (is NCCL_DEBUG=INFO set?)"
    return Verdict(
        True,
        JobReason.UNEXPECTED_TRANSPORT,
        f"NCCL used {named}, expected [{expected}]",
    )


def data_checks(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> Verdict | None:
    """``DataCorruption`` or ``FailuresLogged`` for a terminal bandwidth measurement that read a
    log, else None. These fail whatever the thresholds and ``allowMissingData`` say."""
    if bandwidth is None or not th.measurement_complete(bandwidth):
        return None
    status = _status(bandwidth)
    wrong = _int(status.get("wrongValues"))
    if wrong > 0:
        return data_corruption(wrong)
    bounds = status.get("outOfBounds") or {}
    if str(bounds.get("status") or "").upper() == "FAILED" or _int(bounds.get("count")) > 0:
        return out_of_bounds(_int(bounds.get("count")))
    failures = status.get("failureLines") or {}
    if _int(failures.get("count")) > 0:
        return failures_logged(_int(failures.get("count")), failures.get("lines") or ())
    return None


def transport_check(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> Verdict | None:
    expected = str((_spec(job).get(BANDWIDTH) or {}).get("expectedTransport") or "")
    if not expected or not th.bandwidth_final(bandwidth):
        return None
    used = sorted({str(t) for t in _status(bandwidth).get("transport") or ()})
    return unexpected_transport(used, expected) if used != [expected] else None


# --- no data is not a pass ------------------------------------------------------------------------


def _complete_text(measurement: Mapping[str, Any] | None) -> tuple[str, str]:
    complete = condition_of(measurement or {}, ConditionType.COMPLETE) or {}
    return str(complete.get("reason") or ""), str(complete.get("message") or "")


def _bandwidth_gap(bandwidth: Mapping[str, Any] | None) -> str | None:
    """Why a terminal bandwidth measurement has no final data (None: it has)."""
    status = _status(bandwidth)
    reason, message = _complete_text(bandwidth)
    tail = _quote(status.get("logTail") or ())
    last = f"; the log ends: {tail}" if tail else ""
    if reason == MeasurementReason.LOGS_UNAVAILABLE:
        return f"the launcher's log could not be read ({message})"
    if reason == MeasurementReason.JOB_SUCCEEDED and status.get("results"):
        if status.get("complete") is False:
            why = str(status.get("incompleteReason") or "the table is incomplete")
            return f"the nccl-tests table is incomplete: {why}{last}"
        return None
    if reason in (MeasurementReason.NO_DATA_COLLECTED, MeasurementReason.JOB_SUCCEEDED):
        lines = status.get("linesRead")
        read = f" in {lines} lines" if lines is not None else ""
        return f"no nccl-tests row was recognised in the launcher's log{read}{last}"
    return f"the bandwidth measurement ended {reason or 'without a reason'}: {message}"


def _goodput_gap(goodput: Mapping[str, Any] | None) -> str | None:
    reason, message = _complete_text(goodput)
    if reason == MeasurementReason.JOB_SUCCEEDED and th.goodput_values(goodput):
        return None
    return f"the goodput measurement ended {reason or 'without a reason'}: {message}"


def _gaps(
    job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None, goodput: Mapping[str, Any] | None
) -> dict[str, str]:
    """Why each terminal measurement the Job asked for has no final data, by spec key."""
    out = {}
    spec = _spec(job)
    if spec.get(BANDWIDTH):
        gap = (
            _bandwidth_gap(bandwidth) if bandwidth is not None else "the bandwidth measurement does not exist"
        )
        if gap:
            out[BANDWIDTH] = gap
    if spec.get(GOODPUT):
        gap = _goodput_gap(goodput) if goodput is not None else "the goodput measurement does not exist"
        if gap:
            out[GOODPUT] = gap
    return out


def _why_missing(missing: Sequence[str], gaps: Mapping[str, str], goodput: Mapping[str, Any] | None) -> str:
    reasons: list[str] = []
    for key in missing:
        kind = next(k for k, keys in _KEYS_OF.items() if key in keys)
        why = gaps.get(kind)
        not_measurable = _status(goodput).get("goodputNotMeasurableReason")
        if why is None and kind == GOODPUT and not_measurable:
            why = f"goodput is not measurable: {not_measurable}"
        text = why or f"the {_WHAT[kind]} measurement has no {key}"
        if text not in reasons:
            reasons.append(text)
    return "; ".join(reasons)


def unavailable(kind: str, why: str) -> Verdict:
    return Verdict(
        True,
        JobReason.MEASUREMENT_UNAVAILABLE,
        f"No final {_WHAT[kind]} data: {why}. Set {kind}.allowMissingData to make it informational",
    )


def _hosts_check(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> Verdict | None:
    """A bandwidth log from fewer hosts (or a single rank) than the group's nodes measures no
    multi-node link: a one-rank ``reduce_perf`` is a local copy, whatever its GB/s."""
    nodes = len(group_nodes(job))
    status = _status(bandwidth)
    ranks = status.get("ranks")
    hosts = list(status.get("hosts") or ())
    if nodes >= 2 and ranks is not None and _int(ranks) == 1:
        return Verdict(
            True,
            JobReason.MEASUREMENT_UNAVAILABLE,
            f"the nccl-tests log shows a single rank, but the group has {nodes} nodes: "
            "it measured no communication between them",
        )
    if nodes >= 2 and hosts and len(hosts) < nodes:
        return Verdict(
            True,
            JobReason.MEASUREMENT_UNAVAILABLE,
            f"the nccl-tests log shows ranks on {len(hosts)} host(s) ({', '.join(hosts)}), but the "
            f"group has {nodes} nodes: it is not a measurement across them",
        )
    return None


# --- expected-performance floors -------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """The default floor of one key: ``fraction`` of the expected ``value``."""

    key: str
    value: float
    fraction: float
    source: str
    row: str

    @property
    def floor(self) -> float:
        return self.value * self.fraction


def floors(job: Mapping[str, Any]) -> list[Floor]:
    """``spec.expectedPerformance``'s figures that no threshold of the Job names."""
    expected = _spec(job).get("expectedPerformance") or {}
    try:
        fraction = float(expected.get("floorFraction") or 0)
    except (TypeError, ValueError):
        return []
    if fraction <= 0:
        return []
    limits = job_thresholds(job)
    out = []
    for figure in expected.get("figures") or ():
        key = str(figure.get("key") or "")
        number = th.number(figure.get("value"))
        if key in th.KEYS and key not in limits and number is not None and number > 0:
            out.append(
                Floor(key, number, fraction, str(figure.get("source") or ""), str(figure.get("row") or ""))
            )
    return sorted(out, key=lambda f: f.key)


_UNITS: Final = {th.BUS_BANDWIDTH: "GB/s", th.ALG_BANDWIDTH: "GB/s", th.AVG_TFLOPS_PER_GPU: "TFLOP/s"}
LOWER_IS_BETTER: Final = (th.AVG_STEP_TIME,)


def _floor_text(floor: Floor, measured: float) -> str:
    unit = _UNITS.get(floor.key, "s")
    limit = floor.value / floor.fraction if floor.key in LOWER_IS_BETTER else floor.floor
    bound = "ceiling" if floor.key in LOWER_IS_BETTER else "floor"
    return (
        f"{floor.key}: measured {measured:.2f} {unit}, expected {floor.value:.2f} {unit} ({floor.source}), "
        f"{bound} {limit:.2f} {unit} ({floor.fraction:.0%} of expected; row {floor.row})"
    )


def floor_violation(floor: Floor, measured: float) -> Verdict | None:
    low = measured > floor.value / floor.fraction if floor.key in LOWER_IS_BETTER else measured < floor.floor
    if not low:
        return None
    return Verdict(
        True, JobReason.THRESHOLD_VIOLATED, _floor_text(floor, measured), FailureCause.BELOW_EXPECTED
    )


# --- the judge ----------------------------------------------------------------------------------


def judge(
    job: Mapping[str, Any],
    bandwidth: Mapping[str, Any] | None,
    goodput: Mapping[str, Any] | None,
    now: datetime,
    *,
    default_timeout: str = Default.MEASUREMENT_TIMEOUT,
) -> Verdict | Wait | None:
    """The verdict of a succeeded Job, ``Wait`` while its measurements are pending, or None when
    nothing is judged (not succeeded, or neither thresholds nor a measurement)."""
    started = succeeded_at(job)
    if started is None or not expects_verdict(job):
        return None
    bandwidth = bandwidth if belongs(bandwidth, job) else None
    goodput = goodput if belongs(goodput, job) else None
    limits = job_thresholds(job)
    unknown = th.unknown_keys(limits)
    if unknown is not None:
        return unknown
    data = data_checks(job, bandwidth)
    if data is not None:
        return data
    values = th.measured_values(bandwidth, goodput)
    spec = _spec(job)
    wanted = {BANDWIDTH: bandwidth, GOODPUT: goodput}
    running = [k for k, m in wanted.items() if spec.get(k) and not th.measurement_complete(m)]
    orphans = [
        k for k in th.missing_keys(limits, values) if not any(k in _KEYS_OF[m] for m in wanted if spec.get(m))
    ]
    timeout = measurement_timeout_ns(job, default_timeout)
    if running or orphans:
        # a measurement still reading the final log may take its grace, and a poll, to end
        patience = (
            max(timeout / 1e9, Default.FINAL_READ_GRACE_SECONDS + 2 * POLL_SECONDS)
            if running
            else timeout / 1e9
        )
        left = patience - (now - started).total_seconds()
        if left >= 0:
            return Wait(min(POLL_SECONDS, left + 0.1))
        missing = th.missing_keys(limits, values)
        if missing:
            return th.timeout_verdict(missing, format_duration(timeout))
    gaps = _gaps(job, bandwidth, goodput)
    for kind in running:
        gaps[kind] = (
            f"the {_WHAT[kind]} measurement did not finish within {format_duration(int(patience * 1e9))}"
        )
    for kind, why in gaps.items():
        if not allows_missing_data(job, kind):
            return unavailable(kind, why)
    missing = th.missing_keys(limits, values)
    if missing:  # allowMissingData never waives a threshold: it needs a value
        return Verdict(
            True,
            JobReason.MEASUREMENT_UNAVAILABLE,
            f"No final value for threshold(s) [{', '.join(missing)}]: {_why_missing(missing, gaps, goodput)}",
        )
    quality = transport_check(job, bandwidth)
    judged_floors = [f for f in floors(job) if f.key in values]
    if quality is None and any(k in _KEYS_OF[BANDWIDTH] for k in [*limits, *(f.key for f in judged_floors)]):
        quality = _hosts_check(job, bandwidth)
    if quality is not None:
        return quality
    if limits:
        verdict = th.evaluate(limits, values)
        if verdict.failed:
            return verdict
    for floor in judged_floors:
        violation = floor_violation(floor, values[floor.key])
        if violation is not None:
            return violation
    if limits or judged_floors:
        met = [th.ALL_MET_MESSAGE] if limits else []
        met += [_floor_text(f, values[f.key]) for f in judged_floors]
        return Verdict(False, JobReason.THRESHOLDS_MET, "; ".join(met))
    return checked(job, bandwidth, gaps)


def checked(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None, gaps: Mapping[str, str]) -> Verdict:
    """The pass of a Job with measurements and nothing numeric to judge."""
    config = _spec(job).get(BANDWIDTH)
    notes = [f"{why} (allowMissingData: informational)" for why in gaps.values()]
    if config and BANDWIDTH not in gaps:
        expected = config.get("expectedTransport")
        notes.insert(
            0, "no corrupted results" + (f", transport [{expected}] as expected" if expected else "")
        )
    elif not config and not gaps:
        notes.append("the goodput measurement is final")
    return Verdict(
        False, JobReason.MEASUREMENTS_CHECKED, f"No performance thresholds set; {'; '.join(notes)}"
    )


def group_nodes(job: Mapping[str, Any]) -> list[str]:
    """The ``group-nodes`` annotation: split on commas, trimmed, deduplicated, sorted."""
    annotation = ((job.get("metadata") or {}).get("annotations") or {}).get(Annotation.GROUP_NODES, "")
    return sorted({n.strip() for n in str(annotation).split(",") if n.strip()})


def failed_nodes(job: Mapping[str, Any], verdict: Verdict) -> list[dict[str, str]] | None:
    """The ``failedNodes`` a failing verdict records (only when the Job names none yet)."""
    if not verdict.failed or ((job.get("status") or {}).get("failedNodes")):
        return None
    return failednodes.entries(group_nodes(job), verdict.cause or verdict.reason, verdict.message)


# --- the same judge over a saved log (``nvcrectl analyze``) --------------------------------------

OFFLINE_UID: Final = "offline"
_OFFLINE_END: Final = datetime(2000, 1, 1, tzinfo=UTC)


def _offline_measurement(status: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    stamp = format_time(_OFFLINE_END)
    complete = {
        "status": ConditionStatus.TRUE,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    return {
        "metadata": {"labels": {Label.JOB_UID: OFFLINE_UID}},
        "status": {
            **status,
            "conditions": [
                {**complete, "type": ConditionType.MEASURING, "status": ConditionStatus.FALSE},
                {**complete, "type": ConditionType.COMPLETE},
            ],
        },
    }


def judge_offline(
    spec: Mapping[str, Any],
    *,
    nodes: int = 0,
    bandwidth: tuple[Mapping[str, Any], str, str] | None = None,
    goodput: tuple[Mapping[str, Any], str, str] | None = None,
) -> Verdict:
    """:func:`judge` on measurements read from saved logs, each ``(status, Complete reason,
    Complete message)`` as the measurement controller would write it once the Job succeeded;
    ``spec`` is the Job spec part that judging reads (thresholds, the measurement configs,
    ``expectedPerformance``) and ``nodes`` the group size the log should span (0: unknown)."""
    names = ",".join(f"node-{i}" for i in range(nodes))
    job = {
        "metadata": {"uid": OFFLINE_UID, "annotations": {Annotation.GROUP_NODES: names}},
        "spec": dict(spec),
        "status": {
            "conditions": [
                {
                    "type": ConditionType.SUCCEEDED,
                    "status": ConditionStatus.TRUE,
                    "lastTransitionTime": format_time(_OFFLINE_END),
                }
            ]
        },
    }
    decided = judge(
        job,
        _offline_measurement(*bandwidth) if bandwidth else None,
        _offline_measurement(*goodput) if goodput else None,
        _OFFLINE_END + timedelta(days=365),
    )
    if not isinstance(decided, Verdict):
        raise ValueError("judge_offline needs a measurement or a threshold to judge")
    return decided
