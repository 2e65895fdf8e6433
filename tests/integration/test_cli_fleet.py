"""``nvcrectl node history`` and ``nvcrectl fleet`` on the real API server, reading the NodeRecords
the real manager wrote (docs/fleet-memory.md, "Commands").

The test plays Kubeflow Trainer (it ends TrainJobs) and the measurement controller (it writes the
BandwidthMeasurement status nvcre created), as tests/integration/test_node_records.py does; the
Workflow, Job and NodeRecord writers are real, and no record is written by the test. Two runs of
one Workflow of three 2-node groups: the first passes everywhere; in the second, group-0 passes a
little slower, group-1 measures 18 % below its members' baseline (cause Regression) and group-2
violates its threshold. A seventh GPU node never runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client

from nvcre import resources
from nvcre.testing.builders import new_pool, pool_name, pool_nodes
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import jobs_of, wait_true
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.measured import BANDWIDTH, complete_bandwidth, finish
from nvcre.testing.records import run_again
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import workflow

BIN = Path(sys.executable).parent
FLEET = "fleet.nvcre.test/id"
AWS_BLOCK = "topology.k8s.aws/network-node-layer-1"
H100 = "NVIDIA-H100-80GB-HBM3"
B200 = "NVIDIA-B200"
NCCL_OK = "value > 300"


def nvcrectl(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "nvcrectl"), *args, "--kubeconfig", str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        timeout=120,
    )


def result_count(kube: Client, node: str) -> int:
    try:
        status = kube.get(resources.NodeRecord, node).to_dict().get("status") or {}
    except ApiError as error:
        if error.status.code == 404:
            return 0
        raise
    return sum(len(h.get("results") or ()) for h in status.get("categories") or ())


def run(
    kube: Client,
    namespace: str,
    body: dict[str, Any],
    bus: list[float],
    outcome: str,
    nodes: list[str],
    runs: int,
) -> dict[str, list[str]]:
    """Create ``body`` (the previous Workflow of its name deleted), end group ``i``'s Job with
    ``bus[i]`` GB/s, wait for the Workflow to end ``outcome`` and for ``runs`` results in every
    node's record; the nodes of each group, by group name."""
    name = body["metadata"]["name"]
    run_again(kube, namespace, body)
    jobs = [f"{name}-group-{i}-iter-1" for i in range(len(bus))]
    wait_for(lambda: sorted(jobs_of(kube, namespace, name)) == jobs, 60, what=f"the Jobs of {name}")
    for job, value in zip(jobs, bus, strict=True):
        finish(kube, namespace, job)
        complete_bandwidth(kube, namespace, job, ["1.20", f"{value:.2f}"])
    ended = wait_true(kube, resources.Workflow, name, namespace, outcome, timeout=90)
    wait_for(
        lambda: all(result_count(kube, n) >= runs for n in nodes),
        60,
        what=f"{runs} results in the records of {nodes}",
    )
    return {g["name"]: g["nodes"] for g in ended["status"]["orchestration"]["groups"]}


