# ruff: noqa: RUF001 - messages keep the multiplication sign of the reference
"""Sizing rules of catalog entries: minimum GPUs, model parallelism, valid node counts, timeouts."""

from __future__ import annotations

from nvcre.catalog.errors import BuildError
from nvcre.catalog.loader import Entry


def _fits(entry: Entry, nodes: int, gpus_per_node: int, arch: str) -> bool:
    total = nodes * gpus_per_node
    if entry.meta.min_gpus > 0 and total < entry.meta.min_gpus:
        return False
    layout = entry.parallelism(arch)
    if layout.tp > 0 and layout.pp > 0:
        model = layout.tp * layout.pp
        if total % model:
            return False
        if layout.ep > 0 and (total // model) % layout.ep:
            return False
    return True


def validate_sizing(entry: Entry, nodes_per_job: int, gpus_per_node: int, arch: str, *, field: str) -> None:
    """Raise :class:`BuildError` when ``nodes_per_job`` nodes of ``gpus_per_node`` GPUs cannot run the entry."""
    if nodes_per_job <= 0 or gpus_per_node <= 0:
        return
    key = entry.key
    total = nodes_per_job * gpus_per_node
    min_gpus = entry.meta.min_gpus
    if min_gpus > 0 and total < min_gpus:
        min_nodes = -(-min_gpus // gpus_per_node)
        raise BuildError(
            f"{key}: requires at least {min_gpus} GPUs ({min_nodes} nodes × {gpus_per_node} GPUs/node), "
            f"got {total} GPUs ({nodes_per_job} nodes); set nodesPerJob to {min_nodes} or higher",
            field=field,
        )
    layout = entry.parallelism(arch)
    tp, pp, ep = layout.tp, layout.pp, layout.ep
    if tp > 0 and pp > 0 and total % (tp * pp):
        model = tp * pp
        below = next(
            (n for n in range(nodes_per_job, 0, -1) if (n * gpus_per_node) % model == 0 and n > 0), 0
        )
        above = next(
            n for n in range(nodes_per_job + 1, nodes_per_job + model + 1) if (n * gpus_per_node) % model == 0
        )
        hint = f"{below} or {above}" if below else str(above)
        raise BuildError(
            f"{key}: totalGPUs={total} ({nodes_per_job} nodes × {gpus_per_node} GPUs/node) must be divisible "
            f"by TP×PP={model} (TP={tp}, PP={pp}); try nodesPerJob={hint}",
            field=field,
        )
    if ep > 0 and tp > 0 and pp > 0:
        dp = total // (tp * pp)
        if dp % ep:
            raise BuildError(
                f"{key}: totalGPUs={total}, DP={dp} must be divisible by EP={ep}; totalGPUs must be a "
                f"multiple of {tp * pp * ep} (TP×PP×EP={tp}×{pp}×{ep})",
                field=field,
            )


def max_valid_nodes(entry: Entry, available: int, gpus_per_node: int, arch: str) -> int:
    """The largest node count ≤ ``available`` the entry can run on; 0 when there is none."""
    return next((n for n in range(available, 0, -1) if _fits(entry, n, gpus_per_node, arch)), 0)


def min_valid_nodes(entry: Entry, gpus_per_node: int, arch: str, *, limit: int = 4096) -> int:
    """The smallest node count the entry can run on (1 for entries without constraints)."""
    return next((n for n in range(1, limit + 1) if _fits(entry, n, gpus_per_node, arch)), 0)


def effective_timeout(entry: Entry, user: str | None, test_scale: str) -> str:
    """Per-job timeout: the user's value, else the entry's, else 15m for diagnose, else 1h."""
    return user or entry.default_timeout(test_scale)
