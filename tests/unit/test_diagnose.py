"""The diagnose state machine (nvcre.orchestration.diagnose), run against the model fleet of
nvcre.testing.diagnose."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nvcre.orchestration import diagnose as dg
from nvcre.orchestration.completion import may_be_transient
from nvcre.testing.diagnose import Fleet, fleet_of, run, run_linked


def failed_names(verdict: dg.Verdict) -> list[str]:
    return sorted(e["name"] for e in verdict.failed)


def test_one_slow_node_in_four_domains_of_eight() -> None:
    fleet = fleet_of([8, 8, 8, 8])
    fleet.faulty = {"node-013"}
    result = run(fleet)
    assert failed_names(result.verdict) == ["node-013"]
    assert sorted(result.verdict.healthy) == sorted(set(fleet.labels) - {"node-013"})
    assert result.verdict.message == "Diagnosis complete: 1 faulty nodes confirmed"
    assert not result.verdict.succeeded
    assert [s for s, _ in result.rounds] == [
        "intra-screening",
        "inter-screening",
        "bisection",
        "bisection",
        "confirmation",
    ]
    assert len(result.rounds) <= 2 + math.ceil(math.log2(8)) + 1
    assert result.status["faultyNodes"] == ["node-013"]
    assert result.status["outcome"] == "Faulty"
    assert result.status["stage"] == "complete"
    assert result.status["round"] == 5


def test_round_names_and_groups() -> None:
    fleet = fleet_of([8, 8, 8])
    fleet.faulty = {"node-002"}
    result = run(fleet)
    names = [[g.name for g in groups] for _, groups in result.rounds]
    assert names == [
        ["screen-0", "screen-1", "screen-2"],
        ["inter-domain"],
        ["bisect-3-0a", "bisect-3-0b"],
        ["bisect-4-0a", "bisect-4-0b"],
        ["confirm-0", "confirm-1"],
    ]
    screen, inter = result.rounds[0][1], result.rounds[1][1][0]
    assert [g.domains for g in screen] == [("block-0",), ("block-1",), ("block-2",)]
    # the first node of each domain that passed
    assert (inter.nodes, inter.domains) == (("node-008", "node-016"), ("block-1", "block-2"))
    confirm = result.rounds[4][1]
    # the suspects node-002, node-003, each with a healthy node of its own domain
    assert [g.nodes[0] for g in confirm] == ["node-002", "node-003"]
    assert all(fleet.domain(g.nodes[1]) == "block-0" and g.nodes[1] not in fleet.faulty for g in confirm)


def test_two_faulty_nodes_in_different_domains() -> None:
    fleet = fleet_of([8, 8, 8, 8])
    fleet.faulty = {"node-003", "node-030"}
    result = run(fleet)
    assert failed_names(result.verdict) == ["node-003", "node-030"]
    assert result.verdict.message == "Diagnosis complete: 2 faulty nodes confirmed"
    assert len(result.rounds) == 5


def test_bad_link_between_two_domains_is_an_infrastructure_fault() -> None:
    fleet = fleet_of([8, 8, 8, 8])
    fleet.links = {frozenset(("block-1", "block-2"))}
    result = run(fleet)
    assert result.verdict.failed == ()
    assert not result.verdict.succeeded
    assert result.verdict.message == "Diagnosis complete: 1 infrastructure faults detected"
    (fault,) = result.status["infrastructureFaults"]  # type: ignore[misc]
    assert fault["domains"] == ["block-1", "block-2"]
    assert fault["stage"] == "cross-boundary"
    assert fault["groupA"] == ["node-008"] and fault["groupB"] == ["node-016"]
    assert sorted(result.verdict.healthy) == sorted(fleet.labels)
    assert [s for s, _ in result.rounds] == ["intra-screening", "inter-screening", "cross-boundary"]
    assert len(result.rounds[2][1]) == 6  # every pair of 4 domains
    assert result.status["outcome"] == "Faulty"


def test_healthy_fleet() -> None:
    result = run(fleet_of([8, 8, 8, 8]))
    assert result.verdict.succeeded
    assert result.verdict.message == dg.ALL_SCREENING_PASSED
    assert len(result.rounds) == 2
    assert result.status["outcome"] == "Healthy"


def test_healthy_single_domain() -> None:
    result = run(fleet_of([8]))
    assert result.verdict.succeeded
    assert result.verdict.message == dg.ALL_DOMAINS_HEALTHY
    assert len(result.rounds) == 1


def test_flaky_node_is_not_blamed_and_the_status_says_so() -> None:
    fleet = fleet_of([8, 8, 8, 8])
    fleet.flaky = {"node-013"}
    result = run(fleet)
    assert result.verdict.succeeded
    assert result.verdict.failed == ()
    assert result.status["outcome"] == "Inconclusive"
    transient = result.status["transientFailures"]
    assert {
        "round": 1,
        "group": "screen-1",
        "nodes": fleet.domains["block-1"],
        "stage": "intra-screening",
    } in (
        transient  # type: ignore[operator]
    )


def test_max_rounds_stops_with_the_suspects() -> None:
    fleet = fleet_of([8, 8, 8, 8])
    fleet.faulty = {"node-013"}
    result = run(fleet, dg.Settings(max_rounds=2))
    assert len(result.rounds) == 2
    assert result.verdict.limit_reached and not result.verdict.succeeded
    assert result.verdict.failed == ()
    suspects = ", ".join(fleet.domains["block-1"])
    assert result.verdict.message == (
        f"Diagnosis stopped: round limit 2 reached in stage inter-screening; 8 suspect nodes: {suspects}"
    )
    assert result.status["outcome"] == "LimitReached"
    assert result.status["stage"] == "complete"


def test_stop_at_the_deadline() -> None:
    fleet = fleet_of([4, 4])
    fleet.faulty = {"node-001"}
    step = dg.start(fleet.labels, "k", "t")
    step = dg.advance(step.status, [fleet.result(g) for g in step.groups], dg.Settings())
    stopped = dg.stop(step.status, dg.Settings(), "deadline 10m reached")
    assert stopped.verdict is not None
    assert stopped.verdict.message == (
        "Diagnosis stopped: deadline 10m reached in stage bisection; "
        "4 suspect nodes: node-000, node-001, node-002, node-003"
    )
    assert stopped.verdict.healthy == ("node-004", "node-005", "node-006", "node-007")


def test_no_topology_uses_sqrt_chunks() -> None:
    fleet = fleet_of([32])
    fleet.faulty = {"node-020"}
    result = run(fleet, topology_key=None)
    screen = result.rounds[0][1]
    assert [len(g.nodes) for g in screen] == [6, 6, 6, 6, 6, 2]
    assert [g.name for g in screen] == [f"screen-{i}" for i in range(6)]
    assert failed_names(result.verdict) == ["node-020"]
    assert len(result.rounds) <= 2 + math.ceil(math.log2(6)) + 1


def test_missing_label_is_domain_unknown() -> None:
    groups = dg.screening_groups({"b": "x", "a": None, "c": None}, "key")
    assert [(g.name, g.nodes, g.domains) for g in groups] == [
        ("screen-0", ("a", "c"), ("unknown",)),
        ("screen-1", ("b",), ("x",)),
    ]


def test_mnnvl_reruns_screening_without_nvlink() -> None:
    fleet = fleet_of([4, 4, 4])
    fleet.faulty = {"node-005"}
    result = run(fleet, dg.Settings(mnnvl=True))
    stages = [s for s, _ in result.rounds]
    assert stages[:3] == ["intra-screening", "intra-screening-no-nvl", "inter-screening"]
    assert [g.name for g in result.rounds[1][1]] == ["screen-no-nvl-0", "screen-no-nvl-1", "screen-no-nvl-2"]
    assert result.status["noNVLSuspectNodes"] == fleet.domains["block-1"]
    assert failed_names(result.verdict) == ["node-005"]


def test_no_healthy_reference() -> None:
    fleet = fleet_of([2])
    fleet.faulty = {"node-000", "node-001"}
    result = run(fleet)
    assert result.verdict.message == "No healthy reference node; 2 suspects marked failed"
    assert failed_names(result.verdict) == ["node-000", "node-001"]


EIGHT = {"block-0": list("abcdefgh"), "block-1": ["i", "j"]}


def test_link_between_halves_too_small_to_probe_is_found_by_bisection() -> None:
    result = run_linked(
        {"block-0": ["a", "b", "c", "d"], "block-1": ["e", "f"]},
        {"h1": ["a", "b"], "h2": ["c", "d"]},
        ("h1", "h2"),
    )
    rounds, step = result.rounds, result.step
    assert step.verdict is not None and step.verdict.failed == ()
    assert step.verdict.message == "Diagnosis complete: 1 infrastructure faults detected"
    (fault,) = step.status["infrastructureFaults"]
    assert fault == {"domain": "block-0", "groupA": ["a", "b"], "groupB": ["c", "d"], "stage": "bisection"}
    assert [s for s, _ in rounds] == ["intra-screening", "bisection"]


def test_cross_boundary_probing_narrows_a_link_to_the_failing_mix() -> None:
    """Halves [a-d] and [e-h] pass alone: mix0 = [a, b] + [e, f] passes, mix1 = [c, d] + [g, h]
    fails, so the link lies between [c, d] and [g, h], not between the whole halves."""
    result = run_linked(EIGHT, {"q2": ["c", "d"], "q4": ["g", "h"]}, ("q2", "q4"))
    rounds, step = result.rounds, result.step
    assert [s for s, _ in rounds] == ["intra-screening", "bisection", "cross-boundary"]
    assert [(g.name, g.nodes) for g in rounds[2][1]] == [
        ("cross-0-mix0", ("a", "b", "e", "f")),
        ("cross-0-mix1", ("c", "d", "g", "h")),
    ]
    assert step.verdict is not None and step.verdict.failed == ()
    assert step.verdict.message == "Diagnosis complete: 1 infrastructure faults detected"
    (fault,) = step.status["infrastructureFaults"]
    assert fault == {
        "domain": "block-0",
        "groupA": ["c", "d"],
        "groupB": ["g", "h"],
        "stage": "cross-boundary",
    }
    assert "crossBoundaryState" not in step.status
    assert sorted(step.verdict.healthy) == sorted("abcdefghij")


def test_cross_boundary_probing_both_mixes_fail_keeps_the_sides() -> None:
    result = run_linked(EIGHT, {"x": list("abcd"), "y": list("efgh")}, ("x", "y"))
    rounds, step = result.rounds, result.step
    assert [s for s, _ in rounds] == ["intra-screening", "bisection", "cross-boundary"]
    (fault,) = step.status["infrastructureFaults"]
    assert fault == {
        "domain": "block-0",
        "groupA": list("abcd"),
        "groupB": list("efgh"),
        "stage": "cross-boundary",
    }


def test_cross_boundary_probing_both_mixes_pass_is_transient() -> None:
    result = run_linked(EIGHT, {"q1": ["a", "b"], "q4": ["g", "h"]}, ("q1", "q4"))
    rounds, step = result.rounds, result.step
    assert [s for s, _ in rounds] == ["intra-screening", "bisection", "cross-boundary"]
    assert step.verdict is not None and step.verdict.succeeded
    assert step.verdict.message == dg.CROSS_BOUNDARY_CLEARED
    assert "infrastructureFaults" not in step.status
    assert step.status["transientFailures"] == [
        {"round": 3, "group": "cross-0", "nodes": list("abcdefgh"), "stage": "cross-boundary"}
    ]
    assert step.status["outcome"] == "Inconclusive"
    assert sorted(step.verdict.healthy) == sorted("abcdefghij")


def test_cross_boundary_probing_stops_after_four_rounds() -> None:
    """128 nodes, a link between node-000 and node-064: probing halves the sides 64 -> 32 -> 16 ->
    8 -> 4 in four rounds and records the fault between the sides of four it reached."""
    nodes = [f"node-{i:03d}" for i in range(128)]
    result = run_linked(
        {"big": nodes, "small": ["z1", "z2"]}, {"x": ["node-000"], "y": ["node-064"]}, ("x", "y")
    )
    rounds, step = result.rounds, result.step
    stages = [s for s, _ in rounds]
    assert stages == ["intra-screening", "bisection", *["cross-boundary"] * dg.MAX_PROBE_ROUNDS]
    assert [len(groups[0].nodes) for _, groups in rounds[2:]] == [64, 32, 16, 8]
    (fault,) = step.status["infrastructureFaults"]
    assert fault == {"domain": "big", "groupA": nodes[:4], "groupB": nodes[64:68], "stage": "cross-boundary"}


def test_probes_run_beside_the_bisection_of_another_group() -> None:
    """One domain's halves pass alone (a probe), another domain holds a faulty node (bisected on):
    one round holds both, and the diagnosis names the node and the link."""
    domains = {"d0": list("abcdefgh"), "d1": [f"n{i}" for i in range(8)], "d2": ["z1", "z2"]}
    labelled = Fleet(domains)
    inner = Fleet(
        {"q2": ["c", "d"], "q4": ["g", "h"], "rest": [n for n in labelled.labels if n not in "cdgh"]},
        faulty={"n5"},
        links={frozenset(("q2", "q4"))},
    )
    step = dg.start(labelled.labels, "k", "t")
    rounds = []
    while step.verdict is None:
        rounds.append((str(step.status["stage"]), [g.name for g in step.groups]))
        step = dg.advance(step.status, [inner.result(g) for g in step.groups], dg.Settings())
    assert rounds == [
        ("intra-screening", ["screen-0", "screen-1", "screen-2"]),
        ("bisection", ["bisect-2-0a", "bisect-2-0b", "bisect-2-1a", "bisect-2-1b"]),
        ("cross-boundary", ["bisect-3-0a", "bisect-3-0b", "cross-0-mix0", "cross-0-mix1"]),
        ("confirmation", ["confirm-0", "confirm-1"]),
    ]
    assert step.verdict is not None
    assert failed_names(step.verdict) == ["n5"]
    assert (
        step.verdict.message
        == "Diagnosis complete: 1 faulty nodes confirmed; 1 infrastructure faults detected"
    )
    (fault,) = step.status["infrastructureFaults"]
    assert (fault["groupA"], fault["groupB"]) == (["c", "d"], ["g", "h"])


def test_advance_refuses_a_complete_diagnosis() -> None:
    with pytest.raises(ValueError, match="complete"):
        dg.advance({"stage": "complete"}, [], dg.Settings())


@st.composite
def fleets(draw: st.DrawFn) -> tuple[Fleet, dg.Settings, bool]:
    sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=5))
    fleet = fleet_of(sizes)
    names = sorted(fleet.labels)
    healthy_domain = draw(st.sampled_from(sorted(fleet.domains)))
    candidates = [n for n in names if n not in fleet.domains[healthy_domain]]
    fleet.faulty = set(draw(st.lists(st.sampled_from(candidates), max_size=3))) if candidates else set()
    fleet.flaky = set(draw(st.lists(st.sampled_from(names), max_size=2))) - fleet.faulty
    return (
        fleet,
        dg.Settings(min_group_size=draw(st.integers(1, 3)), mnnvl=draw(st.booleans())),
        draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(fleets())
def test_any_consistent_faults_are_named_exactly(case: tuple[Fleet, dg.Settings, bool]) -> None:
    """With one screening group free of faults, the machine names exactly the faulty nodes, every other
    node healthy, within the round bound; transient failures never blame a node."""
    fleet, config, topology = case
    screening = dg.screening_groups(fleet.labels, "key" if topology else None)
    assume(any(not fleet.faulty.intersection(g.nodes) for g in screening))

    def status_consistent(step: dg.Step) -> None:
        status = step.status
        assert not set(status.get("healthyNodes") or ()) & fleet.faulty  # type: ignore[arg-type]

    result = run(fleet, config, topology_key="key" if topology else None, check=status_consistent)
    assert failed_names(result.verdict) == sorted(fleet.faulty)
    assert sorted(result.verdict.healthy) == sorted(set(fleet.labels) - fleet.faulty)
    assert result.verdict.succeeded == (not fleet.faulty)
    if topology:
        sizes = [len(nodes) for d, nodes in fleet.domains.items() if fleet.faulty.intersection(nodes)]
        assert len(result.rounds) <= dg.round_bound(sizes, config)


def test_mnnvl_detection_and_forcing_it_off() -> None:
    env_on = {"trainer": {"env": [{"name": "NCCL_MNNVL_ENABLE", "value": "1"}]}}
    args_on = {"trainer": {"args": ["-x", "NCCL_MNNVL_ENABLE=1", "all_reduce_perf"]}}
    assert dg.mnnvl_enabled(env_on) and dg.mnnvl_enabled(args_on)
    assert not dg.mnnvl_enabled({"trainer": {"env": [{"name": "NCCL_MNNVL_ENABLE", "value": "0"}]}})
    assert not dg.mnnvl_enabled({"trainer": {"args": ["-x", "NCCL_DEBUG=INFO"]}})
    assert dg.without_mnnvl(env_on) == {"trainer": {"env": [{"name": "NCCL_MNNVL_ENABLE", "value": "0"}]}}
    assert dg.without_mnnvl(args_on)["trainer"]["args"][1] == "NCCL_MNNVL_ENABLE=0"
    assert not dg.mnnvl_enabled(dg.without_mnnvl(args_on))
    assert dg.no_nvl_group("screen-no-nvl-3") and not dg.no_nvl_group("screen-3")


@pytest.mark.parametrize(
    ("conditions", "transient"),
    [
        ({"Failed": ("True", "WorkloadFailed")}, True),
        ({"Failed": ("True", "JobTimedOut")}, False),
        ({"Failed": ("True", "WorkloadStalled")}, False),
        (
            {"Failed": ("True", "WorkloadFailed"), "HardwareFailed": ("True", "HardwareFailureDetected")},
            False,
        ),
        (
            {"Succeeded": ("True", "WorkloadCompleted"), "ValidationFailed": ("True", "ThresholdViolated")},
            False,
        ),
        ({"Succeeded": ("True", "WorkloadCompleted")}, False),
    ],
)
def test_which_failures_are_re_tested(conditions: dict[str, tuple[str, str]], transient: bool) -> None:
    job = {
        "status": {"conditions": [{"type": t, "status": s, "reason": r} for t, (s, r) in conditions.items()]}
    }
    assert may_be_transient(job) is transient


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 40), st.data())
def test_a_link_inside_a_domain_never_blames_a_node(size: int, data: st.DataObject) -> None:
    """A bad link between two nodes of one domain: no node is blamed, and any fault recorded
    has the two ends on opposite sides."""
    nodes = [f"node-{i:03d}" for i in range(size)]
    x, y = data.draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=2, unique=True))
    result = run_linked({"big": nodes, "small": ["z1", "z2"]}, {"x": [x], "y": [y]}, ("x", "y"))
    rounds, step = result.rounds, result.step
    assert step.verdict is not None and step.verdict.failed == ()
    assert sorted(step.verdict.healthy) == sorted([*nodes, "z1", "z2"])
    for fault in step.status.get("infrastructureFaults") or ():
        assert {x, y} & set(fault["groupA"]) and {x, y} & set(fault["groupB"])
    probe_rounds = sum(1 for s, _ in rounds if s == "cross-boundary")
    assert probe_rounds <= dg.MAX_PROBE_ROUNDS
