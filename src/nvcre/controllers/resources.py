"""lightkube resource classes for the kinds nvcre reads and writes."""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from nvcre.api.v1alpha1 import KINDS
from nvcre.api.v1alpha1.constants import TRAINER_GROUP, TRAINER_VERSION
from nvcre.workload.ownership import JOBSET_GROUP, JOBSET_VERSION


def _nvcre(kind: str) -> Any:
    model = KINDS[kind]
    make = create_namespaced_resource if model.NAMESPACED else create_global_resource
    return make(model.GROUP, model.VERSION, model.KIND, model.PLURAL)


Certification = _nvcre("Certification")
WorkloadRun = _nvcre("WorkloadRun")
Workflow = _nvcre("Workflow")
Job = _nvcre("Job")
GoodputMeasurement = _nvcre("GoodputMeasurement")
BandwidthMeasurement = _nvcre("BandwidthMeasurement")
LogProfile = _nvcre("LogProfile")

TrainJob: Any = create_namespaced_resource(TRAINER_GROUP, TRAINER_VERSION, "TrainJob", "trainjobs")
TrainingRuntime: Any = create_namespaced_resource(
    TRAINER_GROUP, TRAINER_VERSION, "TrainingRuntime", "trainingruntimes"
)
JobSet: Any = create_namespaced_resource(JOBSET_GROUP, JOBSET_VERSION, "JobSet", "jobsets")
