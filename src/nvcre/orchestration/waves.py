"""Which pending groups start now: waves under maxConcurrent, never two groups on one node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class GroupLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def nodes(self) -> Sequence[str]: ...


def groups_to_launch(groups: Sequence[GroupLike], max_concurrent: int) -> list[str]:
    """Names of the groups to start, in status order.

    Called only when no group is running (the reference launches in waves: the next wave
    starts when the whole previous one is terminal). A group that shares a node with a group
    started earlier in the same wave waits for the next wave.
    """
    running = [g for g in groups if g.phase == "Running"]
    busy = {node for g in running for node in g.nodes}
    launched: list[str] = []
    count = len(running)
    for group in groups:
        if group.phase != "Pending":
            continue
        if max_concurrent > 0 and count >= max_concurrent:
            break
        if busy.intersection(group.nodes):
            continue
        launched.append(group.name)
        busy.update(group.nodes)
        count += 1
    return launched
