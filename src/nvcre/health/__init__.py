"""Node health and workload liveness decisions (pure)."""
