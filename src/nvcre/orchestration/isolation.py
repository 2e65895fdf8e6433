"""Isolation: which member of a failed group is the bad one (pure).

A group's bandwidth is what its slowest member allows, so a failed group names every member.
When an iteration ends with failed groups, each suspect (every member of a failed group that no
hardware report already names) is re-tested once, in a group of the same size with healthy
reference nodes from the iteration's passing groups (:mod:`nvcre.orchestration.pairing`: of its
own domain when it has enough). All re-tests run as one extra round, in waves under
``maxConcurrent``. Afterwards:

- a suspect whose re-test fails is failed, with the re-test's own evidence and its partners;
- a suspect whose re-test passes is cleared (a succeeded node);
- a failed group whose every member is cleared (none named by a hardware report) implicates the
  link between its domains (or, within one domain, between its nodes, or an intermittent fault),
  never a node;
- suspects with no reference (no passing node to pair them with: a single group, or every group
  failed) are screened among themselves when their group had three or more: each in two pairs,
  with its neighbours on a ring; one that fails both is failed, one that passes either is
  cleared. Fewer keep their group's entry.

Everything is decided from the Workflow status (``orchestration.isolation``), so a restarted
controller decides the same again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre import failednodes
from nvcre.api.v1alpha1.common import Toggle
from nvcre.api.v1alpha1.constants import FailedNodeReason, FailureCause
from nvcre.orchestration import pairing
from nvcre.orchestration.completion import failure_of
from nvcre.platform.detect import TOPOLOGY_KEYS

DEFAULT: Final[Toggle] = "On"
GROUP_PREFIX: Final = "isolate-"


def enabled(orchestration_spec: Mapping[str, Any]) -> bool:
    """Isolation runs unless ``orchestration.isolation`` is ``Off``; never in diagnose mode,
    which isolates on its own."""
    return orchestration_spec.get("isolation", DEFAULT) != "Off" and not orchestration_spec.get("diagnose")


def domain_key(orchestration_spec: Mapping[str, Any], platform: str | None) -> str | None:
    """The node label isolation tells domains apart by: the resolved topology key, else the
    platform's network-block label. Groups formed without a key can still fail across a bad link
    between blocks, and a re-test must not cross that link again."""
    key = (orchestration_spec.get("topology") or {}).get("topologyKey")
    return key or TOPOLOGY_KEYS.get(platform or "")


def suspects(groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``{name, group, entry}`` for every entry a failed group set aside for isolation."""
    return [
        {"name": entry["name"], "group": group["name"], "entry": dict(entry)}
        for group in groups
        for entry in group.get("suspects") or ()
    ]


RETESTED: Final = frozenset(
    {
        FailureCause.THRESHOLD_VIOLATED,
        FailureCause.BELOW_EXPECTED,
        FailureCause.UNEXPECTED_TRANSPORT,
        FailureCause.DATA_CORRUPTION,
        FailureCause.FAILURES_LOGGED,
        FailureCause.WORKLOAD_FAILED,
        FailureCause.WORKLOAD_STALLED,
        FailureCause.JOB_TIMED_OUT,
        FailureCause.BANDWIDTH_OUTLIER,
        FailureCause.STEP_TIME_OUTLIER,
        FailureCause.REGRESSION,
    }
)
"""Causes a member of the group may be behind, and a re-test can tell (an outlier's re-test is
judged against the iteration's groups too). Not re-tested: a hardware report (it names its
node), a Job deleted, a log that could not be read, and a threshold that cannot be evaluated
(every re-test would fail the same)."""


