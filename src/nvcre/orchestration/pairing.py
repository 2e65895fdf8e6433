"""Who a suspect node is re-tested with: healthy reference nodes (pure).

One rule for diagnose mode's confirmation round and for isolation after a failed iteration: the
references come from the suspect's own topology domain when it has enough of them (a bad link
between two domains must not fail the re-test of a good node), else from domains the suspect's
failed group did not span (the same bad link again), else from any domain; taken round-robin so
that the re-tests spread over the healthy nodes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Final

UNKNOWN_DOMAIN: Final = "unknown"


def references(
    suspect: str,
    healthy: Sequence[str],
    domain_of: Mapping[str, str],
    count: int,
    used: dict[str, int],
    avoid: Collection[str] = (),
) -> tuple[str, ...]:
    """``count`` distinct healthy nodes to re-test ``suspect`` with, or ``()`` when there are not
    enough. ``avoid``: the other domains of the suspect's failed group. ``used`` carries the
    round-robin position per pool between calls."""
    domain = domain_of.get(suspect, UNKNOWN_DOMAIN)
    others = [h for h in healthy if h != suspect]
    same = [h for h in others if domain_of.get(h, UNKNOWN_DOMAIN) == domain]
    apart = [h for h in others if domain_of.get(h, UNKNOWN_DOMAIN) not in avoid]
    if count <= 0 or len(others) < count:
        return ()
    pool, key = next((p, k) for p, k in ((same, domain), (apart, "apart"), (others, "")) if len(p) >= count)
    start = used.get(key, 0)
    used[key] = start + count
    return tuple(pool[(start + i) % len(pool)] for i in range(count))
