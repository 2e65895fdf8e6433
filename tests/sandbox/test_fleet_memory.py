"""Fleet memory on the simulated cluster: three certifications of the same 8-node fleet in a row
(the seed example, examples/certification/fleet-nccl.yaml, with ``baselineResults: 2``), each
deleted before the next (its nodes' records stay).

The first two pass on a healthy fleet and make each node's baseline. Before the third,
``nvcrectl sandbox fault add gpu-node-003=slow-nic:0.85`` slows one NIC: its pair still meets the
absolute floor (``value >= 400``: about 414 GB/s where healthy pairs reach about 487), but falls
about 15 % below both members' baselines. Both members regress; their isolation re-tests with
healthy partners name gpu-node-003 alone, ``ThresholdViolation`` with cause ``Regression``.

Then each node's NodeRecord holds three results with the values its pairs measured; ``nvcrectl
node history gpu-node-003 -o json`` shows its three; ``nvcrectl fleet`` counts seven nodes
certified and one regressed; ``kubectl get`` of the records and of the Certification shows their
columns.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation
from nvcre.sandbox import control
from nvcre.sandbox.control import Started as Box
from nvcre.sandbox.supervisor import Options
from nvcre.testing.inspect import (
    failed_nodes_record,
    get,
    jobs_of,
    kubectl_get,
    wait_ended,
    wait_true,
)
from nvcre.testing.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "certification" / "fleet-nccl.yaml"
NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
NODES = 8
NAMES = [f"gpu-node-{i:03d}" for i in range(NODES)]
SLOW, SLOWER = "gpu-node-003", 0.85
CATEGORY = "communication/nccl-all-reduce"
REGRESSION = re.compile(
    r"^busbw (?P<value>\d+) GB/s, (?P<percent>\d+) % below this node's baseline (?P<base>\d+) GB/s \(2 runs\)$"
)


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    options = Options(nodes=NODES, platform="aws", product="NVIDIA-H100-80GB-HBM3")
    with control.started(tmp_path_factory.mktemp("sandbox"), options) as box:
        yield box


def nvcrectl(box: Box, *args: str) -> str:
    """``nvcrectl ARGS`` as a user runs it against the sandbox: its output (it must pass)."""
    result = subprocess.run(
        [NVCRECTL, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": box.kubeconfig},
    )
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def certify(box: Box) -> dict[str, Any]:
    """The seed example with ``baselineResults: 2``, created and waited for until it ended."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"]["baselineResults"] = 2
    name, namespace = document["metadata"]["name"], document["metadata"]["namespace"]
    box.kube.create(resources.Certification.from_dict(document))
    return wait_ended(box.kube, resources.Certification, name, namespace, timeout=900)


def pairs_of(box: Box, cert: dict[str, Any]) -> dict[tuple[str, ...], float]:
    """The iteration's pairs (not isolation re-tests) -> their bus bandwidth."""
    namespace = cert["metadata"]["namespace"]
    [category] = cert["status"]["categoryStatuses"]
    out = {}
    for job_name, job in jobs_of(box.kube, namespace, category["workflowRef"]["name"]).items():
        if "isolate" in job["metadata"]["labels"].get("nvcre.nvidia.com/group", ""):
            continue
        nodes = tuple(sorted(job["metadata"]["annotations"][Annotation.GROUP_NODES].split(",")))
        measurement = get(box.kube, resources.BandwidthMeasurement, f"{job_name}-bandwidth", namespace)
        out[nodes] = max(float(r["busBW"]) for r in measurement["status"]["results"])
    return out


def delete_certification(box: Box, cert: dict[str, Any]) -> None:
    name, namespace = cert["metadata"]["name"], cert["metadata"]["namespace"]
    box.kube.delete(resources.Certification, name, namespace=namespace)
    wait_for(
        lambda: (
            name not in {c.metadata.name for c in box.kube.list(resources.Certification, namespace=namespace)}
        ),
        120,
        what=f"Certification {name} gone",
    )


def results_of(box: Box, node: str) -> list[dict[str, Any]]:
    record = box.kube.get(resources.NodeRecord, node).to_dict()
    [history] = record["status"]["categories"]
    assert history["name"] == CATEGORY
    return list(history["results"])


