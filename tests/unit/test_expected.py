"""``nvcre.expected``: the packaged expected-performance table, its checks and its matching rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvcre.catalog import load_catalog
from nvcre.expected import (
    ANY_PLATFORM,
    COLLECTIVES,
    NIC_LOOPBACK,
    TABLE_VERSION,
    ExpectedTableError,
    GroupShape,
    collective_name,
    expected_bandwidth,
    expected_training,
    parse_table,
    rows,
)
from nvcre.expected.docs import with_table
from nvcre.platform import GPU_ARCHITECTURES
from nvcre.platform.detect import PLATFORMS

DOCS = Path(__file__).parents[2] / "docs" / "expected-performance.md"


def figure(
    arch: str, platform: str, collective: str, nodes: int, *, domains: int = 1, mnnvl: bool = False
) -> tuple[float, str]:
    shape = GroupShape(nodes, domains=domains, mnnvl=mnnvl)
    found = expected_bandwidth(arch, platform, collective, shape)
    assert found is not None, f"no row for {arch}/{platform}/{collective} on {shape}"
    return found.value, found.row


# --- the packaged table ----------------------------------------------------------------------------


def test_the_table_has_a_version_and_unique_row_ids() -> None:
    assert TABLE_VERSION
    ids = [row.id for row in rows()]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 20


def test_every_row_names_an_architecture_and_platform_nvcre_knows() -> None:
    for row in rows():
        assert row.arch in GPU_ARCHITECTURES, row.id
        assert row.platform in (*PLATFORMS, ANY_PLATFORM), row.id


def test_every_row_has_its_published_source_with_the_figure() -> None:
    """Each source names where it is published (a URL) and states the figure the row holds, or the
    row says how it derived the figure from what is published."""
    for row in rows():
        assert "https://" in row.source, row.id
        assert row.cite and len(row.cite) <= 80, row.id
        assert f"{row.value:g}" in f"{row.source} {row.derived}", row.id


def test_rows_shared_by_every_platform_are_the_nodes_own_hardware() -> None:
    """``any`` rows are figures only the node or the NVLink rack decides: one node, or MNNVL."""
    for row in rows():
        if row.platform == ANY_PLATFORM:
            assert row.span.value in ("node", "mnnvl"), row.id


def test_every_catalog_nccl_entry_measures_a_collective_the_table_knows() -> None:
    for entry in load_catalog().list():
        if entry.domain == "communication":
            assert collective_name(entry.variant) in (*COLLECTIVES, NIC_LOOPBACK), entry.key


def test_training_rows_name_catalog_training_entries() -> None:
    entries = {entry.variant for entry in load_catalog().list() if entry.domain == "training"}
    assert entries == {"nemotron5-8b", "nemotron5-56b"}
    assert all(row.subject in entries for row in rows() if row.key != "busBandwidthGBps")


def test_the_doc_shows_the_packaged_table() -> None:
    text = DOCS.read_text()
    assert with_table(text) == text, "docs/expected-performance.md is stale: run `python -m nvcre.expected`"


# --- lookups ---------------------------------------------------------------------------------------


def test_what_the_sandbox_simulates_by_default_has_rows() -> None:
    """AWS H100 pairs (examples/certification/fleet-nccl.yaml), the seed example's 16-node group,
    one node over NVSwitch, and GB200 groups inside one NVL72 clique."""
    assert figure("h100", "aws", "all_reduce", 2) == (487.09, "h100/aws/all_reduce/2-nodes")
    assert figure("h100", "aws", "all_reduce", 16) == (356.27, "h100/aws/all_reduce/9-16-nodes")
    assert figure("h100", "aws", "nccl-loopback-nvswitch", 1) == (479.9, "h100/any/all_reduce/1-node")
    assert figure("gb200", "aws", "all_reduce", 4, mnnvl=True) == (
        834.57,
        "gb200/any/all_reduce/mnnvl-2-18-nodes",
    )


def test_a_row_serves_the_node_counts_of_its_range_and_no_others() -> None:
    assert figure("h100", "aws", "all_reduce", 3)[1] == "h100/aws/all_reduce/3-4-nodes"
    assert figure("h100", "aws", "all_reduce", 4)[1] == "h100/aws/all_reduce/3-4-nodes"
    assert figure("h100", "aws", "all_reduce", 5)[1] == "h100/aws/all_reduce/5-8-nodes"
    assert figure("h100", "aws", "all_reduce", 32) == (321.1, "h100/aws/all_reduce/17-32-nodes")
    assert expected_bandwidth("h100", "aws", "all_reduce", GroupShape(33)) is None
    assert figure("h100", "aws", "alltoall", 8) == (49.63, "h100/aws/alltoall/5-8-nodes")


def test_one_node_is_the_nodes_nvlink_on_every_platform() -> None:
    assert figure("h100", "onprem", "all_reduce", 1)[1] == "h100/any/all_reduce/1-node"
    assert figure("h100", "gcp", "all_reduce", 1)[1] == "h100/any/all_reduce/1-node"
    # a platform nvcre does not recognise gets the node's own figures and nothing else
    assert figure("h100", "lambda", "all_reduce", 1)[1] == "h100/any/all_reduce/1-node"
    assert expected_bandwidth("h100", "lambda", "all_reduce", GroupShape(2)) is None
    # one node is one node, whatever the shape says about domains or MNNVL
    assert figure("gb200", "gcp", "all_reduce", 1, domains=2, mnnvl=True) == (
        679.61,
        "gb200/any/all_reduce/1-node",
    )


def test_collective_names_map_test_types_binaries_and_catalog_variants() -> None:
    row = "h100/aws/all_reduce/2-nodes"
    for name in (
        "all_reduce",
        "all_reduce_perf",
        "all_reduce_perf_mpi",
        "/opt/nccl-tests/build/all_reduce_perf",
    ):
        assert figure("h100", "aws", name, 2)[1] == row
    assert figure("h100", "aws", "nccl-all-reduce", 2)[1] == row
    assert figure("h100", "gcp", "all_gather_perf_mpi", 2) == (188.73, "h100/gcp/all_gather/2-nodes")
    assert collective_name("nccl-alltoall") == collective_name("alltoall_perf") == "alltoall"


def test_the_nic_loopback_path_and_the_ambiguous_loopback_test_type_have_no_figure() -> None:
    """``nccl-loopback`` runs the NIC loopback path (no published figure), and ``loopback_all_reduce``
    names both loopback entries: neither may borrow the NVLink figure."""
    assert collective_name("nccl-loopback") == NIC_LOOPBACK
    assert expected_bandwidth("h100", "aws", "nccl-loopback", GroupShape(1)) is None
    assert expected_bandwidth("h100", "aws", "loopback_all_reduce", GroupShape(1)) is None


def test_mnnvl_across_domains_and_within_a_domain_are_different_rows() -> None:
    assert figure("gb200", "onprem", "all_reduce", 18, mnnvl=True)[0] == 834.57
    assert figure("gb200", "onprem", "all_reduce", 36, domains=2, mnnvl=True) == (
        810.41,
        "gb200/onprem/all_reduce/36-nodes-2-domains",
    )
    assert figure("gb200", "onprem", "all_reduce", 360, domains=20) == (
        405.74,
        "gb200/onprem/all_reduce/360-nodes-20-domains",
    )
    # no published figure: a group spanning two cliques that is not two full racks, three racks,
    # MNNVL off inside a clique, and a clique larger than a rack
    assert expected_bandwidth("gb200", "onprem", "all_reduce", GroupShape(4, domains=2)) is None
    assert expected_bandwidth("gb200", "onprem", "all_reduce", GroupShape(36, domains=3)) is None
    assert expected_bandwidth("gb200", "onprem", "all_reduce", GroupShape(4)) is None
    assert expected_bandwidth("gb200", "onprem", "all_reduce", GroupShape(19, mnnvl=True)) is None
    # a network-block row serves no group that crosses blocks
    assert expected_bandwidth("h100", "aws", "all_reduce", GroupShape(16, domains=2)) is None


def test_unknown_combinations_give_none() -> None:
    assert expected_bandwidth("l40s", "aws", "all_reduce", GroupShape(2)) is None
    assert expected_bandwidth("tesla", "aws", "all_reduce", GroupShape(1)) is None
    assert expected_bandwidth("h100", "aws", "reduce_scatter", GroupShape(2)) is None
    assert expected_bandwidth("h100", "aws", "all_gather", GroupShape(2)) is None
    assert expected_bandwidth("b200", "onprem", "all_reduce", GroupShape(1)) is None


def test_names_are_matched_case_insensitively() -> None:
    assert figure("H100", "AWS", "ALL_REDUCE", 2)[0] == 487.09


def test_no_training_figure_is_published_for_the_catalogs_runs() -> None:
    assert expected_training("h100", "aws", "nemotron5-8b", 8) == []
    assert expected_training("gb200", "onprem", "training/nemotron5-56b", 18) == []


def test_a_group_has_at_least_one_node() -> None:
    with pytest.raises(ValueError, match="at least 1 node"):
        GroupShape(0)
    with pytest.raises(ValueError, match="0 or more topology domains"):
        GroupShape(2, domains=-1)
    assert str(GroupShape(1)) == "1 node"
    assert str(GroupShape(16)) == "16 nodes in one domain"
    assert str(GroupShape(4, mnnvl=True)) == "4 nodes in one NVLink clique (MNNVL)"
    assert str(GroupShape(36, domains=2)) == "36 nodes across 2 domains"


# --- the rules, on a table of their own ------------------------------------------------------------

ROW = """
- arch: h100
  platform: {platform}
  interconnect: x
  collective: all_reduce
  nodes: {nodes}
  busBandwidthGBps: {value}
  cite: c
  source: s https://example.com {value}
