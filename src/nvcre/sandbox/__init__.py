"""The simulated accelerator of ``nvcrectl sandbox``: performance model, workload logs, faults.

Pure: no Kubernetes client, no processes. The sandbox shell calls
:func:`~nvcre.sandbox.simulate.simulate` for each pod and writes what it returns.
"""

from nvcre.sandbox.faults import (
    Fault,
    FaultSpecError,
    NodeChange,
    apply_node_change,
    parse_fault,
    parse_faults,
)
from nvcre.sandbox.model import NodeModel, node_model
from nvcre.sandbox.nccl import Member
from nvcre.sandbox.simulate import LogLine, NodeEffect, Simulation, cri_log, initial_node_change, simulate

__all__ = [
    "Fault",
    "FaultSpecError",
    "LogLine",
    "Member",
    "NodeChange",
    "NodeEffect",
    "NodeModel",
    "Simulation",
    "apply_node_change",
    "cri_log",
    "initial_node_change",
    "node_model",
    "parse_fault",
    "parse_faults",
    "simulate",
]
