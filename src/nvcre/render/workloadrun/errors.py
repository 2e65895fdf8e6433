"""The one error a WorkloadRun build raises."""

from __future__ import annotations


class BuildError(ValueError):
    """The run cannot be turned into a Workflow. The message names the offending field.

    The controller reports it as ``Failed``/``BuildFailed`` with the message
    ``workloadrun <name>: <error>``; the CLI prints the same line and exits 1.
    """
