"""The objects behind the report goldens, made by nvcre's own code (not written by hand).

Each case plays a run through the pure functions the controllers call, in their order:
discovery and exclusions (``orchestration.discovery``/``capacity``), the Workflow
(``catalog.render_category`` / ``render.workloadrun.build_workflow``), partitioning, each Job's
outcome (``decide.job.next_step.follow``) and verdict (``measure.verdicts``), the
BandwidthMeasurement from the simulated accelerator's NCCL log read by the real parser
(``sandbox.simulate`` -> ``measure.nccl`` -> ``measure.nccl.transitions``), the failure
log (``controllers.job.failure_log``), the Workflow verdict (``orchestration.iterations``), the
node-result ConfigMaps (``orchestration.result_configmaps``) and the run's condition. What no pure function
produces is written in the shape the controllers write (the GoodputMeasurement status of
tests/integration/test_goodput_controller.py; the DiagnoseStatus, validated by its API model,
since diagnose mode is not run on main yet).

``python -m tests.golden.report_inputs`` is not needed: the golden test writes the inputs with
``NVCRE_UPDATE_GOLDEN=1`` and checks them against this module otherwise.
"""

from __future__ import annotations

import base64
import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre import failednodes
from nvcre.api.v1alpha1.certification import Certification
from nvcre.api.v1alpha1.constants import (
    API_VERSION,
    FAILED_NODES_KEY,
    MANAGED_BY_VALUE,
    SUCCEEDED_NODES_KEY,
    Annotation,
    ConditionType,
    Label,
    WorkflowReason,
)
from nvcre.api.v1alpha1.meta import format_time
from nvcre.api.v1alpha1.workflow import DiagnoseStatus
from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.catalog.render import render_category
from nvcre.controllers.job import failure_log
from nvcre.controllers.workloadrun import outcome
from nvcre.decide.job.next_step import Fail, Succeed, follow
from nvcre.fleet import records as fleet_records
from nvcre.measure import verdicts
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.lines import Tail
from nvcre.measure.nccl import Parser, final_reason, read
from nvcre.measure.nccl import transitions as bandwidth_transitions
from nvcre.measure.profile import compile_profile
from nvcre.naming import (
    bandwidth_measurement_name,
    failed_nodes_config_map_name,
    goodput_measurement_name,
    job_name,
    succeeded_nodes_config_map_name,
    trainjob_name,
    uses_single_job_name,
)
from nvcre.orchestration import diagnose as dg
from nvcre.orchestration import isolation
from nvcre.orchestration.capacity import Exclusions
from nvcre.orchestration.discovery import discover
from nvcre.orchestration.iterations import succeeded_nodes, verdict
from nvcre.orchestration.partition import partition
from nvcre.orchestration.result_configmaps import failed_entries, merge_failed, merge_succeeded
from nvcre.render.workloadrun.build import build_workflow
from nvcre.report.build import (
    CertificationObjects,
    WorkflowObjects,
    WorkloadRunObjects,
    certification_report,
    workloadrun_report,
)
from nvcre.report.model import Report
from nvcre.sandbox import Member, node_model, parse_faults, simulate
from nvcre.sandbox.simulate import cri_log
from nvcre.testing import diagnose as model
from nvcre.testing.nodes import platform_nodes

Obj = dict[str, Any]
START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
NAMESPACE = "nvcre"
H100 = "NVIDIA-H100-80GB-HBM3"


def at(seconds: float) -> str:
    return format_time(START + timedelta(seconds=seconds))


def _uid(name: str) -> str:
    digest = (name.encode().hex() + "0" * 32)[:32]
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _condition(kind: str, status: str, reason: str, message: str, when: float) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at(when),
    }


def nodes(
    count: int, *, platform: str = "aws", cordoned: Sequence[str] = (), domain_size: int | None = None
) -> list[Obj]:
    out = []
    for node in platform_nodes(count, platform, H100, domain_size=domain_size):
        data: Obj = node.to_dict()
        if data["metadata"]["name"] in cordoned:
            data.setdefault("spec", {})["unschedulable"] = True
        out.append(data)
    return out


# --- one group's Job and its measurements -----------------------------------------------------


@dataclass(frozen=True)
class GroupRun:
    """How one group's workload ends: ``faults`` for the simulated accelerator; ``bandwidth``
    False for a workload without NCCL log; ``finished`` False while it still runs."""

    faults: tuple[str, ...] = ()
    finished: bool = True
    goodput: Mapping[str, Any] | None = None


