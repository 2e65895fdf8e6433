"""The operator's workflow of issue 13 on a simulated cluster, with the real ``nvcrectl``:
``setup init`` on a cluster without nvcre, ``setup status`` all green, ``certification run
--wait`` of a two-category Certification on a fleet with one ``slow-nic`` node, ``setup reset``.

A cluster of this module's own, started without nvcre's CRDs or LogProfiles (an empty cluster as
setup meets one), with the sandbox's nodes (one ``slow-nic:0.3``: about 145 GB/s where its healthy
peers reach about 487) and its runner (the simulated accelerator). Trainer and JobSet already run
there as processes of the chain, with their webhooks, so init skips phase ``deps`` (installing
Trainer's chart is tests/integration/test_setup.py). The chart's manager Deployment becomes
Available on kwok nodes but executes nothing, so a real ``nvcre-manager`` is started as the
sandbox starts it, once init has installed the CRDs, and stopped before ``reset``.

The Certification: all-reduce in pairs held to ``busBandwidthGBps: value >= 300`` (fails the slow
node's pair only; isolation off, so both of its nodes are named) and the NVLink loopback on every node (a slow NIC does not touch NVLink: passes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation
from nvcre.sandbox.supervisor import Options, create_nodes, runner_argv, sandbox_nodes, wait_runner_ready
from nvcre.testing.cluster import EmptyCluster
from nvcre.testing.inspect import get, jobs_of
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.processes import Process, wait_until

NVCRECTL = str(Path(sys.executable).with_name("nvcrectl"))
SLOW = "gpu-node-005"
OPTIONS = Options(nodes=8, faults=[f"{SLOW}=slow-nic:0.3"])
NAMESPACE = "operator-cert"
THRESHOLD = "value >= 300"  # between the slow pair's ~145 GB/s and the healthy ~487 GB/s
SIZING = {"numIterations": 20, "numCycles": 1}  # the catalog's 10 x 100 runs minutes of simulated time
CERTIFICATION = {
    "apiVersion": "nvcre.nvidia.com/v1alpha1",
    "kind": "Certification",
    "metadata": {"name": "operator", "namespace": NAMESPACE},
    "spec": {
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "categories": [
            {
                "domain": "communication",
                "variant": "nccl-all-reduce",
                # isolation off: the pair is named whole, as the reference does (isolation on a
                # Certification is tests/sandbox/test_certification_verdicts.py)
                "options": {
                    "nodesPerJob": 2,
                    **SIZING,
                    "thresholds": {"busBandwidthGBps": THRESHOLD},
                    "isolation": "Off",
                },
            },
            {"domain": "communication", "variant": "nccl-loopback-nvswitch", "options": SIZING},
        ],
    },
}


def nvcrectl(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NVCRECTL, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=900, check=False
    )


def slow_pair(kube: Client, cert: dict[str, Any]) -> tuple[list[str], float]:
    """The all-reduce group holding the slow node and its bus bandwidth, as nvcre measured it
    (the largest final busBW of its BandwidthMeasurement, spec/measurements.md 4.1)."""
    (category,) = [c for c in cert["status"]["categoryStatuses"] if c["variant"] == "nccl-all-reduce"]
    jobs = jobs_of(kube, NAMESPACE, category["workflowRef"]["name"])
    groups = {j: job["metadata"]["annotations"][Annotation.GROUP_NODES].split(",") for j, job in jobs.items()}
    (job,) = [j for j, nodes in groups.items() if SLOW in nodes]
    measurement = get(kube, resources.BandwidthMeasurement, f"{job}-bandwidth", NAMESPACE)
    return sorted(groups[job]), max(float(r["busBW"]) for r in measurement["status"]["results"])


def nvcre_left(kube: Client) -> list[str]:
    """Every object of nvcre's still in the cluster (CRDs, cluster RBAC, the manager Deployment)."""
    found = [
        f"crd/{c.metadata.name}"
        for c in kube.list(CustomResourceDefinition)
        if c.spec.group == "nvcre.nvidia.com"
    ]
    for kind in (ClusterRole, ClusterRoleBinding):
        found += [
            f"{kind.__name__}/{r.metadata.name}"
            for r in kube.list(kind)
            if r.metadata.name.startswith("nvcre")
        ]
    found += [
        f"deployment/{d.metadata.name}"
        for d in kube.list(Deployment, namespace="*")
        if d.metadata.name.startswith("nvcre")
    ]
    return found


