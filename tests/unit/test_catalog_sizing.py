# ruff: noqa: RUF001 - messages keep the multiplication sign of the reference
"""Minimum GPUs, model-parallel divisibility, valid node counts and timeout precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvcre.catalog import BuildError, load_catalog
from nvcre.catalog.loader import Entry, load_catalog_from
from nvcre.catalog.sizing import effective_timeout, max_valid_nodes, min_valid_nodes, validate_sizing


def _n8b() -> Entry:
    return load_catalog().lookup("training", "nemotron5-8b")


def _moe(tmp_path: Path) -> Entry:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "moe.yaml").write_text("orchestration: {iterations: 1}\n")
    (tmp_path / "t" / "moe").mkdir()
    (tmp_path / "t" / "moe" / "meta.yaml").write_text("parallelism: {default: {tp: 2, pp: 2, ep: 4}}\n")
    return load_catalog_from(tmp_path).lookup("t", "moe")


def test_minimum_gpus_message() -> None:
    with pytest.raises(BuildError) as info:
        validate_sizing(_n8b(), 1, 2, "l40s", field="spec.nodesPerJob")
    assert str(info.value) == (
        "training/nemotron5-8b: requires at least 4 GPUs (2 nodes × 2 GPUs/node), got 2 GPUs (1 nodes); "
        "set nodesPerJob to 2 or higher"
    )
    assert info.value.field == "spec.nodesPerJob"


def test_divisibility_message_offers_the_neighbours() -> None:
    with pytest.raises(
        BuildError, match=r"must be divisible by TP×PP=4 \(TP=4, PP=1\); try nodesPerJob=4 or 6$"
    ):
        validate_sizing(_n8b(), 5, 2, "l40s", field="f")


def test_divisibility_message_without_a_smaller_count() -> None:
    # 3 GPUs/node, TP 4: 2 nodes give 6 (min 4 met) and no count <= 2 divides; 4 does
    with pytest.raises(BuildError, match=r"try nodesPerJob=4$"):
        validate_sizing(_n8b(), 2, 3, "l40s", field="f")


def test_expert_parallel_message(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as info:
        validate_sizing(_moe(tmp_path), 2, 4, "h100", field="f")
    assert str(info.value) == (
        "t/moe: totalGPUs=8, DP=2 must be divisible by EP=4; totalGPUs must be a multiple of 16 (TP×PP×EP=2×2×4)"
    )


def test_unconstrained_and_zero_sizes_pass() -> None:
    validate_sizing(load_catalog().lookup("communication", "nccl-all-reduce"), 3, 8, "h100", field="f")
    validate_sizing(_n8b(), 0, 8, "h100", field="f")


def test_valid_node_counts() -> None:
    big = load_catalog().lookup("training", "nemotron5-56b")
    assert max_valid_nodes(big, 7, 8, "h100") == 7  # 56 GPUs >= 32, divisible by TP 8
    assert max_valid_nodes(big, 3, 8, "h100") == 0
    assert min_valid_nodes(big, 8, "h100") == 4
    assert max_valid_nodes(_n8b(), 5, 2, "l40s") == 4
    assert min_valid_nodes(load_catalog().lookup("communication", "nccl-all-reduce"), 8, "h100") == 1


@pytest.mark.parametrize(
    ("key", "user", "scale", "expected"),
    [
        ("communication/nccl-all-reduce", "3h", "diagnose", "3h"),
        ("diagnostics/dcgm-level4", None, "diagnose", "2h"),
        ("training/nemotron5-56b", None, "full-scale", "24h"),
        ("communication/nccl-all-reduce", None, "diagnose", "15m"),
        ("communication/nccl-all-reduce", None, "full-scale", "1h"),
    ],
)
def test_timeout_precedence(key: str, user: str | None, scale: str, expected: str) -> None:
    assert effective_timeout(load_catalog().lookup(*key.split("/")), user, scale) == expected
