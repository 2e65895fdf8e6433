"""The GoodputMeasurement and BandwidthMeasurement a Job asks for (spec 8.8; pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import API_VERSION, GROUP, MANAGED_BY_VALUE, Kind, Label
from nvcre.naming import bandwidth_measurement_name, goodput_measurement_name
from nvcre.objects import Obj, controller_owner


@dataclass(frozen=True)
class Wanted:
    kind: str
    """``GoodputMeasurement`` or ``BandwidthMeasurement``."""
    body: Obj


_KINDS = (
    ("goodputMeasurement", "GoodputMeasurement", goodput_measurement_name),
    ("bandwidthMeasurement", "BandwidthMeasurement", bandwidth_measurement_name),
)


def wanted(job: Obj) -> list[Wanted]:
    """One measurement per config in the Job spec, owned by the Job's Workflow (so they outlive
    an iteration's Job), else by the Job."""
    meta = job["metadata"]
    owner = controller_owner(job) or {
        "apiVersion": API_VERSION,
        "kind": Kind.JOB,
        "name": meta["name"],
        "uid": meta.get("uid"),
    }
    out = []
    for config_key, kind, naming in _KINDS:
        config: dict[str, Any] | None = job["spec"].get(config_key)
        if not config:
            continue
        body = {
            "apiVersion": API_VERSION,
            "kind": kind,
            "metadata": {
                "name": naming(meta["name"]),
                "namespace": meta["namespace"],
                "labels": {
                    Label.MANAGED_BY: MANAGED_BY_VALUE,
                    Label.JOB: meta["name"],
                    Label.JOB_UID: meta.get("uid", ""),
                },
                "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {"jobRef": {"apiGroup": GROUP, "kind": Kind.JOB, "name": meta["name"]}, **config},
        }
        out.append(Wanted(kind, body))
    return out
