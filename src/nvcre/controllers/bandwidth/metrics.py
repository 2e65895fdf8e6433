"""Prometheus gauges of NCCL bandwidth per message size (ADR-017 names), on the manager's endpoint.

One series per (measurement, message size), labelled with the test type and the Workflow group
the measurement's Job ran, so a dashboard shows each group's sweep. Values are provisional
while the Job runs and final after; ``final`` says which. A deleted measurement's series go.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import Gauge

from nvcre.api.v1alpha1.constants import Label
from nvcre.measure.nccl import SizeResult

LABELS = ("namespace", "measurement", "workflow", "group", "nccl_test", "message_size_bytes", "final")
BUS_BW = Gauge("burnin_nccl_busbw_gbps", "NCCL bus bandwidth (GB/s) per message size.", LABELS)
ALG_BW = Gauge("burnin_nccl_algbw_gbps", "NCCL algorithm bandwidth (GB/s) per message size.", LABELS)

_series: dict[tuple[str, str], set[tuple[str, ...]]] = {}


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def observe(
    bm: Mapping[str, Any], job: Mapping[str, Any] | None, results: Sequence[SizeResult], *, final: bool
) -> None:
    """Publish ``results`` (replacing what this measurement published before)."""
    meta = bm.get("metadata") or {}
    key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    job_labels = ((job or {}).get("metadata") or {}).get("labels") or {}
    common = (
        key[0],
        key[1],
        str(job_labels.get(Label.WORKFLOW) or ""),
        str(job_labels.get(Label.GROUP) or ""),
        str((bm.get("spec") or {}).get("testType") or ""),
    )
    wanted = {(*common, str(r.size_bytes), "true" if final else "false"): r for r in results}
    forget(key, keep=set(wanted))
    for labels, result in wanted.items():
        BUS_BW.labels(*labels).set(_number(result.bus_bw))
        ALG_BW.labels(*labels).set(_number(result.alg_bw))
    _series[key] = set(wanted)


def forget(key: tuple[str, str], keep: set[tuple[str, ...]] | None = None) -> None:
    """Remove the series of measurement ``(namespace, name)`` (except ``keep``)."""
    for labels in _series.pop(key, set()) - (keep or set()):
        BUS_BW.remove(*labels)
        ALG_BW.remove(*labels)