def _nccl_command(workflow: Obj) -> list[str]:
    trainer = workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    return [*trainer.get("command", []), *trainer.get("args", [])]


def _parser() -> Parser:
    profile = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth")
    return Parser(compile_profile(profile))


def _simulation(workflow: Obj, group_nodes: Sequence[str], faults: Sequence[str], platform: str) -> Any:
    members = [Member(n, node_model(n, H100, platform)) for n in group_nodes]
    return simulate(_nccl_command(workflow), members, parse_faults(faults), seed=1)


def _kubelet_lines(sim: Any) -> list[str]:
    """The log as the API server serves it with ``timestamps=true`` (what the controller reads):
    the CRI lines the sandbox's kwok serves, less their stream and tag."""
    out = []
    for line in cri_log(sim, START):
        stamp, _, rest = line.split(" ", 2)
        out.append(f"{stamp} {rest.split(' ', 1)[1] if ' ' in rest else ''}")
    return out


def _bandwidth(
    job: Obj, workflow: Obj, group_nodes: Sequence[str], run: GroupRun, platform: str, ended: float
) -> Obj:
    """The BandwidthMeasurement its controller writes: provisional from half the log while the
    Job runs, the final read of the complete log once it succeeded."""
    name = job["metadata"]["name"]
    sim = _simulation(workflow, group_nodes, run.faults, platform)
    lines = _kubelet_lines(sim)
    status: Obj = {}
    if run.finished:
        final = read(lines, _parser())
        reason, message = final_reason(final, f"pod {NAMESPACE}/{name}-workload-launcher-0-0")
        bandwidth_transitions.complete(reason, message, at(ended), final, START + timedelta(seconds=ended))(
            status
        )
    else:
        parser = _parser()
        half = read(lines[: len(lines) // 2], parser)
        bandwidth_transitions.running(half, None, START + timedelta(seconds=ended), parser.state())(status)
    spec = job["spec"]["bandwidthMeasurement"]
    extra = {k: v for k, v in spec.items() if k in ("sampleInterval", "testType", "expectedTransport")}
    return _measurement("BandwidthMeasurement", bandwidth_measurement_name(name), job, spec, extra, status)


def _measurement(kind: str, name: str, job: Obj, spec: Obj, extra: Obj, status: Obj) -> Obj:
    """A measurement as the Job controller creates it, with its ``status``."""
    job_name = job["metadata"]["name"]
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": _uid(name),
            "labels": {
                Label.MANAGED_BY: MANAGED_BY_VALUE,
                Label.JOB: job_name,
                Label.JOB_UID: job["metadata"]["uid"],
            },
        },
        "spec": {
            "jobRef": {"apiGroup": "nvcre.nvidia.com", "kind": "Job", "name": job_name},
            "logProfileRef": spec["logProfileRef"],
            **extra,
        },
        "status": status,
    }


def _goodput(job: Obj, values: Mapping[str, Any], ended: float) -> Obj:
    status = {
        **values,
        "startTime": at(30),
        "completionTime": at(ended),
        "conditions": [
            _condition("Measuring", "False", "JobSucceeded", "Job succeeded", ended),
            _condition("Complete", "True", "JobSucceeded", "Job succeeded", ended),
        ],
    }
    name = goodput_measurement_name(job["metadata"]["name"])
    return _measurement("GoodputMeasurement", name, job, job["spec"]["goodputMeasurement"], {}, status)


def _failed_pod(job: Obj, node: str, exit_code: int, reason: str) -> Obj:
    name = trainjob_name(job["metadata"]["name"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-launcher-0-0",
            "namespace": NAMESPACE,
            "labels": {Label.JOB: job["metadata"]["name"]},
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"name": "node", "state": {"terminated": {"exitCode": exit_code, "reason": reason}}}
            ],
        },
    }


@dataclass
class Played:
    group: Obj
    job: Obj
    bandwidth: Obj | None
    goodput: Obj | None
    failed_entries: list[dict[str, str]]


