"""Fault specs: the parser (with Hypothesis), the registry and each kind's effect on a Node."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvcre.health.nodes import unhealthy_nodes
from nvcre.sandbox import FaultSpecError, apply_node_change, initial_node_change, parse_fault
from nvcre.sandbox.faults import (
    HEALTH_CONDITION,
    HEALTH_LABEL,
    HEALTH_TAINT,
    KINDS,
    Fault,
    FaultKind,
    link_factor,
    node_change,
    parse_delay,
    register,
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gpu-node-003=slow-nic:0.5", Fault("slow-nic", "gpu-node-003", 0.5)),
        ("n1=slow-nvlink:0.25", Fault("slow-nvlink", "n1", 0.25)),
        ("n1=slow-gpu:2", Fault("slow-gpu", "n1", 2.0)),
        ("n1=nccl-error", Fault("nccl-error", "n1")),
        ("n1=hang@1m30s", Fault("hang", "n1", delay_s=90.0)),
        ("gpu-node-003=xid:79@30s", Fault("xid", "gpu-node-003", 79.0, delay_s=30.0)),
        ("n1=not-ready@2m", Fault("not-ready", "n1", delay_s=120.0)),
        ("n1=missing-gpus:2", Fault("missing-gpus", "n1", 2.0)),
        ("link:n1,n2:0.1", Fault("link", "n1", 0.1, peer="n2")),
        ("link:clique-a,clique-b:0.5@10", Fault("link", "clique-a", 0.5, peer="clique-b", delay_s=10.0)),
        ("n1=flaky:0.3", Fault("flaky", "n1", 0.3)),
        ("n1=corrupt", Fault("corrupt", "n1")),
        ("n1=corrupt:1000@20s", Fault("corrupt", "n1", 1000.0, delay_s=20.0)),
        ("n1=tcp-fallback", Fault("tcp-fallback", "n1")),
        ("n1=truncate", Fault("truncate", "n1")),
        ("n1=truncate:512M", Fault("truncate", "n1", float(512 << 20))),
        ("n1=no-log", Fault("no-log", "n1")),
    ],
)
def test_every_kind_parses(spec: str, expected: Fault) -> None:
    assert parse_fault(spec) == expected


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("slow-nic:0.5", "NODE=KIND"),
        ("n1=fast-nic:0.5", "unknown fault kind 'fast-nic'"),
        ("n1=slow-nic", "needs a fraction"),
        ("n1=slow-nic:1.5", "'1.5' must be a fraction"),
        ("n1=slow-nic:abc", "'abc' is not a fraction"),
        ("n1=slow-gpu:0.5", "factor >= 1"),
        ("n1=hang:3", "takes no argument"),
        ("n1=xid:seventy", "whole number"),
        ("n1=missing-gpus:0", "whole number >= 1"),
        ("n1=flaky:2", "probability"),
        ("n1=corrupt:0", "whole number >= 1"),
        ("n1=truncate:1X", "'1X' is not a size"),
        ("n1=tcp-fallback:1", "takes no argument"),
        ("n1=no-log:1", "takes no argument"),
        ("Node_1=hang", "node 'Node_1'"),
        ("n1=hang@soon", "delay 'soon'"),
        ("link:n1:0.5", "link:<A>,<B>:<fraction>"),
        ("link:n1,n1:0.5", "two different ends"),
        ("link:n1,n2:7", "'7' must be a fraction"),
        ("n1=link:n2:0.5", "unknown fault kind 'link'"),
    ],
)
def test_bad_specs_name_the_part_that_is_wrong(spec: str, names: str) -> None:
    with pytest.raises(FaultSpecError, match=names.replace("(", r"\(").replace("[", r"\[")):
        parse_fault(spec)


node_names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
faults = st.one_of(
    st.builds(
        Fault,
        kind=st.sampled_from(["slow-nic", "slow-nvlink"]),
        node=node_names,
        value=st.floats(0.01, 1.0).map(lambda v: round(v, 3)),
        delay_s=st.integers(0, 7200).map(float),
    ),
    st.builds(Fault, kind=st.sampled_from(["nccl-error", "hang", "not-ready"]), node=node_names),
    st.builds(Fault, kind=st.just("xid"), node=node_names, value=st.integers(1, 999).map(float)),
    st.builds(
        lambda a, b, v: Fault("link", a, v, peer=b + "x"),
        node_names,
        node_names,
        st.floats(0.01, 1.0).map(lambda v: round(v, 3)),
    ),
)


@given(faults)
def test_a_fault_written_out_parses_back(fault: Fault) -> None:
    assert parse_fault(str(fault)) == fault


@given(st.text(max_size=40))
def test_any_text_parses_or_fails_with_a_spec_error(text: str) -> None:
    try:
        fault = parse_fault(text)
    except FaultSpecError as err:
        assert str(err)
    else:
        assert fault.kind in KINDS


@pytest.mark.parametrize(
    ("text", "seconds"), [("45", 45.0), ("45s", 45.0), ("2m", 120.0), ("1h2m3s", 3723.0)]
)
def test_delays(text: str, seconds: float) -> None:
    assert parse_delay(text) == seconds


def test_kinds_are_registered_once_with_their_hooks() -> None:
    expected = {"slow-nic", "slow-nvlink", "slow-gpu", "nccl-error", "hang", "xid", "not-ready", "corrupt"}
    assert expected | {"missing-gpus", "link", "flaky", "tcp-fallback", "truncate", "no-log"} == set(KINDS)
    with pytest.raises(ValueError, match="already registered"):
        register(FaultKind("hang", "", "again", lambda arg: None))
    assert KINDS["slow-nic"].network(parse_fault("n=slow-nic:0.3")) == 0.3
    assert KINDS["slow-gpu"].step_time(parse_fault("n=slow-gpu:1.5")) == 1.5


NODE: dict[str, Any] = {
    "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.present": "true"}},
    "spec": {},
    "status": {
        "capacity": {"nvidia.com/gpu": "8", "cpu": "192"},
        "allocatable": {"nvidia.com/gpu": "8", "cpu": "192"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
    },
}


def test_xid_writes_what_health_agents_write() -> None:
    change = node_change([parse_fault("n1=xid:79@30s")], "n1")
    node = apply_node_change(NODE, change, now="2026-01-01T00:00:30Z")
    assert node["metadata"]["labels"][HEALTH_LABEL] == "true"
    assert node["spec"]["taints"] == [{"key": HEALTH_TAINT, "value": "xid-79", "effect": "NoSchedule"}]
    conditions = {c["type"]: c for c in node["status"]["conditions"]}
    assert conditions[HEALTH_CONDITION]["status"] == "False"
    assert "GPU has fallen off the bus" in conditions[HEALTH_CONDITION]["message"]
    assert conditions["Ready"]["status"] == "True"
    assert NODE["spec"] == {}  # the input is not modified


def test_not_ready_replaces_the_ready_condition() -> None:
    node = apply_node_change(NODE, node_change([parse_fault("n1=not-ready")], "n1"), now="t")
    (ready,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")


def test_missing_gpus_lowers_capacity_allocatable_and_the_count_label_from_creation() -> None:
    faults = [parse_fault("n1=missing-gpus:2"), parse_fault("n2=missing-gpus:1")]
    assert initial_node_change(faults, "n1").missing_gpus == 2
    node = apply_node_change(NODE, initial_node_change(faults, "n1"), now="t")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "6"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "6"
    assert node["metadata"]["labels"]["nvidia.com/gpu.count"] == "6"
    assert initial_node_change([parse_fault("n1=xid:79")], "n1").conditions == ()  # xid comes mid-run


def test_link_faults_match_nodes_or_domains_on_both_sides() -> None:
    fault = [parse_fault("link:clique-a,n9:0.25")]
    assert link_factor(fault, [("n1", "clique-a"), ("n9", "clique-b")], 0.0) == 0.25
    assert link_factor(fault, [("n1", "clique-a"), ("n2", "clique-a")], 0.0) == 1.0
    assert link_factor([parse_fault("link:n1,n9:0.25@60")], [("n1", None), ("n9", None)], 30.0) == 1.0


@pytest.mark.parametrize(
    "expression",
    [
        "node.status.conditions.exists(c, c.type == 'NVSentinelGPUHealthy' && c.status == 'False')",
        "node.spec.taints.exists(t, t.key == 'gpu.health/error' && t.effect == 'NoSchedule')",
        "'gpud.nvidia.com/unhealthy' in node.metadata.labels",
    ],
)
def test_the_documented_node_health_expressions_see_an_xid(expression: str) -> None:
    """nvcre's own node-health check finds the node an xid fault marked, and only that one."""
    marked = apply_node_change(NODE, node_change([parse_fault("n1=xid:79")], "n1"), now="t")
    healthy = {**NODE, "metadata": {**NODE["metadata"], "name": "n2"}, "spec": {"taints": []}}
    assert unhealthy_nodes(expression, [marked, healthy]).failing == ["n1"]


def test_the_not_ready_expression_sees_a_not_ready_node() -> None:
    marked = apply_node_change(NODE, node_change([parse_fault("n1=not-ready")], "n1"), now="t")
    expression = "node.status.conditions.exists(c, c.type == 'Ready' && c.status != 'True')"
    assert unhealthy_nodes(expression, [marked, NODE]).failing == ["n1"]
