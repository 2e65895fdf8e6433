"""Environment merge and forwarding to MPI ranks (seed 000 `env`, seed 001 "Environment variables")."""

from __future__ import annotations

from typing import Any

from nvcre.render.workloadrun.env import (
    base_nccl_env,
    forwarded_names,
    merge_env,
    rank_forwards,
    replace_forwards,
)


def names(env: list[dict[str, str]]) -> list[str]:
    return [v["name"] for v in env]


def test_base_env_follows_mnnvl() -> None:
    assert {"name": "NCCL_MNNVL_ENABLE", "value": "1"} in base_nccl_env(True)
    assert {"name": "NCCL_MNNVL_ENABLE", "value": "0"} in base_nccl_env(False)
    assert names(base_nccl_env(False))[:2] == ["NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"]


def test_user_wins_by_name_and_is_appended_in_order() -> None:
    base = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}]
    user = [{"name": "Z", "value": "z"}, {"name": "B", "value": "user"}]
    assert merge_env(base, user) == [
        {"name": "A", "value": "1"},
        {"name": "C", "value": "3"},
        {"name": "Z", "value": "z"},
        {"name": "B", "value": "user"},
    ]


def test_forwarded_names_reads_both_spellings() -> None:
    assert forwarded_names(["--mca", "x", "y", "-x", "A=1", "-x", "B", "-x C=3"]) == {"A", "B", "C"}


def test_spec_env_replaces_a_platform_forward_in_place() -> None:
    platform = ["--mca", "pml", "ob1", "-x", "NCCL_SOCKET_IFNAME=eth0", "-x", "NCCL_IB_GID_INDEX=3"]
    user = [{"name": "NCCL_IB_GID_INDEX", "value": "5"}, {"name": "ONLY_USER", "value": "u"}]
    assert replace_forwards(platform, user) == [
        "--mca", "pml", "ob1", "-x", "NCCL_SOCKET_IFNAME=eth0", "-x", "NCCL_IB_GID_INDEX=5",
    ]  # fmt: skip


def test_rank_forwards_skip_names_the_platform_or_user_forward() -> None:
    merged: list[dict[str, Any]] = [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
        {"name": "MY_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "NCCL_ALGO", "value": "Ring"},
    ]
    out = rank_forwards(merged, ["-x", "NCCL_SOCKET_IFNAME=eth1"], ["-x", "NCCL_ALGO=Tree"])
    assert out == ["-x", "NCCL_DEBUG=INFO", "-x", "MY_TOKEN"]
