"""What the Job controller decides: the workload's next step, restarts, node health, the
measurements it asks for and when a deleted Job may let go."""
