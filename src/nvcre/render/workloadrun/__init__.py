"""WorkloadRun -> Workflow."""
