"""lightkube resource classes for the kinds nvcre reads and writes: the one factory the
controllers, the CLI and the tests share."""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from nvcre.api.v1alpha1 import KINDS
from nvcre.api.v1alpha1.constants import TRAINER_GROUP, TRAINER_VERSION
from nvcre.workload.ownership import JOBSET_GROUP, JOBSET_VERSION

__all__ = [
    "BY_KIND",
    "BandwidthMeasurement",
    "Certification",
    "GoodputMeasurement",
    "Job",
    "JobSet",
    "LogProfile",
    "NodeRecord",
    "ReportExport",
    "ReportExportPolicy",
    "TrainJob",
    "TrainingRuntime",
    "Workflow",
    "WorkloadRun",
]


def _nvcre(kind: str) -> Any:
    model = KINDS[kind]
    make = create_namespaced_resource if model.NAMESPACED else create_global_resource
    return make(model.GROUP, model.VERSION, model.KIND, model.PLURAL)


BY_KIND: dict[str, Any] = {kind: _nvcre(kind) for kind in KINDS}
"""Each nvcre kind's class by its kind name (``Workflow``, ``Job``, ...)."""

Certification = BY_KIND["Certification"]
WorkloadRun = BY_KIND["WorkloadRun"]
Workflow = BY_KIND["Workflow"]
Job = BY_KIND["Job"]
GoodputMeasurement = BY_KIND["GoodputMeasurement"]
BandwidthMeasurement = BY_KIND["BandwidthMeasurement"]
LogProfile = BY_KIND["LogProfile"]
NodeRecord = BY_KIND["NodeRecord"]
ReportExportPolicy = BY_KIND["ReportExportPolicy"]
ReportExport = BY_KIND["ReportExport"]

TrainJob: Any = create_namespaced_resource(TRAINER_GROUP, TRAINER_VERSION, "TrainJob", "trainjobs")
TrainingRuntime: Any = create_namespaced_resource(
    TRAINER_GROUP, TRAINER_VERSION, "TrainingRuntime", "trainingruntimes"
)
JobSet: Any = create_namespaced_resource(JOBSET_GROUP, JOBSET_VERSION, "JobSet", "jobsets")
