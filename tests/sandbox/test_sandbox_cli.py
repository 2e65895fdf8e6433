"""``nvcrectl sandbox up|status|down`` as a user runs it, and WorkloadRuns on its nodes.

Two sandboxes, one after the other (a class each):

* 8 simulated aws H100 nodes, ``nccl-error`` on one (``python -m nvcre.sandbox``, as tests run
  it). ``up`` returns with everything running detached; kubectl (the one built with the control
  plane) reads its nodes through the printed kubeconfig. examples/workloadrun/basic.yaml with
  ``numNodes: 2`` then runs the whole real way: four TrainJobs, the runner feeds each launcher
  the nccl-tests log the simulated accelerator computes, the faulty node's group fails and nvcre
  names that node and its partner; deleting the WorkloadRun removes everything through the
  garbage collector.
* 16 nodes as docs/sandbox.md starts them (``nvcrectl sandbox up --nodes 16``), ``xid:79`` on one:
  kubectl lists the 16 nodes, a WorkloadRun on that node's pair sees ``HardwareFailed`` through
  the NVSentinel node-health expression, then a component is killed, ``down`` runs and nothing is
  left: a process of a recorded group, a process naming the state directory, a listening port the
  sandbox had.

``up`` interrupted by Ctrl-C half-way leaves nothing either.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.resources.batch_v1 import Job as BatchJob
from lightkube.resources.core_v1 import ConfigMap, Node, Pod

from nvcre import resources
from nvcre.api.v1alpha1.constants import (
    SUCCEEDED_NODES_KEY,
    Annotation,
    ConditionType,
    Default,
    FailedNodeReason,
    JobReason,
    WorkflowReason,
)
from nvcre.naming import succeeded_nodes_config_map_name
from nvcre.orchestration.result_configmaps import decode_succeeded
from nvcre.sandbox.faults import HEALTH_CONDITION
from nvcre.sandbox.state import group_alive, listening_sockets
from nvcre.testing import binaries as bins
from nvcre.testing.cluster import JobSet
from nvcre.testing.history import follow
from nvcre.testing.inspect import get, jobs_of, pinned_hosts, wait_true
from nvcre.testing.kwok import pod_log
from nvcre.testing.processes import alive
from nvcre.testing.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workloadrun" / "basic.yaml"
NODES = 8
FAULTY = "gpu-node-005"
GANG_PARTNER = "gpu-node-004"
GROUP_SIZE = 2
BIG = 16
XID_NODE = "gpu-node-010"
XID_PARTNER = "gpu-node-011"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
PYTHON_M = (sys.executable, "-m", "nvcre.sandbox")
NVCRECTL = (str(Path(sys.executable).with_name("nvcrectl")), "sandbox")


def sandbox(
    *args: str, cli: Sequence[str] = PYTHON_M, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"sandbox {' '.join(args)} exited {result.returncode}:\n{result.stderr}{result.stdout}"
        )
    return result


@dataclass
class Sandbox:
    state_dir: Path
    up_output: str
    kubeconfig: Path
    record: dict[str, Any]

    def client(self) -> Client:
        return Client(KubeConfig.from_file(self.kubeconfig))


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _sandbox(tmp_path_factory: pytest.TempPathFactory, cli: Sequence[str], *args: str) -> Iterator[Sandbox]:
    bins.ensure((*bins.REQUIRED, bins.KUBECTL, *bins.CHAIN))
    state_dir = tmp_path_factory.mktemp("sandbox") / "state"
    try:  # down also when up itself is interrupted: it may have started the supervisor
        result = sandbox("up", *args, f"--state-dir={state_dir}", cli=cli)
        (kubeconfig,) = re.findall(r"^kubeconfig: (\S+)$", result.stdout, re.M)
        record = json.loads((state_dir / "sandbox.json").read_text())
        yield Sandbox(state_dir, result.stdout, Path(kubeconfig), record)
    finally:
        sandbox("down", f"--state-dir={state_dir}", cli=cli, check=False)


def _kubectl() -> Path:
    return bins.ensure([bins.KUBECTL], build_missing=False).path(bins.KUBECTL)


def _basic(kube: Client, **spec: Any) -> tuple[str, str]:
    """examples/workloadrun/basic.yaml in ``default`` with ``numNodes: 2`` and ``spec`` set."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"].update(numNodes=GROUP_SIZE, **spec)
    document["metadata"]["namespace"] = namespace = "default"
    kube.create(resources.WorkloadRun.from_dict(document))
    return namespace, str(document["metadata"]["name"])


