"""Who a suspect node is re-tested with: healthy reference nodes (pure).

One rule for diagnose mode's confirmation round and for isolation after a failed iteration: the
references come from the suspect's own topology domain when it has enough of them (a bad link
between two domains must not fail the re-test of a good node), else from any domain, taken
round-robin so that the re-tests spread over the healthy nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

UNKNOWN_DOMAIN: Final = "unknown"


def references(
    suspect: str,
    healthy: Sequence[str],
    domain_of: Mapping[str, str],
    count: int,
    used: dict[str, int],
) -> tuple[str, ...]:
    """``count`` distinct healthy nodes to re-test ``suspect`` with, or ``()`` when there are not
    enough. ``used`` carries the round-robin position per pool between calls."""
    domain = domain_of.get(suspect, UNKNOWN_DOMAIN)
    others = [h for h in healthy if h != suspect]
    same = [h for h in others if domain_of.get(h, UNKNOWN_DOMAIN) == domain]
    pool, key = (same, domain) if len(same) >= count else (others, "")
    if count <= 0 or len(pool) < count:
        return ()
    start = used.get(key, 0)
    used[key] = start + count
    return tuple(pool[(start + i) % len(pool)] for i in range(count))