def _job_body(workflow: Obj, group: Obj, name: str) -> Obj:
    spec = copy.deepcopy(workflow["spec"]["jobTemplate"]["spec"])
    performance = ((workflow["spec"].get("validation") or {}).get("performance")) or {}
    thresholds = (performance.get("thresholds") or {}).get("thresholds")
    if thresholds:
        spec["thresholds"] = dict(thresholds)
    if performance.get("measurementTimeout"):
        spec["measurementTimeout"] = performance["measurementTimeout"]
    return {
        "apiVersion": API_VERSION,
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": _uid(name),
            "creationTimestamp": at(10),
            "labels": {
                Label.MANAGED_BY: MANAGED_BY_VALUE,
                Label.WORKFLOW: workflow["metadata"]["name"],
                Label.GROUP: group["name"],
            },
            "annotations": {Annotation.GROUP_NODES: ",".join(group["nodes"])},
        },
        "spec": spec,
        "status": {
            "workloadRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "TrainJob",
                "name": trainjob_name(name),
            }
        },
    }


def _trainjob(name: str, ended: float, succeeded: bool, message: str) -> Obj:
    kind, reason = ("Complete", "JobSetCompleted") if succeeded else ("Failed", "JobSetFailed")
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": trainjob_name(name), "namespace": NAMESPACE},
        "status": {"conditions": [_condition(kind, "True", reason, message, ended)]},
    }


def play_group(workflow: Obj, group: Obj, name: str, run: GroupRun, platform: str, ended: float) -> Played:
    """One group's Job from creation to its verdict, as the Job controller writes it."""
    job = _job_body(workflow, group, name)
    status = job["status"]
    status["workloadStartTime"] = at(20)
    group.update(phase="Running", jobRef={"name": name, "namespace": NAMESPACE}, startTime=at(10))
    if not run.finished:
        status["conditions"] = [
            _condition(
                "InProgress",
                "True",
                "WorkloadRunning",
                f"Workload TrainJob/{trainjob_name(name)} is running",
                20,
            )
        ]
        bandwidth = (
            _bandwidth(job, workflow, group["nodes"], run, platform, ended)
            if job["spec"].get("bandwidthMeasurement")
            else None
        )
        return Played(group, job, bandwidth, None, [])
    sim = (
        _simulation(workflow, group["nodes"], run.faults, platform)
        if job["spec"].get("bandwidthMeasurement")
        else None
    )
    crashed = sim is not None and sim.exit_code not in (0, None)
    trainjob = _trainjob(name, ended, not crashed, "jobset failed" if crashed else "jobset completed")
    decision = follow(job, trainjob, None, [], START + timedelta(seconds=ended))
    group["completionTime"] = at(ended)
    entries: list[dict[str, str]] = []
    bandwidth = goodput = None
    if isinstance(decision, Fail):
        status["conditions"] = [_condition("Failed", "True", decision.reason, decision.message, ended)]
        failed_host = sim.failed_hosts[0] if sim is not None and sim.failed_hosts else group["nodes"][0]
        pod = _failed_pod(job, failed_host, int(sim.exit_code or 1) if sim else 1, "Error")
        record, _, _ = failure_log.entry([pod])
        kept = Tail(failure_log.LOG_TAIL_BYTES)
        for line in sim.lines if sim else ():
            kept.add(line.text)
        tail = kept.text()
        status["failureLog"] = {**record, **({"tail": tail} if tail else {})}
        entries = [
            {"name": n, "reason": "WorkloadFailed", "message": decision.message} for n in group["nodes"]
        ]
        status["failedNodes"] = entries
        group["phase"] = "Failed"
        return Played(group, job, None, None, entries)
    assert isinstance(decision, Succeed)
    status["conditions"] = [_condition("Succeeded", "True", "WorkloadCompleted", decision.message, ended)]
    if job["spec"].get("bandwidthMeasurement"):
        bandwidth = _bandwidth(job, workflow, group["nodes"], run, platform, ended)
    if job["spec"].get("goodputMeasurement") and run.goodput is not None:
        goodput = _goodput(job, run.goodput, ended)
    judged = verdicts.judge(job, bandwidth, goodput, START + timedelta(seconds=ended + 1))
    if isinstance(judged, verdicts.Verdict):
        status["conditions"].append(
            _condition(
                "ValidationFailed",
                "True" if judged.failed else "False",
                judged.reason,
                judged.message,
                ended + 1,
            )
        )
        entries = verdicts.failed_nodes(job, judged) or []
        if entries:
            status["failedNodes"] = entries
        group["phase"] = "Failed" if judged.failed else "Succeeded"
    else:
        group["phase"] = "Succeeded"
    return Played(group, job, bandwidth, goodput, entries)


# --- a Workflow --------------------------------------------------------------------------------


def _config_map(name: str, key: str, payload: bytes, owner: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "Workflow",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "binaryData": {key: base64.b64encode(payload).decode()},
    }


