"""``nvcrectl mcp serve`` driven by the MCP SDK's own stdio client against the real control plane.

A Certification runs through the real controllers on kwok GPU nodes and fails (the test plays
Kubeflow Trainer and fails its TrainJob); the server then answers ``initialize``, ``tools/list``
and the tools a user of an assistant calls, reading what the CLI reads. It runs as a user whose
requests the API server's audit log records (the manager's identity, told apart by the server's
own user agent), and the log shows it only read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from lightkube import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from nvcre import resources
from nvcre.cli.mcp_serve import USER_AGENT, ReadOnlyClient
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import Certification, category, pool_spec
from nvcre.testing.certs import MANAGER_USER
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_job, jobs_of, wait_true
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name

NVCRECTL = Path(sys.executable).parent / "nvcrectl"
ALL_REDUCE = category("communication", "nccl-all-reduce")
ALL_GATHER = category("communication", "nccl-all-gather")
TOOLS = [
    "list_categories",
    "list_certifications",
    "list_workloadruns",
    "get_certification_status",
    "get_certification_report",
    "get_workloadrun_report",
    "list_failed_nodes",
    "get_node_record",
    "analyze_nccl_log",
    "analyze_dcgm_log",
]
READS = {"get", "list", "watch"}
DCGM_LOG = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "dcgm"
    / "gb10-dcgm423-r1-json-software-fail-persistence.json"
).read_text()
NCCL_LOG = """\
#  Rank  0 Group  0 Pid   1001 on gpu-node-0 device  0 [0x18] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
   134217728      33554432     float     sum      -1    612.3  219.20  383.60      0    611.9  219.35  383.86      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 383.73
"""


def _failed_certification(kube: Client, namespace: str, nodes: list[str], pool: str) -> None:
    cert = (
        Certification("broken")
        .namespace(namespace)
        .pool(pool)
        .allow_missing_data()  # TrainJobs ended by hand: no launcher log here
        .categories(ALL_REDUCE, ALL_GATHER)
        .obj()
    )
    kube.create(resources.Certification.from_dict(cert))
    for each in (ALL_REDUCE, ALL_GATHER):  # both fail on both nodes
        workflow = certification_workflow_name("broken", each["domain"], each["variant"])
        (job,) = wait_for(lambda w=workflow: list(jobs_of(kube, namespace, w)) or None, 60, what="the Job")
        finish_job(kube, namespace, job, succeeded=False)
    wait_true(kube, resources.Certification, "broken", namespace, "Failed", timeout=90)
    for node in nodes:  # the run's results reach the nodes' records after it ends
        wait_for(
            lambda node=node: _results(kube, node) == 2, 60, what=f"both results in the record of {node}"
        )


def _results(kube: Client, node: str) -> int:
    """How many results the node's NodeRecord holds (0 before it exists)."""
    for record in kube.list(resources.NodeRecord):
        if record.metadata and record.metadata.name == node:
            categories = (record.to_dict().get("status") or {}).get("categories") or ()
            return sum(len(c.get("results") or ()) for c in categories)
    return 0


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def _session(config: Path, namespace: str, node: str) -> dict[str, Any]:
    """Everything the test asks the server, in one session; the node record is asked last."""
    server = StdioServerParameters(command=str(NVCRECTL), args=["mcp", "serve", "--kubeconfig", str(config)])
    out: dict[str, Any] = {}
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        out["initialize"] = await session.initialize()
        out["tools"] = (await session.list_tools()).tools
        where = {"namespace": namespace}
        calls = {
            "certifications": ("list_certifications", where),
            "status": ("get_certification_status", {"name": "broken", **where}),
            "text": ("get_certification_report", {"name": "broken", **where}),
            "json": ("get_certification_report", {"name": "broken", "format": "json", **where}),
            "failed": ("list_failed_nodes", {"name": "broken", **where}),
            "missing": ("get_certification_report", {"name": "missing", **where}),
            "delete": ("delete_certification", {"name": "broken", **where}),
            "analyze": (
                "analyze_nccl_log",
                {"log": NCCL_LOG, "thresholds": {"busBandwidthGBps": "value >= 400"}},
            ),
            "dcgm": ("analyze_dcgm_log", {"log": DCGM_LOG, "level": 1}),
            "record": ("get_node_record", {"node": node}),
        }
        for key, (tool, arguments) in calls.items():
            out[key] = await session.call_tool(tool, arguments)
    return out


