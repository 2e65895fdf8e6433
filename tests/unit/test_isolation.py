"""Isolation: each member of a failed group is re-tested with healthy partners, and only the
members that fail again are failed (nvcre.orchestration.isolation, pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvcre import failednodes
from nvcre.orchestration import isolation, pairing

FLOOR = "busBandwidthGBps 143.91 is below the expected floor 285.00 (0.8 x 356)"


def group(name: str, nodes: list[str], phase: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "nodes": nodes, "phase": phase, **extra}


def failed(name: str, nodes: list[str], cause: str = "BelowExpected", **extra: Any) -> dict[str, Any]:
    entries = failednodes.entries(nodes, cause, f'Job "{name}" failed: {FLOOR}')
    return group(name, nodes, "Failed", suspects=entries, **extra)


def screened(
    iteration: list[dict[str, Any]], pairs: Sequence[dict[str, Any]], bad: set[str]
) -> isolation.Outcome:
    """The outcome of a screening ring whose pairs with a ``bad`` node fail below the floor."""
    ran = [{**g, "phase": "Failed" if bad & set(g["nodes"]) else "Succeeded"} for g in pairs]
    failures = {
        isolation.screen_key(g, n): ("BelowExpected", f'Job "{g["name"]}" failed: {FLOOR}')
        for g in ran
        if g["phase"] == "Failed"
        for n in g["nodes"]
    }
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    return isolation.decide(status, ran, failures)


def test_off_and_diagnose_mode_turn_it_off() -> None:
    assert isolation.enabled({}) and isolation.enabled({"isolation": "On"})
    assert not isolation.enabled({"isolation": "Off"})
    assert not isolation.enabled({"diagnose": {"minGroupSize": 2}})


def test_a_hardware_report_is_recorded_at_once_and_its_partner_is_re_tested() -> None:
    entries = [
        *failednodes.entries(
            ["n1"], "HardwareFailureDetected", "Hardware failure detected by node health check"
        ),
        *failednodes.entries(["n2"], "WorkloadFailed", "the group failed"),
    ]
    now, later = isolation.set_aside(entries)
    assert [(e["name"], e["reason"]) for e in now] == [("n1", "HardwareFailureDetected")]
    assert [(e["name"], e["cause"]) for e in later] == [("n2", "WorkloadFailed")]
    # a deleted Job or an unusable threshold says nothing a re-test could tell apart
    for cause in ("JobDeleted", "InvalidThresholdExpression", "MeasurementUnavailable"):
        now, later = isolation.set_aside(failednodes.entries(["n1", "n2"], cause, "why"))
        assert ([e["name"] for e in now], later) == (["n1", "n2"], []), cause
    # an outlier is re-tested: its re-test is judged against the iteration's groups too
    for cause in ("BandwidthOutlier", "StepTimeOutlier"):
        now, later = isolation.set_aside(failednodes.entries(["n1", "n2"], cause, "why"))
        assert (now, [e["name"] for e in later]) == ([], ["n1", "n2"]), cause


def test_each_suspect_gets_a_group_of_its_size_with_healthy_partners_of_its_domain() -> None:
    groups = [
        group("group-0", ["a1", "a2"], "Succeeded", domains=["a"]),
        failed("group-1", ["a3", "a4"], domains=["a"]),
        group("group-2", ["b1", "b2"], "Succeeded", domains=["b"]),
        failed("group-3", ["b3", "b4"], domains=["b"]),
    ]
    domain_of = {n: n[0] for g in groups for n in g["nodes"]}
    plan = isolation.plan(groups, domain_of)
    assert [(g["name"], g["nodes"], g["suspect"], g.get("domains")) for g in plan.groups] == [
        ("isolate-0", ["a3", "a1"], "a3", ["a"]),
        ("isolate-1", ["a4", "a2"], "a4", ["a"]),
        ("isolate-2", ["b3", "b1"], "b3", ["b"]),
        ("isolate-3", ["b4", "b2"], "b4", ["b"]),
    ]
    assert all(g["phase"] == "Pending" for g in plan.groups) and plan.untested == ()


def test_a_suspect_without_a_healthy_node_keeps_its_groups_entry() -> None:
    groups = [failed("group-0", ["n1", "n2"])]
    plan = isolation.plan(groups, {})
    assert plan.groups == ()
    assert [e["name"] for e in plan.untested] == ["n1", "n2"]


def test_larger_groups_are_refilled_from_any_domain_when_their_own_is_short() -> None:
    groups = [
        group("group-0", ["a1", "a2", "b1", "b2"], "Succeeded"),
        failed("group-1", ["a3", "a4", "a5", "a6"]),
    ]
    domain_of = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "a3": "a", "a4": "a", "a5": "a", "a6": "a"}
    plan = isolation.plan(groups, domain_of)
    assert [g["nodes"] for g in plan.groups][:2] == [["a3", "a1", "a2", "b1"], ["a4", "b2", "a1", "a2"]]


def test_only_the_member_that_fails_again_is_failed_with_its_own_evidence() -> None:
    iteration = [group("group-0", ["n1", "n2"], "Succeeded"), failed("group-1", ["n3", "n4"])]
    plan = isolation.plan(iteration, {})
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    again = "busBandwidthGBps 141.02 is below the expected floor 285.00 (0.8 x 356)"
    round_ = [{**plan.groups[0], "phase": "Failed"}, {**plan.groups[1], "phase": "Succeeded"}]
    outcome = isolation.decide(status, round_, {"isolate-0": ("BelowExpected", f'Job "x" failed: {again}')})
    assert outcome.failed == (
        {
            "name": "n3",
            "reason": "ThresholdViolation",
            "cause": "BelowExpected",
            "message": f'Job "x" failed: {again} (re-tested with healthy partner n1)',
        },
    )
    assert outcome.cleared == ("n4",) and outcome.links == ()
    assert outcome.message == "Isolation complete: 1 nodes failed again with healthy partners, 1 cleared"


def test_a_group_across_two_domains_whose_members_all_pass_implicates_its_link() -> None:
    iteration = [
        group("group-0", ["a1", "a2"], "Succeeded", domains=["a"]),
        group("group-1", ["b1", "b2"], "Succeeded", domains=["b"]),
        failed("group-2", ["a3", "b3"], domains=["a", "b"]),
    ]
    domain_of = {n: n[0] for g in iteration for n in g["nodes"]}
    plan = isolation.plan(iteration, domain_of)
    assert [g["nodes"] for g in plan.groups] == [["a3", "a1"], ["b3", "b1"]], "partners of its own domain"
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    outcome = isolation.decide(status, [{**g, "phase": "Succeeded"} for g in plan.groups], {})
    assert outcome.failed == () and outcome.cleared == ("a3", "b3")
    assert outcome.links == (
        {
            "domains": ["a", "b"],
            "group": "group-2",
            "nodes": ["a3", "b3"],
            "message": "group group-2 (a3, b3) failed across domains a and b; each member passed with "
            "healthy partners of its own domain",
        },
    )
    assert outcome.message.endswith("links implicated: a <-> b")


def test_a_suspect_short_of_its_own_domain_is_not_re_tested_across_the_same_link() -> None:
    iteration = [
        group("group-0", ["a1", "a2"], "Succeeded", domains=["a"]),
        group("group-1", ["b1", "b2"], "Succeeded", domains=["b"]),
        group("group-2", ["c1", "c2"], "Succeeded", domains=["c"]),
        failed("group-3", ["a1", "d1"], domains=["a", "d"]),  # d1's domain has no healthy node
    ]
    domain_of = {n: n[0] for g in iteration for n in g["nodes"]}
    plan = isolation.plan(iteration, domain_of)
    partners = {g["suspect"]: g["nodes"][1:] for g in plan.groups}
    assert partners["a1"] == ["a2"], "its own domain"
    assert domain_of[partners["d1"][0]] in "bc", "a domain its failed group did not span"
    assert pairing.references("d1", ["a2"], domain_of, 1, {}, avoid={"a"}) == ("a2",), "else any"


def test_a_group_in_one_domain_whose_members_all_pass_implicates_their_link_not_a_node() -> None:
    iteration = [group("group-0", ["n1", "n2"], "Succeeded"), failed("group-1", ["n3", "n4"])]
    plan = isolation.plan(iteration, {})
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    outcome = isolation.decide(status, [{**g, "phase": "Succeeded"} for g in plan.groups], {})
    assert (outcome.failed, outcome.cleared) == ((), ("n3", "n4"))
    (link,) = outcome.links
    assert (link["domains"], link["nodes"]) == ([], ["n3", "n4"])
    assert link["message"] == (
        "group group-1 (n3, n4) failed together; each member passed with healthy partners: "
        "the links between them, or an intermittent fault"
    )
    assert outcome.message.endswith("links implicated: n3 <-> n4")


def test_a_partner_cleared_after_a_hardware_report_implicates_no_link() -> None:
    entries = [
        *failednodes.entries(["a3"], "HardwareFailureDetected", "XID 79 on a3"),
        *failednodes.entries(["b3"], "WorkloadFailed", "the group failed"),
    ]
    now, later = isolation.set_aside(entries)
    iteration = [
        group("group-0", ["a1", "a2"], "Succeeded", domains=["a"]),
        group("group-1", ["b1", "b2"], "Succeeded", domains=["b"]),
        group("group-2", ["a3", "b3"], "Failed", domains=["a", "b"], suspects=later),
    ]
    domain_of = {n: n[0] for g in iteration for n in g["nodes"]}
    plan = isolation.plan(iteration, domain_of)
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    outcome = isolation.decide(status, [{**g, "phase": "Succeeded"} for g in plan.groups], {})
    assert (outcome.cleared, outcome.links) == (("b3",), ()), "the hardware report explains the group"
    assert [e["name"] for e in now] == ["a3"]


def test_a_lone_failed_group_is_screened_in_pairs_and_names_its_bad_node() -> None:
    nodes = [f"n{i}" for i in range(5)]
    iteration = [failed("group-0", nodes)]
    plan = isolation.plan(iteration, {})
    assert [(g["nodes"], g.get("screen")) for g in plan.groups] == [
        (["n0", "n1"], True),
        (["n1", "n2"], True),
        (["n2", "n3"], True),
        (["n3", "n4"], True),
        (["n4", "n0"], True),
    ], "each node with its two neighbours on a ring"
    # n2 is bad: both of its pairs fail; its neighbours pass their other pair
    outcome = screened(iteration, plan.groups, bad={"n2"})
    assert outcome.cleared == ("n0", "n1", "n3", "n4") and outcome.links == ()
    (entry,) = outcome.failed
    assert (entry["name"], entry["cause"]) == ("n2", "BelowExpected")
    assert (
        entry["message"]
        == f'Job "isolate-1" failed: {FLOOR} (re-tested in pairs, failing with each of n1 and n3)'
    )
    # two suspects alone cannot tell each other apart: they keep their group's entry
    two = isolation.plan([failed("group-0", ["n0", "n1"])], {})
    assert (two.groups, [e["name"] for e in two.untested]) == ((), ["n0", "n1"])


def test_a_screened_node_between_two_bad_ones_is_kept_unconfirmed_not_blamed_with_evidence() -> None:
    """n1 and n3 are bad: every pair with either fails, so n2 (healthy) fails both of its pairs
    too. Its neighbours failed all of theirs, so its pairs say nothing of it: it keeps its group's
    entry, counted apart; n1 and n3 each have a neighbour that passed, so their evidence stands."""
    nodes = [f"n{i}" for i in range(6)]
    iteration = [failed("group-0", nodes)]
    plan = isolation.plan(iteration, {})
    outcome = screened(iteration, plan.groups, bad={"n1", "n3"})
    assert [e["name"] for e in outcome.failed] == ["n1", "n2", "n3"]
    assert outcome.unconfirmed == ("n2",) and outcome.cleared == ("n0", "n4", "n5")
    assert outcome.failed[1]["message"] == (
        f'Job "group-0" failed: {FLOOR} (re-tested in pairs with n1 and n3, which failed all theirs '
        "too: it cannot be told apart from a healthy node between two bad ones)"
    )
    assert outcome.failed[0]["message"].endswith("(re-tested in pairs, failing with each of n0 and n2)")
    assert outcome.message.startswith(
        "Isolation complete: 2 nodes failed again with healthy partners, 1 kept"
    )


def test_diagnose_confirmation_pairs_by_the_same_rule() -> None:
    used: dict[str, int] = {}
    domain_of = {"s1": "a", "h1": "a", "h2": "b", "s2": "c"}
    assert pairing.references("s1", ["h1", "h2"], domain_of, 1, used) == ("h1",)
    assert pairing.references("s2", ["h1", "h2"], domain_of, 1, used) == ("h1",), "any domain, round-robin"
    assert pairing.references("s2", ["h1", "h2"], domain_of, 1, used) == ("h2",)
    assert pairing.references("s2", ["h1"], domain_of, 2, used) == (), "not enough healthy nodes"


def test_a_re_test_spoiled_by_a_partners_hardware_keeps_the_suspects_own_entry() -> None:
    iteration = [group("group-0", ["n1", "n2"], "Succeeded"), failed("group-1", ["n3", "n4"])]
    plan = isolation.plan(iteration, {})
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    job = {
        "metadata": {"name": "wf-isolate-0-iter-1"},
        "status": {
            "conditions": [{"type": "HardwareFailed", "status": "True", "reason": "HardwareFailureDetected"}],
            "failedNodes": [{"name": "n1", "reason": "HardwareFailureDetected", "message": "XID 79"}],
        },
    }
    assert isolation.failure(job, "n3") is None, "n1's XID says nothing of n3"
    round_ = [{**plan.groups[0], "phase": "Failed"}, {**plan.groups[1], "phase": "Succeeded"}]
    outcome = isolation.decide(status, round_, {"isolate-0": isolation.failure(job, "n3")})
    assert outcome.failed == (status["suspects"][0]["entry"],) and outcome.cleared == ("n4",)


def test_an_outlier_is_cleared_only_by_a_re_test_the_outlier_rule_could_compare() -> None:
    """An outlier passed its thresholds all along: a re-test that passes them again, with no
    groups of its shape to be compared with, says nothing of its speed."""
    why = 'Job "wf-group-1-iter-1" failed: bus bandwidth 310.00 GB/s is below 0.9 of the median'
    entries = failednodes.entries(["n3", "n4"], "BandwidthOutlier", why)
    iteration = [
        group("group-0", ["n1", "n2"], "Succeeded"),
        group("group-1", ["n3", "n4"], "Failed", suspects=entries),
    ]
    plan = isolation.plan(iteration, {})
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    round_ = [{**g, "phase": "Succeeded"} for g in plan.groups]
    outcome = isolation.decide(status, round_, {}, compared={"isolate-1"})
    assert outcome.failed == (
        {
            "name": "n3",
            "reason": "ThresholdViolation",
            "cause": "BandwidthOutlier",
            "message": f"{why} (its re-test with healthy partner n1 passed, with no groups of its shape to compare)",
        },
    )
    assert outcome.cleared == ("n4",) and outcome.links == (), "a kept outlier implicates no link"
    assert outcome.message == (
        "Isolation complete: 0 nodes failed again with healthy partners, 1 kept on their group's "
        "evidence (no re-test could judge them), 1 cleared"
    )
    below_floor = [group("group-0", ["n1", "n2"], "Succeeded"), failed("group-1", ["n3", "n4"])]
    status = {"groups": below_floor, "suspects": isolation.suspects(below_floor)}
    outcome = isolation.decide(status, round_, {}, compared=())
    assert outcome.failed == () and outcome.cleared == ("n3", "n4"), "a floor's re-test judges itself"


def test_a_regression_is_cleared_only_by_a_re_test_compared_with_the_suspects_baseline() -> None:
    """A regression too passed every threshold: a passing re-test clears it only when the
    regression rule (or the outlier rule) judged that re-test."""
    why = "busbw 401 GB/s, 14 % below this node's baseline 467 GB/s (2 runs)"
    entries = failednodes.entries(["n3"], "Regression", why)
    iteration = [
        group("group-0", ["n1", "n2"], "Succeeded"),
        group("group-1", ["n3", "n4"], "Failed", suspects=entries),
    ]
    plan = isolation.plan(iteration, {})
    status = {"groups": iteration, "suspects": isolation.suspects(iteration)}
    assert [s["name"] for s in status["suspects"]] == ["n3"], "only the regressed member is a suspect"
    round_ = [{**g, "phase": "Succeeded"} for g in plan.groups]
    kept = isolation.decide(status, round_, {}, compared=())
    assert [(e["name"], e["cause"]) for e in kept.failed] == [("n3", "Regression")]
    cleared = isolation.decide(status, round_, {}, compared={plan.groups[0]["name"]})
    assert cleared.failed == () and cleared.cleared == ("n3",)


def test_domains_come_from_the_topology_key_else_the_platforms_block_label() -> None:
    """A Certification on aws may group without a topology key; its re-tests must still know the
    network blocks, or a member of a pair failed across a bad link is re-tested across it again."""
    spec = {"topology": {"topologyKey": "example.com/rack"}}
    assert isolation.domain_key(spec, "aws") == "example.com/rack"
    assert isolation.domain_key({}, "aws") == "topology.k8s.aws/network-node-layer-1"
    assert isolation.domain_key({}, "onprem") is None
    assert isolation.domain_key({}, None) is None


def test_round_groups_span_domains_only_where_the_iterations_groups_did() -> None:
    """The outlier rule compares a re-test with the iteration's groups by shape: groups formed
    without topology carry no domains, so neither do their re-tests."""
    domain_of = {"n1": "a", "n2": "a", "n3": "b", "n4": "b"}
    groups = [group("g0", ["n1", "n2"], "Succeeded"), failed("g1", ["n3", "n4"])]
    assert all("domains" not in g for g in isolation.plan(groups, domain_of).groups)
    labelled = [{**g, "domains": sorted({domain_of[n] for n in g["nodes"]})} for g in groups]
    assert all(g.get("domains") for g in isolation.plan(labelled, domain_of).groups)