def test_node_history_and_fleet_show_what_the_records_hold(
    kube: Client, namespace: str, gpu_nodes: Any, manager: ManagerProcess, control_plane: ControlPlane
) -> None:
    tag = pool_name()
    block = f"nn-{tag}"
    pool, nodes = new_pool(gpu_nodes, 6, product=H100, labels={FLEET: tag, AWS_BLOCK: block})
    [idle] = pool_nodes(gpu_nodes, 1, pool_name(), product=B200, labels={FLEET: tag})
    body = workflow(
        "hist",
        namespace,
        pool,
        2,
        job_spec={**BANDWIDTH, "thresholds": {"busBandwidthGBps": NCCL_OK}},
        orchestration={"isolation": "Off"},
        validation={"performance": {"enabled": True, "baselineResults": 1}},
    )
    first = run(kube, namespace, body, [480.0, 490.0, 485.0], "Succeeded", nodes, 1)
    assert run(kube, namespace, body, [470.0, 400.0, 198.3], "Failed", nodes, 2) == first  # the same groups
    groups = first
    config = control_plane.kubeconfig_path
    steady, slow, broken = groups["group-0"][0], groups["group-1"][0], groups["group-2"][0]

    # A passing node: two passes, the second 2.1 % below the first (470 / 480 - 1).
    done = nvcrectl(config, "node", "history", steady, "-o", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["node"], doc["state"]) == (steady, "certified")
    rows = doc["results"]
    assert [(r["category"], r["workflow"]["name"], r["run"]) for r in rows] == [
        ("workflow/hist", "hist", None)
    ] * 2
    assert [r["values"]["busBandwidthGBps"] for r in rows] == [480.0, 470.0]
    assert [r["verdict"] for r in rows] == ["Passed", "Passed"]
    assert [r["vsBaseline"] for r in rows] == [{}, {"busBandwidthGBps": -2.1}]
    assert rows[1]["baseline"] == {"busBandwidthGBps": {"value": 480.0, "results": 1}}
    assert [(r["group"], r["groupSize"], r["partners"]) for r in rows] == [
        ("group-0", 2, [n for n in groups["group-0"] if n != steady])
    ] * 2

    # A regressed node, as a person reads it: 400 against its baseline 490 is -18.4 %.
    done = nvcrectl(config, "node", "history", slow)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"Node:    {slow}", "State:   regressed"], done.stdout
    header, first, second = (line.split() for line in lines[3:6])
    assert (
        " ".join(header)
        == "TIME CATEGORY RUN GROUP PARTNERS BUSBW STEP-TIME GOODPUT VS-BASELINE VERDICT CAUSE"
    )
    partner = next(n for n in groups["group-1"] if n != slow)
    run_label = f"Workflow/{namespace}/hist"
    assert first[1:] == ["workflow/hist", run_label, "group-1", partner, "490", "-", "-", "-", "Passed", "-"]
    assert second[1:] == [
        "workflow/hist",
        run_label,
        "group-1",
        partner,
        "400",
        "-",
        "-",
        "-18.4%",
        "Failed",
        "Regression",
    ]
    assert lines[6:8] == ["", "Failures:"]
    assert lines[8:] == [f"  {second[0]}  busbw 400 GB/s, 18 % below this node's baseline 490 GB/s (1 run)"]

    # A node that violated its threshold: failing, 198.3 against 485 is -59.1 %.
    doc = json.loads(nvcrectl(config, "node", "history", broken, "-o", "json").stdout)
    last = doc["results"][-1]
    assert (doc["state"], last["verdict"], last["reason"], last["cause"]) == (
        "failing",
        "Failed",
        "ThresholdViolation",
        "ThresholdViolated",
    )
    assert last["vsBaseline"] == {"busBandwidthGBps": -59.1}
    assert (
        last["message"] == 'Threshold "busBandwidthGBps" violated: measured 198.3000, expression: value > 300'
    )

    # A GPU node that never ran has no record: one error line naming it.
    done = nvcrectl(config, "node", "history", idle)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f'Error: node "{idle}" has no NodeRecord: ')

    # The fleet of these seven nodes (-l: the cluster holds other tests' nodes and records).
    done = nvcrectl(config, "fleet", "-l", f"{FLEET}={tag}", "-o", "json")
    assert done.returncode == 0, done.stderr
    fleet = json.loads(done.stdout)
    states = {n["name"]: n["state"] for n in fleet["nodes"]}
    assert states == {
        **dict.fromkeys(groups["group-0"], "certified"),
        **dict.fromkeys(groups["group-1"], "regressed"),
        **dict.fromkeys(groups["group-2"], "failing"),
        idle: "never",
    }
    assert fleet["total"] == {
        "nodes": 7,
        "certified": 2,
        "failing": 2,
        "regressed": 2,
        "stale": 0,
        "never": 1,
    }
    zero = {"stale": 0}
    assert fleet["byDomain"] == [
        {"domain": block, "nodes": 6, "certified": 2, "failing": 2, "regressed": 2, **zero, "never": 0},
        {"domain": "unknown", "nodes": 1, "certified": 0, "failing": 0, "regressed": 0, **zero, "never": 1},
    ]
    assert fleet["byGpuType"] == [
        {"gpuType": B200, "nodes": 1, "certified": 0, "failing": 0, "regressed": 0, **zero, "never": 1},
        {"gpuType": H100, "nodes": 6, "certified": 2, "failing": 2, "regressed": 2, **zero, "never": 0},
    ]

    done = nvcrectl(config, "fleet", "-l", f"{FLEET}={tag}")
    assert done.returncode == 0, done.stderr
    blocks = [b.splitlines() for b in done.stdout.split("\n\n")]
    assert blocks[0] == [
        "7 nodes: 2 certified, 2 failing, 2 regressed, 0 stale, 1 never (stale: passed over 30 days ago)"
    ]
    assert [r.split() for r in blocks[1]] == [
        ["DOMAIN", "NODES", "CERTIFIED", "FAILING", "REGRESSED", "STALE", "NEVER"],
        [block, "6", "2", "2", "2", "0", "0"],
        ["unknown", "1", "0", "0", "0", "0", "1"],
    ]
    assert [r.split() for r in blocks[2]] == [
        ["GPU-TYPE", "NODES", "CERTIFIED", "FAILING", "REGRESSED", "STALE", "NEVER"],
        [B200, "1", "0", "0", "0", "0", "1"],
        [H100, "6", "2", "2", "2", "0", "0"],
    ]
    bad = sorted([*groups["group-1"], *groups["group-2"]])
    assert [r.split()[:4] for r in blocks[3]] == [["NODE", "STATE", "CAUSE", "CATEGORY"]] + [
        [
            n,
            "regressed" if n in groups["group-1"] else "failing",
            "Regression" if n in groups["group-1"] else "ThresholdViolated",
            "workflow/hist",
        ]
        for n in bad
    ]