@dataclass
class Seen:
    """The last version of every object of some kinds in a namespace, deleted ones included,
    recorded by a watch from before the workload starts (pods of a failed group are gone by the
    time it fails)."""

    kube: Callable[[], Client]
    namespace: str
    kinds: dict[str, Any]
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Seen:
        for kind, resource in self.kinds.items():
            ready = threading.Event()
            thread = threading.Thread(
                target=follow,
                args=(self.kube, resource, self._observer(kind), self._stop, ready),
                kwargs={"namespace": self.namespace},
                daemon=True,
            )
            thread.start()
            if not ready.wait(timeout=30):
                raise AssertionError(f"the watch of {kind} did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _observer(self, kind: str) -> Callable[[str, dict[str, Any]], None]:
        def observe(event: str, obj: dict[str, Any]) -> None:
            with self._lock:
                self.objects.setdefault(kind, {})[obj["metadata"]["uid"]] = obj

        return observe

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.objects.get(kind, {}).values())


def _controller(obj: dict[str, Any]) -> tuple[str, str]:
    (ref,) = [r for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")]
    return ref["kind"], ref["name"]


def _left(kube: Client, namespace: str) -> dict[str, list[str]]:
    kinds = {
        "Workflow": resources.Workflow, "Job": resources.Job, "TrainJob": resources.TrainJob,
        "JobSet": JobSet, "batch Job": BatchJob, "Pod": Pod,
    }  # fmt: skip
    left = {
        kind: [str(o.metadata.name) for o in kube.list(resource, namespace=namespace) if o.metadata]
        for kind, resource in kinds.items()
    }
    return {kind: names for kind, names in left.items() if names}


@pytest.fixture(scope="class")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    yield from _sandbox(
        tmp_path_factory, PYTHON_M,
        f"--nodes={NODES}", "--platform=aws", "--gpu=NVIDIA-H100-80GB-HBM3", "--domain-size=4",
        f"--fault={FAULTY}=nccl-error",
    )  # fmt: skip


@pytest.fixture(scope="class")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """As docs/sandbox.md starts one, with nvcrectl."""
    yield from _sandbox(
        tmp_path_factory, NVCRECTL,
        f"--nodes={BIG}", "--platform", "aws", "--gpu", "NVIDIA-H100-80GB-HBM3", "--domain-size", "8",
        "--fault", f"{XID_NODE}=xid:79",
    )  # fmt: skip


class TestEightNodesOneNcclError:
    def test_up_returns_with_the_components_running_detached(self, box: Sandbox) -> None:
        names = {c["name"] for c in box.record["components"]}
        assert names == {
            "etcd", "kube-apiserver", "kwok", "kube-controller-manager", "kube-scheduler",
            "jobset-controller", "trainer-controller-manager", "nvcre-manager", "runner",
        }  # fmt: skip
        for component in box.record["components"]:
            assert alive(component["pid"]), component
            assert os.getpgid(component["pid"]) == component["pid"], "each leads a process group"
            pid_file = box.state_dir / f"{component['name']}.pid"
            assert pid_file.read_text().strip() == str(component["pid"])
        assert re.search(r"sandbox ready in \d+\.\d+s", box.up_output)

    def test_kubectl_get_nodes_shows_the_gpu_labels(self, box: Sandbox) -> None:
        kubectl = _kubectl()
        assert str(kubectl) in box.up_output, "up prints how to use kubectl"
        out = subprocess.run(
            [str(kubectl), "--kubeconfig", str(box.kubeconfig), "get", "nodes", "-o", "json"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        nodes = json.loads(out)["items"]
        assert len(nodes) == NODES
        for node in nodes:
            labels = node["metadata"]["labels"]
            assert labels["nvidia.com/gpu.present"] == "true"
            assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
            assert labels["nvidia.com/gpu.count"] == "8"
            assert node["spec"]["providerID"].startswith("aws:///")
            assert node["status"]["allocatable"]["vpc.amazonaws.com/efa"] == "32"
        blocks = {n["metadata"]["labels"]["topology.k8s.aws/network-node-layer-1"] for n in nodes}
        assert len(blocks) == NODES // 4, "--domain-size 4"

    def test_status_lists_the_components_and_the_faulty_node(self, box: Sandbox) -> None:
        out = sandbox("status", f"--state-dir={box.state_dir}").stdout
        assert "running" in out.splitlines()[0]
        for component in box.record["components"]:
            line = rf"^\s+{component['name']}\s+pid {component['pid']}\s+running"
            assert re.search(line, out, re.M), out
        assert re.search(rf"^\s+{FAULTY}\s+Ready=True\s+{FAULTY}=nccl-error$", out, re.M), out

    def test_a_second_up_is_refused_while_one_runs(self, box: Sandbox) -> None:
        result = sandbox("up", "--nodes=8", f"--state-dir={box.state_dir}", check=False)
        assert result.returncode != 0
        assert "already running" in result.stderr
        assert f"down --state-dir {box.state_dir}" in result.stderr
        assert all(alive(c["pid"]) for c in box.record["components"]), "the running one is untouched"

    def test_basic_workloadrun_runs_and_the_faulty_group_is_named(self, box: Sandbox) -> None:
        kube = box.client()
        kinds = {"TrainJob": resources.TrainJob, "JobSet": JobSet, "batch Job": BatchJob, "Pod": Pod}
        with Seen(box.client, "default", kinds) as seen:
            namespace, name = _workload_fails(kube)
        run = get(kube, resources.WorkloadRun, name, namespace)
        workflow = run["status"]["workflowRef"]["name"]
        jobs = jobs_of(kube, namespace, workflow)
        assert len(jobs) == NODES // GROUP_SIZE, "four groups, four nvcre Jobs"
        groups = {
            j: job["metadata"]["annotations"][Annotation.GROUP_NODES].split(",") for j, job in jobs.items()
        }
        assert sorted(n for g in groups.values() for n in g) == [f"gpu-node-{i:03d}" for i in range(NODES)]

        (faulty,) = [j for j, nodes in groups.items() if FAULTY in nodes]
        group = groups[faulty]
        faulty_job = jobs[faulty]
        assert {n["name"]: n["reason"] for n in faulty_job["status"]["failedNodes"]} == {
            node: FailedNodeReason.WORKLOAD_FAILED for node in group
        }, "with isolation off, nvcre names the faulty node and its partner"
        for other in set(jobs) - {faulty}:
            assert not jobs[other]["status"].get("failedNodes"), jobs[other]["status"]
        tail = faulty_job["status"]["failureLog"]["tail"]
        assert "NCCL" in tail and re.search(r"error", tail, re.I), tail
        (host,) = {
            p["spec"]["hostname"]
            for p in seen.of("Pod")
            if p["spec"].get("nodeName") == FAULTY and p["metadata"]["labels"][REPLICATED_JOB] == "node"
        }
        assert re.search(rf"^{re.escape(host)}: Test NCCL failure", tail, re.M), "it names the node's host"
        assert "# Collective test starting: all_reduce_perf_mpi" in tail, "the launcher's log, read by nvcre"

        uid = get(kube, resources.Workflow, workflow, namespace)["metadata"]["uid"]
        config_map = kube.get(ConfigMap, succeeded_nodes_config_map_name(uid), namespace=namespace)
        payload = base64.b64decode((config_map.binaryData or {})[SUCCEEDED_NODES_KEY])
        succeeded = decode_succeeded(payload)
        assert sorted(succeeded) == sorted(
            f"gpu-node-{i:03d}" for i in range(NODES) if f"gpu-node-{i:03d}" not in group
        )

        _made_by_the_real_controllers(seen, jobs, groups)
        (trainjob,) = [t for t in seen.of("TrainJob") if _controller(t) == ("Job", faulty)]
        tried = [
            p
            for p in seen.of("Pod")
            if p["metadata"]["labels"][JOBSET_NAME] == trainjob["metadata"]["name"]
            and p["metadata"]["labels"][REPLICATED_JOB] == "launcher"
        ]
        assert len(tried) == 1, "mpirun ran once: its first failure failed the group"
        _launcher_logs_name_their_hosts(kube, namespace, seen)

        kube.delete(resources.WorkloadRun, name, namespace=namespace)
        wait_for(
            lambda: not _left(kube, namespace), 180,
            what="the garbage collector to remove the Workflow, Jobs, TrainJobs, JobSets, batch Jobs, pods",
        )  # fmt: skip

    def test_under_a_gang_scheduler_a_failed_mpirun_still_fails_its_group_at_once(self, box: Sandbox) -> None:
        """Under a gang scheduler the launcher Job may start again while its workers are slow to
        start (backoffLimit 6), yet mpirun's own failure fails it through the podFailurePolicy:
        one launcher pod, the Job failed by the policy, the group failed."""
        kube = box.client()
        with Seen(box.client, "default", {"batch Job": BatchJob, "Pod": Pod}) as seen:
            namespace, name = _basic(
                kube,
                gangScheduler={"schedulerName": "kai-scheduler"},
                target={"nodeNames": [GANG_PARTNER, FAULTY]},
                orchestration={"isolation": "Off"},
            )
            wait_true(kube, resources.WorkloadRun, name, namespace, "Failed", timeout=300)
        (launcher,) = [
            b for b in seen.of("batch Job") if b["metadata"]["labels"][REPLICATED_JOB] == "launcher"
        ]
        assert launcher["spec"]["backoffLimit"] == 6
        failed = [c for c in launcher["status"].get("conditions") or () if c["type"] == "Failed"]
        assert [(c["status"], c["reason"]) for c in failed] == [("True", "PodFailurePolicy")], launcher[
            "status"
        ]
        tried = [p for p in seen.of("Pod") if p["metadata"]["labels"][REPLICATED_JOB] == "launcher"]
        assert [p["spec"]["schedulerName"] for p in tried] == ["kai-scheduler"], "mpirun ran once"
        kube.delete(resources.WorkloadRun, name, namespace=namespace)
        wait_for(lambda: not _left(kube, namespace), 180, what="the run's objects removed")


def _workload_fails(kube: Client) -> tuple[str, str]:
    # isolation off: this is the run as the reference makes it (tests/sandbox/test_behaviours.py
    # has the isolation round on the real chain)
    namespace, name = _basic(kube, orchestration={"isolation": "Off"})
    # The launcher's batch Job runs mpirun once (backoffLimit 0): a failed group ends at once.
    wait_true(kube, resources.WorkloadRun, name, namespace, "Failed", timeout=300)
    return namespace, name


def _made_by_the_real_controllers(
    seen: Seen, jobs: dict[str, dict[str, Any]], groups: dict[str, list[str]]
) -> None:
    """Four TrainJobs (one per nvcre Job), each with Trainer's JobSet, JobSet's batch Jobs and the
    Job controller's pods, every pod bound by kube-scheduler to a node of its group."""
    trainjobs = {t["metadata"]["name"]: t for t in seen.of("TrainJob")}
    assert {_controller(t) for t in trainjobs.values()} == {("Job", j) for j in jobs}
    jobsets = {s["metadata"]["name"]: s for s in seen.of("JobSet")}
    assert {n: _controller(s) for n, s in jobsets.items()} == {n: ("TrainJob", n) for n in trainjobs}
    batch_jobs = {b["metadata"]["name"]: b for b in seen.of("batch Job")}
    for b in batch_jobs.values():
        assert _controller(b)[0] == "JobSet" and _controller(b)[1] in jobsets, b["metadata"]["name"]
    made = {(_controller(b)[1], b["metadata"]["labels"][REPLICATED_JOB]) for b in batch_jobs.values()}
    assert made == {(s, rj) for s in jobsets for rj in ("launcher", "node")}
    owner_job = {t: _controller(trainjob)[1] for t, trainjob in trainjobs.items()}
    pods = [p for p in seen.of("Pod") if p["spec"].get("nodeName")]
    assert {p["metadata"]["labels"][JOBSET_NAME] for p in pods} == set(jobsets)
    for pod in pods:
        kind, batch_job = _controller(pod)
        assert kind == "Job" and batch_job in batch_jobs, pod["metadata"]["name"]
        group = groups[owner_job[pod["metadata"]["labels"][JOBSET_NAME]]]
        assert pinned_hosts(pod) == set(group), "nvcre's Pinned hostname affinity reached the pod"
        assert pod["spec"]["nodeName"] in group, pod["metadata"]["name"]
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        scheduled = [c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"]
        assert [c["status"] for c in scheduled] == ["True"], "bound by kube-scheduler"


def _launcher_logs_name_their_hosts(kube: Client, namespace: str, seen: Seen) -> None:
    """The succeeded launchers' logs: nccl-tests tables naming the hosts (the ended run's pods
    are gone, released, so they are the pods the watch saw and the logs kwok served them from;
    the failed launcher's log is the failure log)."""
    launchers = [
        p
        for p in seen.of("Pod")
        if p["metadata"]["labels"].get(REPLICATED_JOB) == "launcher"
        and (p.get("status") or {}).get("phase") == "Succeeded"
    ]
    assert len(launchers) == NODES // GROUP_SIZE - 1
    for launcher in launchers:
        jobset = launcher["metadata"]["labels"][JOBSET_NAME]
        hosts = {  # the workers are gone with their Job once the JobSet completed
            p["spec"].get("hostname")
            for p in seen.of("Pod")
            if p["metadata"]["labels"].get(JOBSET_NAME) == jobset
            and p["metadata"]["labels"][REPLICATED_JOB] == "node"
        }
        log = "".join(pod_log(kube, namespace, launcher["metadata"]["name"]))
        assert "# Collective test starting: all_reduce_perf_mpi" in log
        ranks = set(re.findall(r"^#\s+Rank\s+\d+ Group\s+\d+ Pid\s+\d+ on (\S+) device", log, re.M))
        assert ranks == hosts and len(ranks) == GROUP_SIZE, "the nccl-tests table names the group's hosts"
        assert "# Avg bus bandwidth" in log


class TestSixteenNodesAsTheDocsShow:
    def test_kubectl_get_nodes_with_the_printed_kubeconfig_lists_them(self, big: Sandbox) -> None:
        assert re.search(
            rf"^sandbox ready in \d+\.\d+s: {BIG} NVIDIA-H100-80GB-HBM3 nodes \(aws\)$", big.up_output, re.M
        )
        (printed,) = [line.split() for line in big.up_output.splitlines() if " get nodes " in line]
        kubectl = _kubectl()
        assert printed == [
            str(kubectl),
            "--kubeconfig",
            str(big.kubeconfig),
            "get",
            "nodes",
            "-L",
            "nvidia.com/gpu.product",
        ]
        out = subprocess.run(printed, capture_output=True, text=True, check=True).stdout
        header, *rows = [line.split() for line in out.splitlines()]
        assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPU.PRODUCT"]
        assert [r[0] for r in rows] == [f"gpu-node-{i:03d}" for i in range(BIG)]
        assert {(r[1], r[-1]) for r in rows} == {("Ready", "NVIDIA-H100-80GB-HBM3")}

    def test_an_xid_mid_run_is_a_hardware_failure_named_on_its_job(self, big: Sandbox) -> None:
        """What the xid fault writes (as NVSentinel, gpud and a quarantine taint would) on an
        uncordoned node is seen by the default node-health expression; no override is needed."""
        kube = big.client()
        before = kube.get(Node, XID_NODE).to_dict()
        assert HEALTH_CONDITION not in {c["type"] for c in before["status"]["conditions"]}
        assert not before["spec"].get("unschedulable")
        namespace, name = _basic(kube, target={"nodeNames": [XID_NODE, XID_PARTNER]})
        wait_true(kube, resources.WorkloadRun, name, namespace, "Failed", timeout=300)
        workflow = get(kube, resources.WorkloadRun, name, namespace)["status"]["workflowRef"]["name"]
        (job,) = jobs_of(kube, namespace, workflow).values()
        assert job["spec"]["nodeHealthMonitor"]["cel"]["expression"] == Default.NODE_HEALTH_EXPRESSION
        (hardware,) = [c for c in job["status"]["conditions"] if c["type"] == ConditionType.HARDWARE_FAILED]
        assert (hardware["status"], hardware["reason"]) == ("True", JobReason.HARDWARE_FAILURE_DETECTED)
        assert hardware["message"] == f"Hardware failure detected on node(s): [{XID_NODE}]"
        failed = {(n["name"], n["reason"]) for n in job["status"]["failedNodes"]}
        assert (XID_NODE, FailedNodeReason.HARDWARE_FAILURE_DETECTED) in failed
        assert (XID_PARTNER, FailedNodeReason.HARDWARE_FAILURE_DETECTED) not in failed
        # mid-run: the runner writes the agent's condition only while the group's workload runs
        (condition,) = [
            c
            for c in kube.get(Node, XID_NODE).to_dict()["status"]["conditions"]
            if c["type"] == HEALTH_CONDITION
        ]
        assert (condition["status"], condition["reason"]) == ("False", "XID79")
        assert condition["lastTransitionTime"] >= job["status"]["workloadStartTime"]
        workflow_failed = get(kube, resources.Workflow, workflow, namespace)
        assert any(
            c["type"] == "Failed"
            and c["status"] == "True"
            and c["reason"] == WorkflowReason.JOB_HARDWARE_FAILED
            for c in workflow_failed["status"]["conditions"]
        ), workflow_failed["status"]["conditions"]

    def test_down_after_a_killed_component_leaves_no_process_and_no_port(self, big: Sandbox) -> None:
        groups = [c["pid"] for c in big.record["components"]] + [big.record["supervisor"]]
        ports = set(big.record["ports"])
        assert ports, "up recorded the ports the sandbox listens on"
        assert ports <= {port for port, _ in listening_sockets()}
        scheduler = next(c for c in big.record["components"] if c["name"] == "kube-scheduler")
        os.kill(scheduler["pid"], signal.SIGKILL)
        wait_for(lambda: not alive(scheduler["pid"]), 30, what="kube-scheduler killed")
        out = sandbox("status", f"--state-dir={big.state_dir}", cli=NVCRECTL).stdout
        assert re.search(r"^\s+kube-scheduler\s+pid \d+\s+NOT running", out, re.M), out

        sandbox("down", f"--state-dir={big.state_dir}", cli=NVCRECTL)
        assert [g for g in groups if group_alive(g)] == []
        assert processes_naming(str(big.state_dir)) == []
        assert ports & {port for port, _ in listening_sockets()} == set()
        assert not big.state_dir.exists()


def test_ctrl_c_during_up_leaves_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    up = subprocess.Popen(
        [*PYTHON_M, "up", "--nodes=2", f"--state-dir={state_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    apiserver_log = state_dir / "cluster" / "kube-apiserver.log"
    wait_for(apiserver_log.exists, 120, what="up half-way: kube-apiserver started")
    up.send_signal(signal.SIGINT)
    _, stderr = up.communicate(timeout=120)
    assert up.returncode != 0
    assert "stopping what was started" in stderr
    assert processes_naming(str(state_dir)) == []
    assert not state_dir.exists()
