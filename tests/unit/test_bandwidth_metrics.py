"""The bandwidth gauges: one series per message size, labelled by test type and Workflow group."""

from __future__ import annotations

from prometheus_client import REGISTRY

from nvcre.controllers.bandwidth import metrics
from nvcre.measure.nccl import SizeResult

BM = {
    "metadata": {"namespace": "team", "name": "wf-group-0-iter-1-bandwidth"},
    "spec": {"testType": "all_reduce"},
}
JOB = {"metadata": {"labels": {"nvcre.nvidia.com/workflow": "wf", "nvcre.nvidia.com/group": "group-0"}}}


def value(name: str, size: int, final: str) -> float | None:
    labels = {
        "namespace": "team",
        "measurement": "wf-group-0-iter-1-bandwidth",
        "workflow": "wf",
        "group": "group-0",
        "nccl_test": "all_reduce",
        "message_size_bytes": str(size),
        "final": final,
    }
    return REGISTRY.get_sample_value(name, labels)


def test_provisional_then_final_values_replace_each_other_and_go_with_the_measurement() -> None:
    metrics.observe(
        BM, JOB, [SizeResult(8, "0.00", "0.00", 1), SizeResult(1 << 34, "250.10", "470.00", 1)], final=False
    )
    assert value("burnin_nccl_busbw_gbps", 1 << 34, "false") == 470.0
    assert value("burnin_nccl_algbw_gbps", 1 << 34, "false") == 250.1
    metrics.observe(BM, JOB, [SizeResult(1 << 34, "260.11", "487.70", 2)], final=True)
    assert value("burnin_nccl_busbw_gbps", 1 << 34, "true") == 487.7
    assert value("burnin_nccl_busbw_gbps", 1 << 34, "false") is None
    assert value("burnin_nccl_busbw_gbps", 8, "false") is None
    metrics.forget(("team", "wf-group-0-iter-1-bandwidth"))
    assert value("burnin_nccl_busbw_gbps", 1 << 34, "true") is None
