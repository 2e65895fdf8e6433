"""nccl-tests logs into a BandwidthMeasurement's status (spec 2.2-2.5; pure, streaming).

A :class:`Parser` turns each log line into an item (a data point, a fact about the run or a
transport name) with the reader its LogProfile chooses (:mod:`.reader`); an :class:`Aggregate`
folds the items in constant memory per message size (:mod:`.aggregate`);
:func:`final_results` rounds each average once (``%.2f``); :func:`merge_provisional` folds a
sample of new lines into stored (rounded) results, the running average of spec 2.5. The
controller, ``nvcrectl analyze nccl`` and the tests all go through :class:`Parser` and
:class:`Aggregate`. :mod:`.transitions` says what the measurement's status becomes.
"""

from nvcre.measure.nccl.aggregate import (
    NO_DATA,
    SIZE_CAP,
    Aggregate,
    SizeResult,
    final_reason,
    final_results,
    merge_provisional,
    peak,
    read,
    union_transport,
)
from nvcre.measure.nccl.events import Point
from nvcre.measure.nccl.reader import NCCL_TESTS, NO_ROWS, PATTERNS, Parser, strip_kubelet_prefix

__all__ = [
    "NCCL_TESTS",
    "NO_DATA",
    "NO_ROWS",
    "PATTERNS",
    "SIZE_CAP",
    "Aggregate",
    "Parser",
    "Point",
    "SizeResult",
    "final_reason",
    "final_results",
    "merge_provisional",
    "peak",
    "read",
    "strip_kubelet_prefix",
    "union_transport",
]