def set_aside(entries: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(entries to record now, entries to re-test) of a failed group. A member a hardware report
    names is not re-tested for anything else."""
    hardware = {e["name"] for e in entries if e.get("reason") == FailedNodeReason.HARDWARE_FAILURE_DETECTED}
    later = [dict(e) for e in entries if e["name"] not in hardware and e.get("cause") in RETESTED]
    kept = {e["name"] for e in later}
    return [dict(e) for e in entries if e["name"] not in kept], later


@dataclass(frozen=True)
class Plan:
    groups: tuple[dict[str, Any], ...]
    """The round's groups (``Pending``), each re-testing its ``suspect``, or a ``screen`` pair."""
    untested: tuple[dict[str, Any], ...]
    """Entries of suspects no reference could be found for: recorded as they are."""


SCREEN_MIN: Final = 3
"""Suspects of one group, with no healthy node to pair with, that are screened among themselves."""


def screen_pairs(nodes: Sequence[str]) -> list[list[str]]:
    """Each node with its two neighbours on a ring: a bad node fails both of its pairs, a good
    one passes at least one unless both its neighbours are bad."""
    return [[nodes[i], nodes[(i + 1) % len(nodes)]] for i in range(len(nodes))]


def plan(groups: Sequence[Mapping[str, Any]], domain_of: Mapping[str, str]) -> Plan:
    """The isolation round after an iteration whose groups are all terminal. Suspects with no
    healthy partner (no group of their size passed) are screened among themselves in pairs, when
    their group had at least :data:`SCREEN_MIN` of them."""
    healthy = sorted({n for g in groups if g.get("phase") == "Succeeded" for n in g.get("nodes") or ()})
    size_of = {g["name"]: len(g.get("nodes") or ()) for g in groups}
    domains_of = {g["name"]: {domain_of[n] for n in g.get("nodes") or () if n in domain_of} for g in groups}
    used: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    alone: dict[str, list[dict[str, Any]]] = {}
    # A round group spans domains only where the iteration's groups did: the outlier rule
    # compares shapes, and groups formed without topology carry none.
    labels = domain_of if any(g.get("domains") for g in groups) else {}
    for suspect in suspects(groups):
        partners = pairing.references(
            suspect["name"],
            healthy,
            domain_of,
            size_of[suspect["group"]] - 1,
            used,
            avoid=domains_of[suspect["group"]] - {domain_of.get(suspect["name"])},
        )
        if not partners:
            alone.setdefault(suspect["group"], []).append(suspect)
            continue
        out.append({**_group(len(out), [suspect["name"], *partners], labels), "suspect": suspect["name"]})
    untested: list[dict[str, Any]] = []
    for left in alone.values():
        if len(left) < SCREEN_MIN:
            untested.extend(s["entry"] for s in left)
            continue
        for pair in screen_pairs([s["name"] for s in left]):
            out.append({**_group(len(out), pair, labels), "screen": True})
    return Plan(tuple(out), tuple(untested))


def _group(index: int, nodes: list[str], domain_of: Mapping[str, str]) -> dict[str, Any]:
    group: dict[str, Any] = {"name": f"{GROUP_PREFIX}{index}", "nodes": nodes, "phase": "Pending"}
    domains = sorted({domain_of[n] for n in nodes if n in domain_of})
    if domains:
        group["domains"] = domains
    return group


@dataclass(frozen=True)
class Outcome:
    failed: tuple[dict[str, Any], ...]
    """Failed-nodes entries: the suspects whose re-test failed, with its evidence."""
    cleared: tuple[str, ...]
    links: tuple[dict[str, Any], ...]
    """``{domains, group, nodes, message}``: failed groups only their link explains."""
    unconfirmed: tuple[str, ...] = ()
    """Suspects in ``failed`` on their group's evidence: no re-test could judge them."""

    @property
    def message(self) -> str:
        parts = [f"{len(self.failed) - len(self.unconfirmed)} nodes failed again with healthy partners"]
        if self.unconfirmed:
            parts.append(
                f"{len(self.unconfirmed)} kept on their group's evidence (no re-test could judge them)"
            )
        parts.append(f"{len(self.cleared)} cleared")
        if self.links:
            parts.append(
                "links implicated: "
                + "; ".join(
                    " <-> ".join(link["domains"] if len(link["domains"]) >= 2 else link["nodes"])
                    for link in self.links
                )
            )
        return "Isolation complete: " + ", ".join(parts)


def failure(job: Mapping[str, Any], suspect: str) -> tuple[str, str] | None:
    """(cause, message) of a failed re-test's Job, as :func:`decide` takes them (the cause the
    Job's own entry for the suspect gives, e.g. ``BelowExpected``, else its failure's); None when
    it says nothing of the suspect: a hardware report named only its partners."""
    entries = [failednodes.normalise(e) for e in (job.get("status") or {}).get("failedNodes") or ()]
    hardware = {e["name"] for e in entries if e["reason"] == FailedNodeReason.HARDWARE_FAILURE_DETECTED}
    if hardware and suspect not in hardware:
        return None
    cause, why = failure_of(job)
    cause = next((e["cause"] for e in entries if e["name"] == suspect and e.get("cause")), cause)
    return cause, f'Job "{(job.get("metadata") or {}).get("name", "")}" failed: {why}'


def screen_key(group: Mapping[str, Any], node: str) -> str:
    """The key of a screen pair's failure for one of its nodes in :func:`decide`'s ``failures``."""
    return f"{group['name']}:{node}"


COMPARED: Final = frozenset(
    {FailureCause.BANDWIDTH_OUTLIER, FailureCause.STEP_TIME_OUTLIER, FailureCause.REGRESSION}
)
"""Causes that compare the group with others (its peers, or a member's own past): a passing
re-test clears them only when it was compared too."""


def _unjudged(
    entry: Mapping[str, Any], passed: Sequence[Mapping[str, Any]], compared: Collection[str]
) -> bool:
    """An outlier (or a regression) whose passing re-tests were not compared with groups of their
    shape (or the suspect's baseline): they passed thresholds it never failed, so they cannot clear it."""
    return entry.get("cause") in COMPARED and not any(g["name"] in compared for g in passed)


def _kept(entry: Mapping[str, Any], why: str) -> dict[str, Any]:
    """The suspect's entry from its own group, saying why no re-test decided it."""
    return {**entry, "message": f"{entry.get('message', '')} ({why})"}


def decide(
    isolation: Mapping[str, Any],
    round_groups: Sequence[Mapping[str, Any]],
    failures: Mapping[str, tuple[str, str] | None],
    compared: Collection[str] = (),
) -> Outcome:
    """The outcome of the round ``isolation`` recorded. ``failures``: for each failed group of the
    round, the (cause, message) of its Job's failure (:func:`failure`; a screen pair's under
    :func:`screen_key` for each node); None keeps the suspect's entry from its own group (its
    re-test was spoiled by a partner's hardware). ``compared``: the round's groups the outlier
    rule or the regression rule judged; a suspect failed only by one of them is cleared only by one of those."""
    failed: list[dict[str, Any]] = []
    cleared: list[str] = []
    unconfirmed: list[str] = []
    entry_of = {s["name"]: s["entry"] for s in isolation.get("suspects") or ()}

    def keep(node: str, why: str | None = None) -> None:
        """Fail ``node`` on its own group's entry: no re-test decided it."""
        unconfirmed.append(node)
        failed.append(_kept(entry_of[node], why) if why else dict(entry_of[node]))

    screened: dict[str, list[Mapping[str, Any]]] = {}
    for group in round_groups:
        if group.get("screen"):
            for node in group.get("nodes") or ():
                screened.setdefault(node, []).append(group)
            continue
        suspect, partners = group["suspect"], list(group.get("nodes") or ())[1:]
        if group.get("phase") == "Succeeded":
            if _unjudged(entry_of[suspect], [group], compared):
                keep(
                    suspect,
                    f"its re-test with healthy partner {', '.join(partners)} passed, with no groups "
                    "of its shape to compare",
                )
            else:
                cleared.append(suspect)
            continue
        found = failures.get(group["name"], (FailureCause.WORKLOAD_FAILED, "the re-test failed"))
        if found is None:
            keep(suspect)
            continue
        cause, why = found
        with_whom = ", ".join(partners)
        message = f"{why} (re-tested with healthy partner{'s' if len(partners) > 1 else ''} {with_whom})"
        failed.extend(failednodes.entries([suspect], cause, message))
    failing_all = {n for n, pairs in screened.items() if all(p.get("phase") != "Succeeded" for p in pairs)}
    for node, pairs in screened.items():
        passed = [p for p in pairs if p.get("phase") == "Succeeded"]
        if passed and _unjudged(entry_of[node], passed, compared):
            keep(node, "its re-test in pairs passed, with no groups of its shape to compare")
            continue
        if passed:
            cleared.append(node)
            continue
        said = [
            failures.get(screen_key(p, node), (FailureCause.WORKLOAD_FAILED, "the re-test failed"))
            for p in pairs
        ]
        known = [f for f in said if f is not None]
        if len(known) < len(said):  # a pair spoiled by its other node's hardware
            keep(node)
            continue
        neighbours = [n for p in pairs for n in p.get("nodes") or () if n != node]
        if all(n in failing_all for n in neighbours):  # a good node between two bad ones reads the same
            keep(
                node,
                f"re-tested in pairs with {' and '.join(neighbours)}, which failed all theirs too: "
                "it cannot be told apart from a healthy node between two bad ones",
            )
            continue
        cause, why = known[0]
        message = f"{why} (re-tested in pairs, failing with each of {' and '.join(neighbours)})"
        failed.extend(failednodes.entries([node], cause, message))
    links = []
    for group in isolation.get("groups") or ():
        members = [s["name"] for s in isolation.get("suspects") or () if s["group"] == group["name"]]
        nodes = list(group.get("nodes") or ())
        if len(nodes) < 2 or set(members) != set(nodes) or not all(m in cleared for m in members):
            continue  # a member was failed at once (a hardware report) or again: no link to blame
        domains = list(group.get("domains") or ())
        where = (
            f"across domains {' and '.join(domains)}; each member passed with healthy partners of its own domain"
            if len(domains) >= 2
            else "together; each member passed with healthy partners: the links between them, or an intermittent fault"
        )
        links.append(
            {
                "domains": domains,
                "group": group["name"],
                "nodes": nodes,
                "message": f"group {group['name']} ({', '.join(nodes)}) failed {where}",
            }
        )
    return Outcome(tuple(failed), tuple(sorted(cleared)), tuple(links), tuple(sorted(unconfirmed)))