def test_three_certifications_and_a_nic_slower_than_its_own_past(box: Box) -> None:
    box.kube.create(Namespace(metadata=ObjectMeta(name="nvcre")))
    runs: list[dict[tuple[str, ...], float]] = []
    for run in range(3):
        if run == 2:
            added = nvcrectl(
                box, "sandbox", "fault", "add", f"{SLOW}=slow-nic:{SLOWER}", f"--state-dir={box.state.path}"
            )
            assert added.startswith(f"added {SLOW}=slow-nic:{SLOWER}"), added
        cert = certify(box)
        runs.append(pairs_of(box, cert))
        ended = "Failed" if run == 2 else "Succeeded"
        wait_true(box.kube, resources.Certification, "fleet-nccl", "nvcre", ended, timeout=60)
        wait_for(
            lambda run=run: all(len(results_of(box, n)) == run + 1 for n in NAMES), 60, what="the records"
        )
        if run < 2:
            delete_certification(box, cert)
    assert runs[0].keys() == runs[1].keys() == runs[2].keys(), "the same pairs every time"
    (slow_pair,) = [p for p in runs[2] if SLOW in p]
    (partner,) = [n for n in slow_pair if n != SLOW]
    for pair, bus in runs[2].items():
        ratio = bus / ((runs[0][pair] + runs[1][pair]) / 2)
        if pair == slow_pair:
            assert SLOWER - 0.05 <= ratio <= SLOWER + 0.05, runs
            assert bus >= 400.0, "the slow pair still meets the absolute floor"
        else:
            assert 0.95 <= ratio <= 1.05, runs

    # The failed-nodes record names the slow node alone, as a regression against its own past.
    cert = get(box.kube, resources.Certification, "fleet-nccl", "nvcre")
    [category] = cert["status"]["categoryStatuses"]
    workflow = get(box.kube, resources.Workflow, category["workflowRef"]["name"], "nvcre")
    [entry] = failed_nodes_record(box.kube, "nvcre", workflow["status"]["failedNodesRef"]["name"])
    assert (entry["name"], entry["reason"], entry["cause"]) == (SLOW, "ThresholdViolation", "Regression")
    assert workflow["status"]["orchestration"]["isolation"]["clearedNodes"] == [partner]

    # Each record: three results with the values its pairs measured; the third fails gpu-node-003.
    for node in NAMES:
        results = results_of(box, node)
        assert len(results) == 3, node
        (pair,) = [p for p in runs[0] if node in p]
        for run, result in enumerate(results[:2]):
            assert (result["verdict"], result["values"]["busBandwidthGBps"]) == ("Passed", runs[run][pair])
            assert result["run"]["name"] == "fleet-nccl" and result["groupSize"] == 2
            # the image its pods ran, by the digest kwok's kubelet stand-in reports for it
            assert result["images"] and all(i["imageID"] == f"kwok://{i['image']}" for i in result["images"])
        third = results[2]
        if node != SLOW:
            assert third["verdict"] == "Passed", (node, third)
            continue
        assert (third["verdict"], third["reason"], third["cause"]) == (
            "Failed",
            "ThresholdViolation",
            "Regression",
        )
        base = sorted([results[0]["values"]["busBandwidthGBps"], results[1]["values"]["busBandwidthGBps"]])
        median = sum(base) / 2
        said = REGRESSION.match(third["message"].split(" failed: ", 1)[1].split(" (re-tested", 1)[0])
        assert said, third["message"]
        value = third["values"]["busBandwidthGBps"]  # its re-test's, with a healthy partner
        assert (int(said["value"]), int(said["base"])) == (round(value), round(median)), third["message"]
        assert int(said["percent"]) == round((1 - value / median) * 100) >= 10, third["message"]

    # What a person sees: kubectl get, node history, fleet.
    table = kubectl_get(box.kube, resources.NodeRecord)
    assert table[SLOW]["LAST"] == "Failed" and table[SLOW]["VS-BASELINE"] <= -10.0, table[SLOW]
    assert all(table[n]["LAST"] == "Passed" for n in NAMES if n != SLOW), table
    certifications = kubectl_get(box.kube, resources.Certification, "nvcre")
    assert certifications["fleet-nccl"]["STATUS"] == "Failed", certifications
    history = json.loads(nvcrectl(box, "node", "history", SLOW, "-o", "json"))
    assert (history["node"], history["state"]) == (SLOW, "regressed")
    assert [(r["verdict"], r["cause"], r["values"]["busBandwidthGBps"]) for r in history["results"]] == [
        (r["verdict"], r.get("cause"), r["values"]["busBandwidthGBps"]) for r in results_of(box, SLOW)
    ]
    assert history["summary"]["busBandwidthVsBaseline"] == table[SLOW]["VS-BASELINE"]
    fleet = json.loads(nvcrectl(box, "fleet", "-o", "json"))
    counts = {"nodes": 8, "certified": 7, "failing": 0, "regressed": 1, "stale": 0, "never": 0}
    assert fleet["total"] == counts, fleet["total"]
    assert [dict(g, gpuType=None) for g in fleet["byGpuType"]] == [dict(counts, gpuType=None)]
    assert {n["name"]: n["state"] for n in fleet["nodes"]} == {
        n: "regressed" if n == SLOW else "certified" for n in NAMES
    }
    print(nvcrectl(box, "node", "history", SLOW), nvcrectl(box, "fleet"), sep="\n")
