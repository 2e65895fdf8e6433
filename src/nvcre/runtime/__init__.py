"""A small, generic controller runtime (no nvcre knowledge), shaped like controller-runtime.

Level-triggered reconcilers keyed by object, fed by list+watch informers through a
de-duplicating work queue with per-key backoff; Lease leader election; metrics and probes.
"""
