"""The BandwidthMeasurement controller: NCCL bandwidth read from a Job's launcher log (spec 2.5)."""

from nvcre.controllers.bandwidth.controller import BandwidthMeasurementController

__all__ = ["BandwidthMeasurementController"]
