"""Prometheus metrics of the runtime (controller-runtime's names where one exists)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Reconciliations per controller and result.",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total", "Reconciliations that raised.", ["controller"]
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Time per reconciliation.",
    ["controller"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
QUEUE_DEPTH = Gauge("workqueue_depth", "Keys waiting in a controller's queue.", ["name"])
LEADER = Gauge("leader_election_master_status", "1 while this replica leads.", ["name"])
CACHED_OBJECTS = Gauge(
    "nvcre_informer_cached_objects",
    "Objects held in the informer caches, per kind (what the manager's memory grows with).",
    ["kind"],
)
EVENT_LOOP_LAG = Histogram(
    "nvcre_event_loop_lag_seconds",
    "How much later than due the manager's event loop ran a timer (it delays every reconcile, "
    "lease renewal and probe).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
