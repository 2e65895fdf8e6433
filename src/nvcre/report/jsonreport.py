"""The JSON report (``--results-file``, ``-o json``) with the field names of cli.md 4.5.

Empty optional fields are left out; ``failedNodes`` is ``null`` when no node failed.
"""

from __future__ import annotations

from typing import Any

from nvcre.report.history import NodeHistory
from nvcre.report.model import CategoryReport, Diagnosis, FailedGroup, NodeFinding, Report


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v not in (None, "", [], {})}


def _finding(finding: NodeFinding) -> dict[str, Any]:
    return _compact(
        {
            "name": finding.node,
            "group": finding.group,
            "reason": finding.reason,
            "cause": finding.cause,
            "measured": finding.detail,
            "message": finding.message,
        }
    )


def _group(group: FailedGroup) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": group.name,
        "nodeCount": len(group.nodes),
        "nodes": list(group.nodes),
        "reason": group.reason,
    }
    if group.findings:
        data["failedNodes"] = [_finding(f) for f in group.findings]
    if group.failure_log is not None:
        log = group.failure_log
        data["failureLog"] = _compact(
            {
                "podName": log.pod,
                "nodeName": log.node,
                "exitCode": log.exit_code,
                "reason": log.reason,
                "tail": log.tail,
            }
        )
    return data


def _diagnosis(diagnosis: Diagnosis) -> dict[str, Any]:
    return _compact(
        {
            "stage": diagnosis.stage,
            "rounds": diagnosis.rounds,
            "outcome": diagnosis.outcome,
            "limitReached": diagnosis.limit,
            "healthyNodes": list(diagnosis.healthy),
            "suspectNodes": list(diagnosis.suspect),
            "faultyNodes": {domain: list(nodes) for domain, nodes in diagnosis.faulty_by_domain},
            "infrastructureFaults": list(diagnosis.infra),
            "maxBandwidth": diagnosis.max_bw,
            "minBandwidth": diagnosis.min_bw,
            "testResults": [
                {"stage": s.stage, "passed": list(s.passed), "failed": list(s.failed)}
                for s in diagnosis.test_results
            ],
            "transientFailures": [
                {"round": t.round, "group": t.group, "nodes": list(t.nodes), "stage": t.stage}
                for t in diagnosis.transient
            ],
        }
    )


def _category(category: CategoryReport) -> dict[str, Any]:
    data = {
        "domain": category.domain,
        "variant": category.variant,
        "status": category.status,
        "failureReason": category.reason,
        "runtime": category.runtime,
        "iterations": [
            _compact({"iteration": i.number, "status": i.state, "runtime": i.runtime})
            for i in category.iterations
        ],
        "testScale": category.scale,
        "nodesPerJob": category.nodes_per_job,
        "jobs": category.jobs,
        "placement": category.placement,
        "mnnvl": category.mnnvl,
        "excludedNodes": list(category.excluded_nodes),
        "failedGroups": [_group(g) for g in category.failed_groups],
        "cliques": [
            _compact(
                {
                    "name": c.name,
                    "validatedNodes": c.validated,
                    "totalNodes": c.total,
                    "passed": c.passed,
                    "busBandwidth": c.bus_bandwidth,
                    "transport": list(c.transport),
                }
            )
            for c in category.cliques
        ],
        "diagnosis": _diagnosis(category.diagnosis) if category.diagnosis else None,
        "domainMetrics": [
            _compact(
                {
                    "domain": m.name,
                    "nodeCount": m.node_count,
                    "avgGoodput": m.goodput,
                    "avgTFLOPsPerGPU": m.tflops_per_gpu,
                    "avgStepTimeSec": m.step_time_sec,
                    "interruptionCount": m.interruptions,
                    "lostWorkTimeSec": m.lost_work_sec,
                    "provisional": m.provisional or None,
                }
            )
            for m in category.metrics
        ],
        "bandwidthByGroup": [
            _compact(
                {
                    "group": g.group,
                    "passed": g.passed if g.finished else None,
                    "busBandwidth": g.bus_bandwidth,
                    "low": g.low or None,
                    "provisional": g.provisional or None,
                    "transport": list(g.transport),
                    "failedNodes": list(g.failed_nodes),
                }
            )
            for g in category.bandwidth_groups
        ],
        "transport": list(category.transport),
        "bandwidth": [
            {"sizeBytes": r.size_bytes, "algBW": r.alg_bw, "busBW": r.bus_bw, "samples": r.samples}
            for r in category.bandwidth
        ],
        "bandwidthProvisional": category.bandwidth_provisional or None,
        "provenance": _compact(
            {
                "specDigest": category.spec_digest,
                "images": [
                    _compact({"image": i.image, "imageIDs": list(i.image_ids), "mismatch": i.mismatch})
                    for i in category.images
                ],
            }
        ),
    }
    return _compact(data)


def _history(history: NodeHistory) -> dict[str, Any]:
    return _compact(
        {
            "repeatFailures": [
                {"name": r.node, "failures": r.failures, "windowDays": r.days}
                for r in history.repeat_failures
            ],
            "notCertified": [
                _compact({"name": u.node, "lastPassTime": u.last_pass, "daysSincePass": u.days})
                for u in history.not_certified
            ],
            "staleAfterDays": history.stale_after_days,
        }
    )


def to_json(report: Report) -> dict[str, Any]:
    data: dict[str, Any] = _compact(
        {
            "kind": report.kind,
            "name": report.name,
            "namespace": report.namespace,
            "platform": report.platform,
            "gpu": report.gpu,
        }
    )
    data["totalNodes"] = report.total_nodes
    if report.excluded_nodes:
        data["excludedNodes"] = list(report.excluded_nodes)
        data["exclusionReason"] = report.exclusion_reason
    data["categories"] = [_category(c) for c in report.categories]
    if report.nodes:
        data["nodes"] = [
            _compact({"name": n.name, "group": n.group, "rack": n.rack, "status": n.status})
            for n in report.nodes
        ]
    data["failedNodes"] = [_finding(f) for f in report.failed_nodes] or None
    if report.history is not None:
        data["nodeHistory"] = _history(report.history)
    if report.release is not None:
        release = report.release
        data["resourcesReleased"] = {
            "released": release.released,
            "reason": release.reason,
            "message": release.message,
        }
    if report.stopped is not None:
        data["stopped"] = {"reason": report.stopped.reason, "message": report.stopped.message}
    data["result"] = report.result
    return data
