"""The certification and WorkloadRun report (cli.md 4.5): pure builders and renderers."""