def test_mcp_serve_answers_with_the_reports_and_never_writes(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    pool = pool_name()
    nodes = sorted(str(n.metadata.name) for n in gpu_nodes(2, pool_spec(pool)) if n.metadata)
    _failed_certification(kube, namespace, nodes, pool)
    config = control_plane.write_kubeconfig(tmp_path / "kubeconfig", user=MANAGER_USER)

    out = anyio.run(_session, config, namespace, nodes[0])

    assert out["initialize"].server_info.name == "nvcre"
    assert [tool.name for tool in out["tools"]] == TOOLS
    for tool in out["tools"]:
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False

    (listed,) = out["certifications"].structured_content["result"]
    assert (listed["name"], listed["status"]) == ("broken", "Failed")

    status = out["status"].structured_content
    assert status["result"] == "FAILED" and status["failedNodes"] == nodes
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in status["conditions"])

    text = _text(out["text"])
    assert "Certification Report" in text and "│  Result:       FAILED " in text
    report = json.loads(_text(out["json"]))
    assert report["name"] == "broken" and report["result"] == "FAILED"

    # a node that failed in both categories is listed under each; the report's top level and the
    # status name it once
    failed = out["failed"].structured_content["result"]
    assert sorted((row["category"], row["name"], row["reason"]) for row in failed) == [
        (f"communication/{variant}", n, "WorkloadFailed")
        for variant in ("nccl-all-gather", "nccl-all-reduce")
        for n in nodes
    ]
    assert sorted(f["name"] for f in report["failedNodes"]) == nodes

    assert out["missing"].is_error
    assert _text(out["missing"]).endswith(f'certification "missing" not found in namespace "{namespace}"')

    # no tool writes: one that would is unknown (and the audit log below shows only reads)
    assert out["delete"].is_error and _text(out["delete"]) == "Unknown tool: delete_certification"

    analyzed = out["analyze"].structured_content
    assert analyzed["busBandwidthGBps"] == 383.6
    assert analyzed["verdict"] == {
        "failed": True,
        "reason": "ThresholdViolated",
        "message": 'Threshold "busBandwidthGBps" violated: measured 383.6000, expression: value >= 400',
    }

    diag = out["dcgm"].structured_content
    assert (diag["level"], diag["complete"], diag["failedTests"]) == (1, True, ["software"])
    assert diag["verdict"]["failed"] and diag["verdict"]["reason"] == "WorkloadFailed"
    assert diag["verdict"]["message"].startswith(
        "dcgmi diag level 1: 1 of 1 tests failed: software on GPU 0 ("
    )

    record = out["record"].structured_content
    assert record["node"] == nodes[0]
    assert sorted((r["category"], r["verdict"]) for r in record["results"]) == [
        ("communication/nccl-all-gather", "Failed"),
        ("communication/nccl-all-reduce", "Failed"),
    ]

    # The audit log holds every request the server made: reads only. Its last request, the node
    # record, is awaited: every one before it is in the log too.
    def resource(event: dict[str, Any]) -> str:
        return str((event.get("objectRef") or {}).get("resource") or event.get("requestURI"))

    def served() -> list[dict[str, Any]] | None:
        mine = [e for e in control_plane.audit_events() if e.get("userAgent", "").startswith(USER_AGENT)]
        return mine if any(resource(e) == "noderecords" for e in mine) else None

    requests = wait_for(served, 30, what="the server's requests in the audit log")
    assert {e["verb"] for e in requests} <= READS
    assert {resource(e) for e in requests} >= {"certifications", "workflows", "noderecords"}


def test_the_server_client_has_no_method_that_writes() -> None:
    assert {name for name in dir(ReadOnlyClient) if not name.startswith("_")} == {"get", "list"}
