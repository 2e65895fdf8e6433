"""Goodput from training logs: the parser (3.1), the formula (3.3) and the status it moves (3.3-3.5).

One implementation for the GoodputMeasurement controller, ``nvcrectl analyze goodput`` and the
tests.
"""

from nvcre.measure.goodput.calculator import fmt, goodput, number
from nvcre.measure.goodput.parser import GoodputParser, PendingSave, Step, Window, kubelet_time
from nvcre.measure.goodput.sampling import finish, interrupt, no_data, observe, restart_seen, unmeasurable

__all__ = [
    "GoodputParser",
    "PendingSave",
    "Step",
    "Window",
    "finish",
    "fmt",
    "goodput",
    "interrupt",
    "kubelet_time",
    "no_data",
    "number",
    "observe",
    "restart_seen",
    "unmeasurable",
]
