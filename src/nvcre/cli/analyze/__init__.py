"""``nvcrectl analyze``: read saved workload logs offline, with the parsers the controllers run.

A user can point it at a log from any cluster, with or without nvcre. ``--threshold KEY=EXPR``
judges the measured values exactly as the Job controller judges a Job's final measurements.
"""

from __future__ import annotations

import click

from nvcre.cli.analyze.dcgm import dcgm_command
from nvcre.cli.analyze.goodput import goodput_command
from nvcre.cli.analyze.nccl import nccl_command


@click.group("analyze")
def analyze_group() -> None:
    """Analyze saved workload logs offline, exactly as the measurement controllers read them."""


analyze_group.add_command(nccl_command)
analyze_group.add_command(goodput_command)
analyze_group.add_command(dcgm_command)
