"""A model fleet for the diagnose state machine (:mod:`nvcre.orchestration.diagnose`): a group
fails when it holds a faulty node or members on both sides of a bad link between domains; a
flaky node's group fails its first attempt and passes the re-test. Runs a whole diagnosis
without a cluster (unit tests, report golden inputs)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from nvcre.orchestration import diagnose as dg

TOPOLOGY_KEY = "topology.example/block"


@dataclass
class Fleet:
    domains: dict[str, list[str]]
    faulty: set[str] = field(default_factory=set)
    links: set[frozenset[str]] = field(default_factory=set)
    """Bad links between two domains."""
    flaky: set[str] = field(default_factory=set)
    """Nodes whose groups fail once, then pass the re-test."""

    @property
    def labels(self) -> dict[str, str | None]:
        return {n: d for d, nodes in self.domains.items() for n in nodes}

    def domain(self, node: str) -> str:
        return next(d for d, nodes in self.domains.items() if node in nodes)

    def result(self, group: dg.Group) -> dg.GroupResult:
        domains = {self.domain(n) for n in group.nodes}
        bad_link = any(frozenset((a, b)) in self.links for a in domains for b in domains if a != b)
        passed = not self.faulty.intersection(group.nodes) and not bad_link
        transient = passed and bool(self.flaky.intersection(group.nodes))
        return dg.GroupResult(group.name, group.nodes, passed, group.domains, transient)


def fleet_of(sizes: Iterable[int], *, domain: str = "block-{}", node: str = "node-{:03d}") -> Fleet:
    """Domains of the given sizes, nodes numbered across them."""
    domains, count = {}, 0
    for d, size in enumerate(sizes):
        domains[domain.format(d)] = [node.format(count + i) for i in range(size)]
        count += size
    return Fleet(domains)


@dataclass
class Run:
    rounds: list[tuple[str, tuple[dg.Group, ...]]]
    """Each round's stage and groups."""
    step: dg.Step

    @property
    def verdict(self) -> dg.Verdict:
        assert self.step.verdict is not None
        return self.step.verdict

    @property
    def status(self) -> dict[str, object]:
        return self.step.status


DEFAULT = dg.Settings()


def run(
    fleet: Fleet,
    config: dg.Settings = DEFAULT,
    *,
    topology_key: str | None = TOPOLOGY_KEY,
    started: str = "2026-01-01T00:00:00Z",
    check: Callable[[dg.Step], None] = lambda step: None,
) -> Run:
    """The whole diagnosis of ``fleet``, round by round."""
    step = dg.start(fleet.labels, topology_key, started)
    rounds = []
    while step.verdict is None:
        rounds.append((str(step.status["stage"]), step.groups))
        assert len(rounds) < 100, "the machine does not end"
        step = dg.advance(step.status, [fleet.result(g) for g in step.groups], config)
        check(step)
    return Run(rounds, step)


def run_linked(
    domains: dict[str, list[str]],
    ends: dict[str, list[str]],
    *links: tuple[str, str],
    config: dg.Settings = DEFAULT,
) -> Run:
    """The whole diagnosis of ``domains`` (as labelled) when bad links run inside them: a group
    fails when it holds both ends of one. ``ends`` names sets of nodes, ``links`` the bad pairs of
    those sets."""
    rest = [n for nodes in domains.values() for n in nodes if not any(n in e for e in ends.values())]
    linked = Fleet({**ends, "rest": rest}, links={frozenset(pair) for pair in links})
    step = dg.start(Fleet(domains).labels, TOPOLOGY_KEY, "2026-01-01T00:00:00Z")
    rounds = []
    while step.verdict is None:
        rounds.append((str(step.status["stage"]), step.groups))
        assert len(rounds) < 100, "the machine does not end"
        step = dg.advance(step.status, [linked.result(g) for g in step.groups], config)
    return Run(rounds, step)
