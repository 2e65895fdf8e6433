"""Every measurement kind, one row each: the manager starts one
:class:`~nvcre.controllers.measurement.shell.MeasurementController` per row. A new kind is one
module implementing :class:`~nvcre.controllers.measurement.kind.MeasurementKind` and its row."""

from __future__ import annotations

from collections.abc import Callable

from nvcre.controllers.measurement.bandwidth import Bandwidth
from nvcre.controllers.measurement.goodput import Goodput
from nvcre.controllers.measurement.kind import MeasurementKind

KINDS: tuple[Callable[[], MeasurementKind], ...] = (Bandwidth, Goodput)
"""A fresh plugin per controller (a kind may keep per-measurement memory, like goodput's cursors)."""
