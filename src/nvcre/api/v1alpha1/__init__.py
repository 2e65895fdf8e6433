"""nvcre.nvidia.com/v1alpha1: every kind of the API group."""

from nvcre.api.v1alpha1.certification import Certification
from nvcre.api.v1alpha1.job import Job
from nvcre.api.v1alpha1.logprofile import LogProfile
from nvcre.api.v1alpha1.measurements import BandwidthMeasurement, GoodputMeasurement
from nvcre.api.v1alpha1.resource import API_VERSION, GROUP, VERSION, Resource
from nvcre.api.v1alpha1.workflow import Workflow
from nvcre.api.v1alpha1.workloadrun import WorkloadRun

KINDS: dict[str, type[Resource]] = {
    kind.KIND: kind
    for kind in (
        WorkloadRun,
        Workflow,
        Job,
        Certification,
        BandwidthMeasurement,
        GoodputMeasurement,
        LogProfile,
    )
}
"""Every kind of the group, by kind name."""

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "VERSION",
    "BandwidthMeasurement",
    "Certification",
    "GoodputMeasurement",
    "Job",
    "LogProfile",
    "Resource",
    "Workflow",
    "WorkloadRun",
]