def play_workflow(
    workflow: Obj,
    all_nodes: Sequence[Obj],
    nodes_per_job: int,
    runs: Mapping[str, GroupRun],
    *,
    platform: str = "aws",
    topology_key: str | None = None,
    duration: float = 600,
) -> Obj:
    """The Workflow's status and what it owns, after the groups ran (or while they run)."""
    meta = workflow["metadata"]
    meta.update(namespace=NAMESPACE, uid=_uid(meta["name"]), creationTimestamp=at(0))
    for key in (
        Annotation.DETECTED_GPU_ARCHITECTURE,
        Annotation.DETECTED_PLATFORM,
        Annotation.APPLIED_OVERRIDES,
    ):
        (meta.get("annotations") or {}).pop(key, None)
    if not meta.get("annotations"):
        meta.pop("annotations", None)
    target = workflow["spec"]["orchestration"].get("target")
    found = discover(all_nodes, target)
    exclusions = Exclusions(found.cordoned, [], "h100", [], 8)
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in found.nodes}
    groups = [
        {
            "name": g.name,
            "nodes": list(g.nodes),
            **({"domains": list(g.domains)} if g.domains else {}),
            **({"domainNodeCounts": dict(g.domain_node_counts)} if g.domain_node_counts else {}),
            **({"overflow": True} if g.overflow else {}),
            "phase": "Pending",
        }
        for g in partition(labels if topology_key else sorted(labels), nodes_per_job, topology_key)
    ]
    iterations = int(workflow["spec"]["orchestration"].get("iterations") or 1)
    single = uses_single_job_name(len(groups), iterations)
    played = [
        play_group(
            workflow,
            g,
            job_name(meta["name"], g["name"], 1, single=single),
            runs.get(g["name"], GroupRun()),
            platform,
            duration,
        )
        for g in groups
    ]
    orchestration: Obj = {
        "totalNodes": len(found.nodes),
        "nodesPerJob": nodes_per_job,
        "totalGroups": len(groups),
        "currentIteration": 1,
        "detectedPlatform": platform,
        "detectedGPUArchitecture": "h100",
        "groups": groups,
    }
    if exclusions.nodes:
        orchestration.update(excludedNodes=exclusions.nodes, exclusionReason=exclusions.reason)
    status: Obj = {"orchestration": orchestration}
    owned: Obj = {"jobs": [p.job for p in played]}
    owned["bandwidths"] = [p.bandwidth for p in played if p.bandwidth]
    owned["goodputs"] = [p.goodput for p in played if p.goodput]
    entries = [e for p in played for e in p.failed_entries]
    if entries:
        name = failed_nodes_config_map_name(meta["uid"])
        owned["failedNodes"] = _config_map(name, FAILED_NODES_KEY, merge_failed(None, entries), workflow)
        status["failedNodesRef"] = {"kind": "ConfigMap", "name": name}
    if all(g["phase"] in ("Succeeded", "Failed") for g in groups):
        done = verdict(groups, [], iterations, [p.job for p in played if p.group["phase"] == "Failed"])
        status["conditions"] = [_condition(done.cond_type, "True", done.reason, done.message, duration + 2)]
        if done.validation_failed:
            status["conditions"].append(
                _condition(ConditionType.VALIDATION_FAILED, "True", done.reason, done.message, duration + 2)
            )
        orchestration["completedIterations"] = 1
        ok = succeeded_nodes(groups, {e["name"] for e in entries})
        if ok:
            name = succeeded_nodes_config_map_name(meta["uid"])
            owned["succeededNodes"] = _config_map(
                name, SUCCEEDED_NODES_KEY, merge_succeeded(None, ok), workflow
            )
            status["succeededNodesRef"] = {"kind": "ConfigMap", "name": name}
    else:
        status["conditions"] = [_condition("InProgress", "True", "JobRunning", "Jobs are running", 20)]
    workflow["status"] = status
    return {"workflow": workflow, **owned}


# --- the cases ---------------------------------------------------------------------------------


def _certification(name: str, categories: list[Obj], **options: Any) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "Certification",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": _uid(name), "creationTimestamp": at(0)},
        "spec": {
            "target": {"nodeSelector": {"nvidia.com/gpu.product": H100}},
            "categories": categories,
            **options,
        },
    }


