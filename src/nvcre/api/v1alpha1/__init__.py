"""nvcre.nvidia.com/v1alpha1: every kind of the API group.

The kinds' modules are imported on first access (PEP 562), so a command that uses one kind does
not pay for the models of the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nvcre.api.v1alpha1.constants import API_VERSION, GROUP, VERSION

if TYPE_CHECKING:
    from nvcre.api.v1alpha1.certification import Certification
    from nvcre.api.v1alpha1.job import Job
    from nvcre.api.v1alpha1.logprofile import LogProfile
    from nvcre.api.v1alpha1.measurements import BandwidthMeasurement, GoodputMeasurement
    from nvcre.api.v1alpha1.noderecord import NodeRecord
    from nvcre.api.v1alpha1.reportexport import ReportExport, ReportExportPolicy
    from nvcre.api.v1alpha1.resource import Resource
    from nvcre.api.v1alpha1.workflow import Workflow
    from nvcre.api.v1alpha1.workloadrun import WorkloadRun

    KINDS: dict[str, type[Resource]]

KIND_MODULES: dict[str, str] = {
    "WorkloadRun": "workloadrun",
    "Workflow": "workflow",
    "Job": "job",
    "Certification": "certification",
    "BandwidthMeasurement": "measurements",
    "GoodputMeasurement": "measurements",
    "LogProfile": "logprofile",
    "NodeRecord": "noderecord",
    "ReportExportPolicy": "reportexport",
    "ReportExport": "reportexport",
}
"""The module of each kind of the group, by kind name."""

_MODULES = {**KIND_MODULES, "Resource": "resource"}


def kind_model(kind: str) -> type[Resource]:
    """The model of ``kind`` (a key of :data:`KIND_MODULES`), importing only its module."""
    model: type[Resource] = getattr(importlib.import_module(f"{__name__}.{KIND_MODULES[kind]}"), kind)
    return model


def __getattr__(name: str) -> Any:
    if name == "KINDS":
        value: Any = {kind: kind_model(kind) for kind in KIND_MODULES}
    elif name in _MODULES:
        value = getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "KIND_MODULES",
    "VERSION",
    "BandwidthMeasurement",
    "Certification",
    "GoodputMeasurement",
    "Job",
    "LogProfile",
    "NodeRecord",
    "ReportExport",
    "ReportExportPolicy",
    "Resource",
    "Workflow",
    "WorkloadRun",
    "kind_model",
]
