"""Partitioning: the worked examples of the reference, plus invariants."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvcre.orchestration.partition import Group, PartitionError, partition


def names(n: int, width: int = 2) -> list[str]:
    return [f"n{i:0{width}d}" for i in range(1, n + 1)]


@pytest.mark.parametrize(
    ("n", "npj", "expected"),
    [
        (12, 2, [f"group-{i}" for i in range(6)]),
        (18, 2, [f"group-{i}" for i in range(9)]),
        (16, 4, ["group-0", "group-1", "group-2", "group-3"]),
        (5, 2, ["group-0", "group-1", "group-2-overflow"]),
        (10, 4, ["group-0", "group-1", "group-2-overflow"]),
        (8, 8, ["group-0"]),
    ],
)
def test_simple_mode_group_names(n: int, npj: int, expected: list[str]) -> None:
    assert [g.name for g in partition(names(n), npj)] == expected


def test_simple_mode_slices_are_consecutive_in_name_order() -> None:
    groups = partition(list(reversed(names(16))), 4)
    assert groups[0].nodes == ("n01", "n02", "n03", "n04")
    assert groups[3].nodes == ("n13", "n14", "n15", "n16")


def test_overflow_reuses_the_tail_of_the_last_full_group() -> None:
    groups = partition(names(5, 1), 2)
    assert groups[2] == Group("group-2-overflow", ("n4", "n5"), overflow=True)
    groups = partition(names(10), 4)
    assert groups[2].nodes == ("n07", "n08", "n09", "n10")
    assert groups[2].overflow


def test_fewer_nodes_than_a_group_is_one_group() -> None:
    assert partition(names(3), 4) == [Group("group-0", ("n01", "n02", "n03"))]


@pytest.mark.parametrize(
    ("nodes", "npj", "message"), [([], 2, "no nodes provided"), (["a"], 0, "nodesPerJob must be >= 1, got 0")]
)
def test_errors(nodes: list[str], npj: int, message: str) -> None:
    with pytest.raises(PartitionError, match=message):
        partition(nodes, npj)


CLIQUE = "nvidia.com/gpu.clique"


def cliques(**sizes: int) -> dict[str, dict[str, str]]:
    return {f"{d.lower()}{i}": {CLIQUE: d} for d, size in sizes.items() for i in range(1, size + 1)}


def test_topology_packing_worked_example() -> None:
    groups = partition(cliques(A=4, B=4, C=2), 4, CLIQUE)
    assert groups == [
        Group("group-0", ("a1", "a2", "a3", "a4"), ("A",)),
        Group("group-1", ("b1", "b2", "b3", "b4"), ("B",)),
        Group("group-2-overflow", ("a1", "a2", "c1", "c2"), ("A", "C"), True, {"A": 2, "C": 2}),
    ]


def test_strict_domain_one_group_per_clique_at_natural_size() -> None:
    groups = partition(cliques(C=10, A=18, B=18), 4, CLIQUE, strict_domain=True)
    assert [(g.name, len(g.nodes), g.domains) for g in groups] == [
        ("group-0", 18, ("A",)),
        ("group-1", 18, ("B",)),
        ("group-2", 10, ("C",)),
    ]


def test_topology_mode_requires_the_label() -> None:
    nodes = cliques(A=2) | {"x": {}}
    with pytest.raises(
        PartitionError, match=re.escape('node "x" missing topology label "nvidia.com/gpu.clique"')
    ):
        partition(nodes, 2, CLIQUE)


def test_topology_groups_span_domains_when_a_group_is_larger_than_a_domain() -> None:
    groups = partition(cliques(A=2, B=2, C=2), 4, CLIQUE)
    assert groups[0] == Group("group-0", ("a1", "a2", "b1", "b2"), ("A", "B"), False, {"A": 2, "B": 2})
    assert groups[1].overflow and "c1" in groups[1].nodes and "c2" in groups[1].nodes


@given(st.integers(1, 60), st.integers(1, 12))
def test_every_node_is_covered_and_groups_are_full(n: int, npj: int) -> None:
    groups = partition(names(n), npj)
    covered = {node for g in groups for node in g.nodes}
    assert covered == set(names(n))
    if n >= npj:
        assert all(len(g.nodes) == npj for g in groups)
    assert sum(1 for g in groups if g.overflow) <= 1


@given(st.dictionaries(st.sampled_from("ABCDE"), st.integers(1, 9), min_size=1), st.integers(1, 10))
def test_topology_covers_every_node(sizes: dict[str, int], npj: int) -> None:
    nodes = cliques(**sizes)
    groups = partition(nodes, npj, CLIQUE)
    assert {node for g in groups for node in g.nodes} == set(nodes)
    assert len({g.name for g in groups}) == len(groups)


@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=3), st.sampled_from(["A", "B", "C", "D"]), min_size=1
    ),
    st.integers(1, 10),
)
def test_topology_groups_describe_their_own_nodes(domain_of: dict[str, str], npj: int) -> None:
    """Each group's node order, domains and per-domain counts are those of its nodes (the
    packing loop counts them as it takes nodes; this checks it against the nodes themselves)."""
    groups = partition({name: {CLIQUE: domain} for name, domain in domain_of.items()}, npj, CLIQUE)
    for group in groups:
        assert list(group.nodes) == sorted(group.nodes)
        assert group.domains == tuple(sorted({domain_of[n] for n in group.nodes}))
        counts: dict[str, int] = {}
        for node in group.nodes:
            counts[domain_of[node]] = counts.get(domain_of[node], 0) + 1
        expected = list(counts.items()) if len(counts) > 1 else []
        assert list(group.domain_node_counts.items()) == expected