def _rendered(cert: Obj, index: int, all_nodes: Sequence[Obj]) -> Obj:
    eligible = discover(all_nodes, cert["spec"]["target"]).nodes
    workflow: Obj = render_category(Certification.model_validate(cert), index, eligible).workflow
    workflow["metadata"]["ownerReferences"] = [
        {
            "apiVersion": API_VERSION,
            "kind": "Certification",
            "name": cert["metadata"]["name"],
            "uid": cert["metadata"]["uid"],
            "controller": True,
        }
    ]
    return workflow


def certification_case(
    cert: Obj, all_nodes: Sequence[Obj], plays: Sequence[Callable[[Obj], Obj] | None]
) -> Obj:
    """The Certification as its controller leaves it after each category's Workflow (None: the
    category has not started)."""
    statuses = []
    workflows = []
    for index, (category, play) in enumerate(zip(cert["spec"]["categories"], plays, strict=True)):
        entry: Obj = {"domain": category["domain"], "variant": category["variant"], "status": "Pending"}
        if play is not None:
            objects = play(_rendered(cert, index, all_nodes))
            workflows.append(objects)
            wf = objects["workflow"]
            state = next(
                (c["type"] for c in wf["status"].get("conditions") or () if c["status"] == "True"),
                "InProgress",
            )
            entry.update(status=state, workflowRef={"name": wf["metadata"]["name"], "namespace": NAMESPACE})
            for ref in ("succeededNodesRef", "failedNodesRef"):
                if wf["status"].get(ref):
                    entry[ref] = wf["status"][ref]
        statuses.append(entry)
    if all(s["status"] in ("Succeeded", "Failed") for s in statuses):
        failed = any(s["status"] == "Failed" for s in statuses)
        condition = (
            _condition("Failed", "True", "WorkflowFailed", "One or more certification categories failed", 900)
            if failed
            else _condition(
                "Succeeded",
                "True",
                "AllWorkflowsSucceeded",
                "All certification categories completed successfully",
                900,
            )
        )
    else:
        condition = _condition("InProgress", "True", "WorkflowRunning", "Certification in progress", 20)
    cert["status"] = {"conditions": [condition], "categoryStatuses": statuses}
    return {"certification": cert, "workflows": workflows}


ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
LOOPBACK = {"domain": "communication", "variant": "nccl-loopback"}


def _all_reduce(threshold: str | None = None, nodes_per_job: int = 2) -> Obj:
    options: Obj = {"nodesPerJob": nodes_per_job}
    if threshold:
        options["thresholds"] = {"busBandwidthGBps": threshold}
    return {**ALL_REDUCE, "options": options}


def passing() -> Obj:
    fleet = nodes(4)
    cert = _certification("cert-pass", [_all_reduce("value >= 300")])
    return certification_case(cert, fleet, [lambda wf: play_workflow(wf, fleet, 2, {})])


def threshold_violation() -> Obj:
    fleet = nodes(4)
    cert = _certification("cert-threshold", [_all_reduce("value >= 400")])
    runs = {"group-1": GroupRun(faults=("gpu-node-003=slow-nic:0.4",))}
    return certification_case(cert, fleet, [lambda wf: play_workflow(wf, fleet, 2, runs)])


def execution_failure() -> Obj:
    fleet = nodes(2)
    cert = _certification("cert-crash", [_all_reduce(nodes_per_job=2)])
    runs = {"group-0": GroupRun(faults=("gpu-node-001=nccl-error",))}
    return certification_case(cert, fleet, [lambda wf: play_workflow(wf, fleet, 2, runs)])


def excluded_node() -> Obj:
    fleet = nodes(3, cordoned=("gpu-node-002",))
    cert = _certification("cert-cordoned", [_all_reduce()])
    return certification_case(cert, fleet, [lambda wf: play_workflow(wf, fleet, 2, {})])


def running() -> Obj:
    fleet = nodes(2)
    cert = _certification("cert-running", [_all_reduce(), LOOPBACK])
    runs = {"group-0": GroupRun(finished=False)}
    return certification_case(cert, fleet, [lambda wf: play_workflow(wf, fleet, 2, runs, duration=90), None])


GOODPUT = {
    "result": "0.912345",
    "avgTFLOPSPerGPU": "556.512000",
    "avgStepTimeSec": "4.781000",
    "trainingTimeSec": "540.000000",
    "lostWorkTimeSec": "0.000000",
    "interruptionCount": 0,
    "currentStep": 100,
    "highestStep": 100,
}


