"""The GoodputMeasurement controller: goodput from a Job's training logs (spec measurements 3)."""

from nvcre.controllers.goodput.controller import GoodputController

__all__ = ["GoodputController"]