"""


def table_text(*bandwidth: str, training: str = "[]") -> str:
    listed = "".join(bandwidth) or " []"
    return f'version: "9"\nbandwidth:{listed}\ntraining: {training}\n'


def test_a_platform_row_wins_over_an_any_row_for_the_same_shape() -> None:
    table = parse_table(
        table_text(
            ROW.format(platform="any", nodes=1, value=1.0), ROW.format(platform="aws", nodes=1, value=2.0)
        )
    )
    aws = table.bandwidth("h100", "aws", "all_reduce", GroupShape(1))
    gcp = table.bandwidth("h100", "gcp", "all_reduce", GroupShape(1))
    assert aws is not None and gcp is not None
    assert (aws.value, aws.row, aws.source) == (2.0, "h100/aws/all_reduce/1-node", "c")
    assert (gcp.value, gcp.row) == (1.0, "h100/any/all_reduce/1-node")
    assert table.version == "9"


def test_training_rows_give_step_time_and_tflops_for_their_entry_and_nodes() -> None:
    training = """
  - {arch: h100, platform: aws, entry: nemotron5-8b, nodes: 2-8, avgTFLOPsPerGPU: 400, cite: t, source: s}
  - {arch: h100, platform: aws, entry: nemotron5-8b, nodes: 8, avgStepTimeSec: 2.5, cite: u, source: s}