def workloadrun() -> Obj:
    fleet = nodes(4, platform="gcp", domain_size=2)
    run: Obj = {
        "apiVersion": API_VERSION,
        "kind": "WorkloadRun",
        "metadata": {
            "name": "wr-train",
            "namespace": NAMESPACE,
            "uid": _uid("wr-train"),
            "creationTimestamp": at(0),
        },
        "spec": {
            "image": "nvcr.io/nvidia/pytorch:26.01-py3",
            "numNodes": 2,
            "framework": {"torch": {"script": "train.py", "args": ["--steps", "100"]}},
            "target": {"nodeSelector": {"nvidia.com/gpu.product": H100}},
            "goodputMeasurement": {"logProfileRef": "megatron-training"},
            "thresholds": {"goodputRatio": "value >= 0.9"},
            "orchestration": {"testScale": "full-scale"},
        },
    }
    eligible = discover(fleet, run["spec"]["target"]).nodes
    rendered = build_workflow(WorkloadRun.model_validate(run), eligible, resolve=True)
    workflow: Obj = rendered.workflow
    workflow["metadata"]["ownerReferences"] = [
        {
            "apiVersion": API_VERSION,
            "kind": "WorkloadRun",
            "name": "wr-train",
            "uid": run["metadata"]["uid"],
            "controller": True,
        }
    ]
    key = "cloud.google.com/gce-topology-block"
    slow = {**GOODPUT, "result": "0.871000", "avgStepTimeSec": "5.120000"}
    objects = play_workflow(
        workflow,
        fleet,
        2,
        {"group-0": GroupRun(goodput=GOODPUT), "group-1": GroupRun(goodput=slow)},
        platform="gcp",
        topology_key=key,
    )
    wf = objects["workflow"]
    found = outcome(wf)
    assert found is not None
    kind, reason, message = found
    run["status"] = {
        "conditions": [_condition(kind, "True", reason, message, 605)],
        "workflowRef": {"name": wf["metadata"]["name"], "namespace": NAMESPACE},
        "detectedPlatform": rendered.platform,
        "detectedGPUArchitecture": rendered.gpu_architecture,
        **{
            ref: wf["status"][ref] for ref in ("succeededNodesRef", "failedNodesRef") if wf["status"].get(ref)
        },
    }
    return {"workloadRun": run, "workflow": objects}


GCP_BLOCK = "cloud.google.com/gce-topology-block"


def _diagnosed(objects: Obj, fleet: Sequence[Obj], faulty: set[str], config: dg.Settings) -> Obj:
    """The Workflow's diagnose status and verdict as the diagnose state machine leaves them for
    ``faulty`` nodes on ``fleet`` (its rounds played on the model fleet)."""
    domains: dict[str, list[str]] = {}
    for node in fleet:
        domains.setdefault(node["metadata"]["labels"][GCP_BLOCK], []).append(node["metadata"]["name"])
    done = model.run(model.Fleet(domains, faulty=faulty), config, topology_key=GCP_BLOCK, started=at(0))
    status = objects["workflow"]["status"]
    status["orchestration"]["diagnose"] = DiagnoseStatus.model_validate(done.status).to_dict()
    verdict_ = done.verdict
    reason = (
        WorkflowReason.JOB_COMPLETED
        if verdict_.succeeded
        else WorkflowReason.DIAGNOSE_LIMIT_REACHED
        if verdict_.limit_reached
        else WorkflowReason.ITERATIONS_FAILED
    )
    kind = ConditionType.SUCCEEDED if verdict_.succeeded else ConditionType.FAILED
    status["conditions"] = [_condition(kind, "True", reason, verdict_.message, 602)]
    # A diagnosis records the nodes it confirmed, not the failed rounds' groups.
    workflow, uid = objects["workflow"], objects["workflow"]["metadata"]["uid"]
    objects.pop("failedNodes", None)
    status.pop("failedNodesRef", None)
    if verdict_.failed:
        name = failed_nodes_config_map_name(uid)
        objects["failedNodes"] = _config_map(
            name, FAILED_NODES_KEY, merge_failed(None, verdict_.failed), workflow
        )
        status["failedNodesRef"] = {"kind": "ConfigMap", "name": name}
    name = succeeded_nodes_config_map_name(uid)
    objects["succeededNodes"] = _config_map(
        name, SUCCEEDED_NODES_KEY, merge_succeeded(None, verdict_.healthy), workflow
    )
    status["succeededNodesRef"] = {"kind": "ConfigMap", "name": name}
    return objects