def test_setup_certify_a_slow_nic_fleet_then_reset(
    empty_cluster: EmptyCluster,
) -> None:
    cluster, env, work = empty_cluster.cluster, empty_cluster.env, empty_cluster.work
    cp = cluster.control_plane
    (work / "cert.yaml").write_text(yaml.safe_dump(CERTIFICATION))
    manager = ManagerProcess(cp, work, name="nvcre-manager")
    runner = Process("runner", runner_argv(cluster, work, OPTIONS), work / "runner.log")
    with cp.client() as kube:
        try:
            create_nodes(kube, sandbox_nodes(OPTIONS), OPTIONS)
            runner.start()
            wait_runner_ready(runner, work)
            assert nvcre_left(kube) == []

            init = nvcrectl(env, work, "setup", "init", "--auto-approve", "--skip-phases=deps")
            assert init.returncode == 0, init.stderr
            assert "[deps] Skipped." in init.stderr
            status = nvcrectl(env, work, "setup", "status", "-o", "json")
            assert status.returncode == 0, status.stderr
            report = json.loads(status.stdout)
            assert report["installed"] is True
            # dcgm (DCGM's exporter on the GPU nodes) is not part of what setup installs
            assert all(ok for key, ok in report["components"].items() if key != "dcgm"), report
            assert "Status: ready" in nvcrectl(env, work, "setup", "status").stdout
            manager.start()

            run = nvcrectl(
                env, work, "certification", "run", "--wait", "--results-file", "r.json",
                "--junit-file", "j.xml", "cert.yaml",
            )  # fmt: skip
            assert run.returncode == 1, run.stdout + run.stderr
            assert run.stderr.rstrip().endswith("Error: certification failed"), run.stderr

            results = json.loads((work / "r.json").read_text())
            assert results["result"] == "FAILED"
            statuses = {c["variant"]: c["status"] for c in results["categories"]}
            assert statuses == {"nccl-all-reduce": "Failed", "nccl-loopback-nvswitch": "Succeeded"}, results
            nodes, value = slow_pair(kube, get(kube, resources.Certification, "operator", NAMESPACE))
            assert value < 300.0, value
            message = f'Threshold "busBandwidthGBps" violated: measured {value:.4f}, expression: {THRESHOLD}'
            (category,) = [c for c in results["categories"] if c["status"] == "Failed"]
            (group,) = category["failedGroups"]
            assert (sorted(group["nodes"]), group["reason"]) == (nodes, message), group
            in_group = sorted((n["name"], n["reason"], n["measured"]) for n in group["failedNodes"])
            assert in_group == [(n, "ThresholdViolation", f"busbw {value:.1f} GB/s < 300") for n in nodes], (
                group
            )
            failed = sorted((n["name"], n["reason"], n["message"]) for n in results["failedNodes"])
            assert failed == [(n, "ThresholdViolation", message) for n in nodes], results["failedNodes"]
            print(f"\nfailed group {group['name']}: {nodes}, measured {value:.4f} GB/s; JSON: {group}")

            cases = list(ET.fromstring((work / "j.xml").read_text()).iter("testcase"))
            assert len(cases) == 2
            assert [c.get("name") for c in cases if c.find("failure") is not None] == [
                "communication/nccl-all-reduce"
            ], (work / "j.xml").read_text()

            # reset refuses while a Certification would be orphaned: the operator deletes it first
            kube.delete(Namespace, NAMESPACE)
            wait_until(lambda: NAMESPACE not in {n.metadata.name for n in kube.list(Namespace)}, timeout=120,
                       what=f"namespace {NAMESPACE} deleted")  # fmt: skip
        finally:
            manager.stop()
            runner.stop()
        # and the nodes' records, which keep their history until a person deletes them
        assert len(list(kube.list(resources.NodeRecord))) == OPTIONS.nodes
        kube.deletecollection(resources.NodeRecord)
        reset = nvcrectl(env, work, "setup", "reset", "--auto-approve", "--skip-phases=deps")
        assert reset.returncode == 0, reset.stdout + reset.stderr
        assert nvcre_left(kube) == []
        after = json.loads(nvcrectl(env, work, "setup", "status", "-o", "json").stdout)
        assert {r["name"]: r["state"] for r in after["helmReleases"]}["nvcre"] == "not installed"