"""
    table = parse_table(table_text(training=training))
    found = table.training("h100", "aws", "training/nemotron5-8b", 8)
    assert [(f.key, f.value, f.row) for f in found] == [
        ("avgStepTimeSec", 2.5, "h100/aws/nemotron5-8b/avgStepTimeSec/8-nodes"),
        ("avgTFLOPsPerGPU", 400.0, "h100/aws/nemotron5-8b/avgTFLOPsPerGPU/2-8-nodes"),
    ]
    assert [f.key for f in table.training("h100", "aws", "nemotron5-8b", 4)] == ["avgTFLOPsPerGPU"]
    assert table.training("h100", "aws", "nemotron5-56b", 8) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 1\nbandwidth: []\ntraining: []\n", r"\.version: must be a non-empty string"),
        ('version: "1"\nbandwidth: {}\ntraining: []\n', r"\.bandwidth: must be a list"),
        ('version: "1"\nbandwidth: []\n', r"\.training: must be a list"),
        ('version: "1"\nbandwidth: []\ntraining: []\nextra: 1\n', r"\.extra: unknown field"),
        ("version: [\n", "not valid YAML"),
        (
            table_text(ROW.format(platform="aws", nodes=2, value=0)),
            r"bandwidth\[0\]\.busBandwidthGBps: 0 must be",
        ),
        (
            table_text(ROW.format(platform="aws", nodes="4-2", value=1)),
            r"bandwidth\[0\]\.nodes: '4-2' must be",
        ),
        (
            table_text(ROW.format(platform="aws", nodes="two", value=1)),
            r"bandwidth\[0\]\.nodes: 'two' must be",
        ),
        (table_text(ROW.format(platform="AWS", nodes=2, value=1)), r"\.platform: 'AWS' must be a lower-case"),
        (
            table_text(ROW.format(platform="aws", nodes=2, value=1) + "  colour: red\n"),
            r"\.colour: unknown field",
        ),
        (
            table_text(ROW.format(platform="aws", nodes=2, value=1).replace("all_reduce", "broadcast")),
            r"\.collective: 'broadcast' must be one of all_reduce, all_gather, alltoall",
        ),
        (
            table_text(ROW.format(platform="aws", nodes=2, value=1).replace("  cite: c\n", "")),
            r"bandwidth\[0\]\.cite: must be a non-empty string",
        ),
        (
            table_text(ROW.format(platform="aws", nodes=2, value=1) + "  span: across\n"),
            r"\.domains: span across needs domains >= 2",
        ),
        (
            table_text(ROW.format(platform="aws", nodes=2, value=1) + "  domains: 2\n"),
            r"\.domains: only a row with span across",
        ),
        (
            table_text(ROW.format(platform="aws", nodes=2, value=1) + "  span: node\n"),
            r"\.span: span node is exactly one node",
        ),
        (
            table_text(
                ROW.format(platform="aws", nodes="2-4", value=1), ROW.format(platform="aws", nodes=4, value=2)
            ),
            "rows h100/aws/all_reduce/2-4-nodes and h100/aws/all_reduce/4-nodes serve the same shapes",
        ),
        (
            table_text(training="[{arch: h100, platform: aws, entry: e, nodes: 2, cite: c, source: s}]"),
            r"training\[0\]: needs exactly one of avgStepTimeSec, avgTFLOPsPerGPU",
        ),
    ],
)
def test_a_malformed_table_names_the_field(text: str, message: str) -> None:
    with pytest.raises(ExpectedTableError, match=message):
        parse_table(text)