def _diagnosis_case(name: str, config: dg.Settings) -> Obj:
    fleet = nodes(4, platform="gcp", domain_size=2)
    cert = _certification(name, [_all_reduce("value >= 300")])
    runs = {"group-1": GroupRun(faults=("gpu-node-003=slow-nic:0.4",))}

    def play(wf: Obj) -> Obj:
        objects = play_workflow(wf, fleet, 2, runs, platform="gcp", topology_key=GCP_BLOCK)
        return _diagnosed(objects, fleet, {"gpu-node-003"}, config)

    return certification_case(cert, fleet, [play])


def diagnosis() -> Obj:
    """A diagnose run that confirmed one faulty node."""
    return _diagnosis_case("cert-diagnose", dg.Settings())


def diagnosis_limit() -> Obj:
    """The same stopped by ``maxRounds: 1`` after screening, with its suspects."""
    return _diagnosis_case("cert-diagnose-limit", dg.Settings(max_rounds=1))


def _isolated(objects: Obj, runs: Mapping[str, GroupRun], platform: str = "aws") -> Obj:
    """The iteration's suspects re-tested as the Workflow controller does
    (:mod:`nvcre.orchestration.isolation`): the round played, the record and the status its
    outcome leaves."""
    workflow = objects["workflow"]
    status, uid = workflow["status"], workflow["metadata"]["uid"]
    groups = status["orchestration"]["groups"]
    played = {
        g["name"]: next(j for j in objects["jobs"] if j["metadata"]["name"] == g["jobRef"]["name"])
        for g in groups
    }
    for group in groups:
        entries = (played[group["name"]].get("status") or {}).get("failedNodes") or ()
        _, later = isolation.set_aside([failednodes.normalise(e) for e in entries])
        if later:
            group["suspects"] = later
    plan = isolation.plan(groups, {})
    saved = {"groups": copy.deepcopy(groups), "suspects": isolation.suspects(groups)}
    faults = tuple(f for run in runs.values() for f in run.faults)
    retests = []
    for group in plan.groups:
        name = job_name(workflow["metadata"]["name"], group["name"], 1, single=False)
        retests.append(play_group(workflow, group, name, GroupRun(faults=faults), platform, 1200))
    failures = {
        p.group["name"]: isolation.failure(p.job, p.group["suspect"])
        for p in retests
        if p.group["phase"] == "Failed"
    }
    outcome = isolation.decide(saved, [p.group for p in retests], failures)
    objects["jobs"] += [p.job for p in retests]
    objects["bandwidths"] += [p.bandwidth for p in retests if p.bandwidth]
    name = failed_nodes_config_map_name(uid)
    objects["failedNodes"] = _config_map(
        name, FAILED_NODES_KEY, merge_failed(None, list(outcome.failed)), workflow
    )
    failed = {e["name"] for e in outcome.failed}
    ok = [*succeeded_nodes(groups, failed), *outcome.cleared]
    name = succeeded_nodes_config_map_name(uid)
    objects["succeededNodes"] = _config_map(name, SUCCEEDED_NODES_KEY, merge_succeeded(None, ok), workflow)
    for group in groups:
        group.pop("suspects", None)
    status["orchestration"]["isolation"] = {
        "iteration": 1,
        "stage": "Complete",
        "suspects": saved["suspects"],
        "failedNodes": sorted(failed),
        "clearedNodes": list(outcome.cleared),
        "retests": [
            {
                "suspect": p.group["suspect"],
                "partners": p.group["nodes"][1:],
                "jobName": p.job["metadata"]["name"],
                "passed": p.group["phase"] == "Succeeded",
            }
            for p in retests
        ],
        "message": outcome.message,
    }
    for condition in status["conditions"]:
        condition["message"] = f"{condition['message']}; {outcome.message}"
    return objects


def isolation_case() -> Obj:
    """The threshold violation of ``threshold_violation`` with its pair isolated: the slow node
    fails again with a healthy partner, its partner passes."""
    fleet = nodes(4)
    cert = _certification("cert-isolation", [_all_reduce("value >= 400")])
    runs = {"group-1": GroupRun(faults=("gpu-node-003=slow-nic:0.4",))}
    return certification_case(cert, fleet, [lambda wf: _isolated(play_workflow(wf, fleet, 2, runs), runs)])


def node_records(runs: Sequence[tuple[Obj, float | None]]) -> list[Obj]:
    """Each node's NodeRecord as the manager leaves it after ``runs`` (oldest first): each
    ``certification_case``'s Workflows' results (``fleet.records.node_results``) folded in
    (``fleet.records.fold``) at its end, moved to ``days`` (negative: before START; None: where
    it ended)."""
    statuses: dict[str, Obj] = {}
    for case, days in runs:
        for objects in case["workflows"]:
            workflow = objects["workflow"]
            results = fleet_records.node_results(
                workflow,
                objects["jobs"],
                objects.get("bandwidths", []),
                objects.get("goodputs", []),
                failed_entries(objects.get("failedNodes")),
            )
            for node, result in results.items():
                if days is not None:
                    result["time"] = at(days * 86400)
                category = fleet_records.category_of(workflow)
                now = START + timedelta(days=days or 0)
                statuses[node] = fleet_records.fold(statuses.get(node), category, [result], now)
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "NodeRecord",
            "metadata": {"name": node, "labels": {Label.MANAGED_BY: MANAGED_BY_VALUE}},
            "spec": {"nodeName": node},
            "status": statuses[node],
        }
        for node in sorted(statuses)
    ]


def _own_job_uids(case: Obj) -> Obj:
    """Each Job of the case with a UID of its own, as the API server gives it, and its
    measurements labelled with it: :func:`_uid` keeps the first 16 characters of a name, which
    the Jobs of one Workflow share, and a record takes each node's values from its Job's
    measurements by that UID."""
    for objects in case["workflows"]:
        uids = {}
        for job in objects["jobs"]:
            job["metadata"]["uid"] = uids[job["metadata"]["name"]] = str(
                uuid.uuid5(uuid.NAMESPACE_URL, job["metadata"]["name"])
            )
        for measurement in [*objects.get("bandwidths", []), *objects.get("goodputs", [])]:
            labels = measurement["metadata"]["labels"]
            labels[Label.JOB_UID] = uids[labels[Label.JOB]]
    return case


def repeat_offenders() -> Obj:
    """The isolation case on five nodes, one cordoned, after three earlier runs of the same
    certification (each its own Certification): all passed 45 days before; the slow node failed
    with its partner 20 days before, and alone after isolation 6 days before. The records hold
    the earlier runs and this one: the slow node's third failure in 30 days, its last pass 45
    days old; the cordoned node, new to the fleet, has no record."""
    slow = {"group-1": GroupRun(faults=("gpu-node-003=slow-nic:0.4",))}

    def run(name: str, fleet: Sequence[Obj], play: Callable[[Obj], Obj]) -> Obj:
        cert = _certification(name, [_all_reduce("value >= 400")])
        return _own_job_uids(certification_case(cert, fleet, [play]))

    four = nodes(4)
    earlier = [
        (run("cert-0116", four, lambda wf: play_workflow(wf, four, 2, {})), -45),
        (run("cert-0210", four, lambda wf: play_workflow(wf, four, 2, slow)), -20),
        (run("cert-0224", four, lambda wf: _isolated(play_workflow(wf, four, 2, slow), slow)), -6),
    ]
    five = nodes(5, cordoned=("gpu-node-004",))
    case = run("cert-0302", five, lambda wf: _isolated(play_workflow(wf, five, 2, slow), slow))
    return {**case, "nodeRecords": node_records([*earlier, (case, None)])}


CASES: dict[str, Callable[[], Obj]] = {
    "isolation": isolation_case,
    "passing": passing,
    "threshold-violation": threshold_violation,
    "execution-failure": execution_failure,
    "excluded-node": excluded_node,
    "running": running,
    "workloadrun": workloadrun,
    "diagnosis": diagnosis,
    "diagnosis-limit": diagnosis_limit,
    "repeat-offenders": repeat_offenders,
}


READ_AT = START + timedelta(seconds=120)
"""When the objects are read: the end of a running category's runtime."""


def _workflow(data: dict[str, Any]) -> WorkflowObjects:
    return WorkflowObjects(
        workflow=data["workflow"],
        jobs=data.get("jobs", []),
        bandwidths=data.get("bandwidths", []),
        goodputs=data.get("goodputs", []),
        failed_nodes=data.get("failedNodes"),
        succeeded_nodes=data.get("succeededNodes"),
    )


def report_of(data: dict[str, Any]) -> Report:
    if "workloadRun" in data:
        workflow = _workflow(data["workflow"]) if data.get("workflow") else None
        return workloadrun_report(
            WorkloadRunObjects(data["workloadRun"], workflow, now=READ_AT, records=data.get("nodeRecords"))
        )
    workflows = [_workflow(w) for w in data["workflows"]]
    return certification_report(
        CertificationObjects(data["certification"], workflows, now=READ_AT, records=data.get("nodeRecords"))
    )
