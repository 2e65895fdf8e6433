"""Adaptive fault isolation (diagnose mode, spec/controllers.md 7), as pure functions.

A diagnosis is a sequence of rounds; each round is a list of groups run like an iteration.
:func:`start` gives the first round (screening); :func:`advance` takes the diagnose status so far
and the results of the round that ended and gives the next round, or the outcome. Everything the
next decision needs is in the status (``screeningResults`` holds the topology as it was
screened), so a restart decides the same again.

Stages: ``intra-screening`` (one group per topology domain, else sqrt(N) chunks), then for an
MNNVL job ``intra-screening-no-nvl`` (every domain again with NVLink off), ``inter-screening`` (one
healthy node of each domain together), ``cross-boundary`` (when that failed: every pair of
domains, to name the link), ``bisection`` (failed groups halved until at most ``minGroupSize``
nodes; two halves that both pass where their whole failed are probed across their boundary,
``cross-<p>-mix0`` = first half of each side, ``mix1`` = second half of each, and narrowed to the
failing mix) and ``confirmation`` (each suspect with a healthy reference node, preferably of its own
domain). A group whose Job failed in a way that may be transient has already been re-run once
by the controller; ``GroupResult.transient`` says it passed only on that re-test.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import FailureCause
from nvcre.api.v1alpha1.workflow import DiagnoseStage
from nvcre.orchestration import pairing
from nvcre.orchestration.pairing import UNKNOWN_DOMAIN

MNNVL_ENV: Final = "NCCL_MNNVL_ENABLE"
_MNNVL_SETTING = re.compile(rf"\b{MNNVL_ENV}=(\S*)")
INTER_DOMAIN: Final = "inter-domain"

Stage = DiagnoseStage
Outcome = Literal["Healthy", "Faulty", "Inconclusive", "LimitReached"]

ALL_DOMAINS_HEALTHY: Final = "All domains healthy, no faults detected"
ALL_SCREENING_PASSED: Final = "All screening passed, no faults detected"
BISECTION_PASSED: Final = "Bisection complete: all groups passed"
CROSS_BOUNDARY_CLEARED: Final = "Cross-boundary probing complete: no faults confirmed"
SUSPECTS_CLEARED: Final = "All suspects cleared, no faults confirmed"

MAX_PROBE_ROUNDS: Final = 4
"""Rounds of cross-boundary probing one pair of sides gets before its fault is recorded as is."""
PROBE_SIDE_NODES: Final = 2
"""A pair of sides is probed (split again) only while one has more nodes than this."""


@dataclass(frozen=True)
class Settings:
    min_group_size: int = 2
    max_rounds: int | None = None
    """No round starts after this many (``diagnose.maxRounds``)."""
    mnnvl: bool = False
    """The job template enables multi-node NVLink: screening is repeated with it off."""


@dataclass(frozen=True)
class Group:
    """A group of the next round (its phase starts ``Pending``)."""

    name: str
    nodes: tuple[str, ...]
    domains: tuple[str, ...] = ()

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "nodes": list(self.nodes), "phase": "Pending"}
        if self.domains:
            out["domains"] = list(self.domains)
        return out


@dataclass(frozen=True)
class GroupResult:
    """How a group of the round that ended did. ``passed``: its Job succeeded and its bandwidth
    met the gate; ``transient``: it passed only when re-run after a first failure."""

    name: str
    nodes: tuple[str, ...]
    passed: bool
    domains: tuple[str, ...] = ()
    transient: bool = False


@dataclass(frozen=True)
class Verdict:
    """The end of the diagnosis: the Workflow's condition and the node-result ConfigMaps."""

    succeeded: bool
    message: str
    failed: tuple[dict[str, str], ...] = ()
    """Failed-nodes entries ``{name, reason, message}``."""
    healthy: tuple[str, ...] = ()
    limit_reached: bool = False


@dataclass(frozen=True)
class Step:
    """What follows a round: the new diagnose status and either the next groups or a verdict."""

    status: dict[str, Any]
    groups: tuple[Group, ...] = ()
    verdict: Verdict | None = None
    message: str = ""
    """The InProgress message of the next round."""


@dataclass
class _State:
    """The diagnose status being changed (a deep copy of what was read)."""

    status: dict[str, Any] = field(default_factory=dict)

    def nodes(self, key: str) -> list[str]:
        return list(self.status.get(key) or [])

    def add(self, key: str, nodes: Sequence[str]) -> None:
        self.status[key] = sorted(set(self.nodes(key)) | set(nodes))

    def remove(self, key: str, nodes: Sequence[str]) -> None:
        self.status[key] = sorted(set(self.nodes(key)) - set(nodes))

    @property
    def round(self) -> int:
        return int(self.status.get("round") or 0)

    def domain_of(self) -> dict[str, str]:
        return {
            n: domain
            for domain, result in (self.status.get("screeningResults") or {}).items()
            for n in result.get("nodes") or ()
        }


def _strings_and_envs(value: Any) -> list[tuple[str, str]]:
    """Every ``NCCL_MNNVL_ENABLE`` setting in ``value``: env entries and ``NAME=value`` text."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        if value.get("name") == MNNVL_ENV and "value" in value:
            found.append(("env", str(value["value"])))
        for item in value.values():
            found += _strings_and_envs(item)
    elif isinstance(value, list):
        for item in value:
            found += _strings_and_envs(item)
    elif isinstance(value, str):
        found += [("text", m.group(1).strip("'\"")) for m in _MNNVL_SETTING.finditer(value)]
    return found


def mnnvl_enabled(workload: Mapping[str, Any]) -> bool:
    """The job template sets ``NCCL_MNNVL_ENABLE`` (env or trainer args) to anything but 0."""
    settings = _strings_and_envs(dict(workload))
    return bool(settings) and any(v != "0" for _, v in settings)


def without_mnnvl(value: Any) -> Any:
    """``value`` (a Job spec) with every ``NCCL_MNNVL_ENABLE`` setting forced to 0."""
    if isinstance(value, dict):
        if value.get("name") == MNNVL_ENV and "value" in value:
            return {**value, "value": "0"}
        return {k: without_mnnvl(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_mnnvl(v) for v in value]
    if isinstance(value, str):
        return _MNNVL_SETTING.sub(f"{MNNVL_ENV}=0", value)
    return value


def no_nvl_group(name: str) -> bool:
    return name.startswith("screen-no-nvl-")


def screening_groups(nodes: Mapping[str, str | None], topology_key: str | None) -> list[Group]:
    """Round 1: one group per domain (sorted; a node without the label is in ``unknown``), or
    without a topology key name-sorted chunks of ``max(ceil(sqrt(N)), 2)`` nodes.

    ``nodes``: node name -> its topology label value (None when it has none)."""
    names = sorted(nodes)
    if topology_key:
        domains: dict[str, list[str]] = {}
        for name in names:
            domains.setdefault(nodes[name] or UNKNOWN_DOMAIN, []).append(name)
        return [Group(f"screen-{i}", tuple(domains[d]), (d,)) for i, d in enumerate(sorted(domains))]
    size = max(math.ceil(math.sqrt(len(names))), 2)
    return [
        Group(f"screen-{i}", tuple(names[j : j + size]), (f"chunk-{i}",))
        for i, j in enumerate(range(0, len(names), size))
    ]


def start(nodes: Mapping[str, str | None], topology_key: str | None, started: str) -> Step:
    """The first round and the status that records it (``started``: the diagnosis start time)."""
    groups = screening_groups(nodes, topology_key)
    status = {
        "stage": "intra-screening",
        "round": 1,
        "startTime": started,
        "screeningResults": {g.domains[0]: {"nodes": list(g.nodes), "passed": False} for g in groups},
    }
    return Step(status, tuple(groups), message=f"Screening round 1: {len(groups)} groups")


def _bisect(failed: Sequence[Sequence[str]], round_: int, min_size: int) -> list[Group]:
    """Halve each failed group larger than ``min_size`` (the nodes of the others stay suspects,
    for confirmation)."""
    groups: list[Group] = []
    for i, nodes in enumerate(failed):
        ordered = sorted(nodes)
        if len(ordered) <= min_size:
            continue
        mid = len(ordered) // 2
        groups.append(Group(f"bisect-{round_}-{i}a", tuple(ordered[:mid])))
        groups.append(Group(f"bisect-{round_}-{i}b", tuple(ordered[mid:])))
    return groups


def _halves(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    """A side split at its midpoint, as :func:`_bisect` splits a group."""
    ordered = sorted(nodes)
    mid = len(ordered) // 2
    return ordered[:mid], ordered[mid:]


def _mixes(index: int, probe: Mapping[str, Any]) -> list[Group]:
    """The groups of a pending probe: ``mix0`` = the first halves of both sides, ``mix1`` = the
    second halves."""
    a, b = _halves(probe["halfA"]), _halves(probe["halfB"])
    return [Group(f"cross-{index}-mix{i}", tuple(sorted(a[i] + b[i]))) for i in (0, 1)]


def _probed(side_a: Sequence[str], side_b: Sequence[str], probe_round: int) -> bool:
    """Whether two sides that fail only together are split again: within the probe rounds, while
    both sides can be halved and one has more than :data:`PROBE_SIDE_NODES` nodes."""
    sizes = (len(side_a), len(side_b))
    return probe_round <= MAX_PROBE_ROUNDS and min(sizes) >= 2 and max(sizes) > PROBE_SIDE_NODES


def _confirmation(state: _State) -> list[Group]:
    """Each suspect with a healthy reference (:func:`~nvcre.orchestration.pairing.references`)."""
    healthy = state.nodes("healthyNodes")
    suspects = sorted(set(state.nodes("suspectNodes")) - set(healthy))
    domain_of = state.domain_of()
    used: dict[str, int] = {}
    return [
        Group(f"confirm-{i}", (suspect, *pairing.references(suspect, healthy, domain_of, 1, used)))
        for i, suspect in enumerate(suspects)
    ]


class _Machine:
    def __init__(self, status: Mapping[str, Any], settings: Settings) -> None:
        self.state = _State(copy.deepcopy(dict(status)))
        self.settings = settings

    @property
    def status(self) -> dict[str, Any]:
        return self.state.status

    def next_round(self, stage: Stage, groups: Sequence[Group], message: str) -> Step:
        round_ = self.state.round + 1
        limit = self.settings.max_rounds
        if limit is not None and round_ > limit:
            return self.stop(f"round limit {limit} reached")
        self.status.update(stage=stage, round=round_)
        return Step(self.status, tuple(groups), message=f"{message} round {round_}: {len(groups)} groups")

    def stop(self, why: str) -> Step:
        """End at a limit, with the suspects known so far (never recorded as failed)."""
        suspects = sorted(set(self.state.nodes("suspectNodes")) - set(self.state.nodes("healthyNodes")))
        stage = self.status.get("stage", "intra-screening")
        self.status.update(stage="complete", outcome="LimitReached", faultyNodes=[])
        message = f"Diagnosis stopped: {why} in stage {stage}; "
        message += f"{len(suspects)} suspect nodes: {', '.join(suspects)}" if suspects else "no suspects"
        faults = self.status.get("infrastructureFaults") or []
        if faults:
            message += f"; {len(faults)} infrastructure faults"
        return Step(
            self.status,
            verdict=Verdict(
                False, message, healthy=tuple(self.state.nodes("healthyNodes")), limit_reached=True
            ),
        )

    def finish(self, cleared: str) -> Step:
        """The verdict once no round is left: confirmed faulty nodes, links, or ``cleared``."""
        faulty = self.state.nodes("faultyNodes")
        faults = self.status.get("infrastructureFaults") or []
        transient = self.status.get("transientFailures") or []
        healthy = tuple(sorted(set(self.state.nodes("healthyNodes")) - set(faulty)))
        self.status.update(stage="complete", faultyNodes=faulty)
        if faulty:
            self.status["outcome"] = "Faulty"
            message = f"Diagnosis complete: {len(faulty)} faulty nodes confirmed"
            if faults:
                message += f"; {len(faults)} infrastructure faults detected"
            failed = tuple(
                failednodes.entries(
                    faulty,
                    FailureCause.CONFIRMED_FAULTY,
                    "Confirmed faulty by diagnosis: failed together with a healthy reference node",
                )
            )
            return Step(self.status, verdict=Verdict(False, message, failed, healthy))
        if faults:
            self.status["outcome"] = "Faulty"
            message = f"Diagnosis complete: {len(faults)} infrastructure faults detected"
            return Step(self.status, verdict=Verdict(False, message, healthy=healthy))
        self.status["outcome"] = "Inconclusive" if transient else "Healthy"
        return Step(self.status, verdict=Verdict(True, cleared, healthy=healthy))

    # -- stage transitions -------------------------------------------------------------------

    def after_screening(self, results: Sequence[GroupResult]) -> Step:
        key = "screeningResults"
        self.status[key] = {r.domains[0]: {"nodes": list(r.nodes), "passed": r.passed} for r in results}
        self.state.add("healthyNodes", [n for r in results if r.passed for n in r.nodes])
        self.state.add("suspectNodes", [n for r in results if not r.passed for n in r.nodes])
        if self.settings.mnnvl:
            groups = [Group(f"screen-no-nvl-{i}", r.nodes, r.domains) for i, r in enumerate(results)]
            return self.next_round("intra-screening-no-nvl", groups, "No-NVLink screening")
        return self.inter_screening()

    def after_no_nvl(self, results: Sequence[GroupResult]) -> Step:
        self.status["noNVLScreeningResults"] = {
            r.domains[0]: {"nodes": list(r.nodes), "passed": r.passed} for r in results
        }
        failed = [n for r in results if not r.passed for n in r.nodes]
        self.state.add("suspectNodes", failed)
        self.state.add("noNVLSuspectNodes", failed)
        self.state.remove("healthyNodes", failed)
        return self.inter_screening()

    def _failed_domains(self) -> list[list[str]]:
        failed = set(self.state.nodes("suspectNodes"))
        return [
            list(r["nodes"])
            for _, r in sorted((self.status.get("screeningResults") or {}).items())
            if failed.intersection(r.get("nodes") or ())
        ]

    def inter_screening(self) -> Step:
        healthy = set(self.state.nodes("healthyNodes"))
        representatives = {
            domain: next(n for n in r["nodes"] if n in healthy)
            for domain, r in sorted((self.status.get("screeningResults") or {}).items())
            if healthy.intersection(r.get("nodes") or ())
        }
        self.status["representativeNodes"] = representatives
        if len(representatives) < 2:
            return self.bisection_start(ALL_DOMAINS_HEALTHY)
        group = Group(INTER_DOMAIN, tuple(representatives.values()), tuple(representatives))
        return self.next_round("inter-screening", [group], "Inter-domain screening")

    def after_inter(self, results: Sequence[GroupResult]) -> Step:
        (result,) = results
        if result.passed:
            return self.bisection_start(ALL_SCREENING_PASSED)
        representatives: dict[str, str] = self.status.get("representativeNodes") or {}
        domains = sorted(representatives)
        groups = [
            Group(f"cross-{i}", (representatives[a], representatives[b]), (a, b))
            for i, (a, b) in enumerate((a, b) for j, a in enumerate(domains) for b in domains[j + 1 :])
        ]
        self.status["crossBoundaryState"] = {"originStage": "inter-screening", "pendingProbes": []}
        return self.next_round("cross-boundary", groups, "Cross-boundary probing")

    def after_cross(self, results: Sequence[GroupResult]) -> Step:
        if (self.status.get("crossBoundaryState") or {}).get("originStage") == "bisection":
            return self.after_bisection(results)
        faults = list(self.status.get("infrastructureFaults") or [])
        for r in results:
            if not r.passed:
                a, b = r.domains
                faults.append(
                    {
                        "domain": f"{a},{b}",
                        "domains": [a, b],
                        "groupA": [r.nodes[0]],
                        "groupB": [r.nodes[1]],
                        "stage": "cross-boundary",
                    }
                )
        if faults:
            self.status["infrastructureFaults"] = faults
        else:
            # The inter-domain group failed, no pair of domains does: not reproduced.
            representatives = sorted((self.status.get("representativeNodes") or {}).values())
            self.status["transientFailures"] = [
                *(self.status.get("transientFailures") or []),
                {
                    "round": self.state.round - 1,
                    "group": INTER_DOMAIN,
                    "nodes": representatives,
                    "stage": "inter-screening",
                },
            ]
        self.status.pop("crossBoundaryState", None)
        return self.bisection_start(CROSS_BOUNDARY_CLEARED)

    def bisection_start(self, cleared: str) -> Step:
        """Bisect the failed screening domains, or confirm (or finish) when none is left."""
        groups = _bisect(self._failed_domains(), self.state.round + 1, self.settings.min_group_size)
        if groups:
            return self.next_round("bisection", groups, "Bisection")
        if self.state.nodes("suspectNodes"):
            return self.confirm()
        return self.finish(cleared)

    def after_bisection(self, results: Sequence[GroupResult]) -> Step:
        """A bisection round ended, with the mixes of the cross-boundary probes it ran, if any."""
        bisected = [r for r in results if r.name.startswith("bisect-")]
        self.state.add("healthyNodes", [n for r in bisected if r.passed for n in r.nodes])
        by_name = {r.name: r for r in results}
        pending = (self.status.get("crossBoundaryState") or {}).get("pendingProbes") or []
        probes = [p for i, probe in enumerate(pending) for p in self._after_probe(i, probe, by_name)]
        domain_of = self.state.domain_of()
        for r in bisected:
            if r.name.endswith("a") and r.passed:
                sibling = by_name.get(r.name[:-1] + "b")
                if sibling is not None and sibling.passed:
                    # Both halves pass, the whole failed: the fault lies between them.
                    domain = domain_of.get(r.nodes[0], UNKNOWN_DOMAIN)
                    probes += self._narrowed(domain, r.nodes, sibling.nodes, 1)
        failed = [r.nodes for r in bisected if not r.passed]
        groups = _bisect(failed, self.state.round + 1, self.settings.min_group_size)
        self.state.remove("suspectNodes", [n for r in bisected if r.passed for n in r.nodes])
        if probes:
            self.status["crossBoundaryState"] = {"originStage": "bisection", "pendingProbes": probes}
            groups += [g for i, probe in enumerate(probes) for g in _mixes(i, probe)]
            return self.next_round("cross-boundary", groups, "Cross-boundary probing")
        self.status.pop("crossBoundaryState", None)
        if groups:
            return self.next_round("bisection", groups, "Bisection")
        if self.state.nodes("suspectNodes"):
            return self.confirm()
        return self.finish(CROSS_BOUNDARY_CLEARED if pending else BISECTION_PASSED)

    def _after_probe(
        self, index: int, probe: Mapping[str, Any], by_name: Mapping[str, GroupResult]
    ) -> list[dict[str, Any]]:
        """Both mixes fail: the fault lies between the sides as they are. Both pass: not
        reproduced (transient). One fails: its halves are the sides of the next probe."""
        mix0, mix1 = (by_name[g.name] for g in _mixes(index, probe))
        domain, side_a, side_b = probe["domain"], probe["halfA"], probe["halfB"]
        if mix0.passed and mix1.passed:
            self.status["transientFailures"] = [
                *(self.status.get("transientFailures") or []),
                {
                    "round": self.state.round,
                    "group": f"cross-{index}",
                    "nodes": sorted([*side_a, *side_b]),
                    "stage": "cross-boundary",
                },
            ]
            return []
        if not mix0.passed and not mix1.passed:
            self._fault(domain, side_a, side_b, "cross-boundary")
            return []
        i = 0 if not mix0.passed else 1
        return self._narrowed(domain, _halves(side_a)[i], _halves(side_b)[i], int(probe["probeRound"]) + 1)

    def _narrowed(
        self, domain: str, side_a: Sequence[str], side_b: Sequence[str], probe_round: int
    ) -> list[dict[str, Any]]:
        """The probe of two sides that fail only together, or, once they cannot be narrowed
        further, their infrastructure fault."""
        if _probed(side_a, side_b, probe_round):
            return [
                {"domain": domain, "halfA": list(side_a), "halfB": list(side_b), "probeRound": probe_round}
            ]
        self._fault(domain, side_a, side_b, "bisection" if probe_round == 1 else "cross-boundary")
        return []

    def _fault(self, domain: str, side_a: Sequence[str], side_b: Sequence[str], stage: str) -> None:
        fault = {"domain": domain, "groupA": list(side_a), "groupB": list(side_b), "stage": stage}
        self.status["infrastructureFaults"] = [*(self.status.get("infrastructureFaults") or []), fault]

    def confirm(self) -> Step:
        if not self.state.nodes("healthyNodes"):
            suspects = self.state.nodes("suspectNodes")
            self.status.update(stage="complete", outcome="Faulty", faultyNodes=suspects, suspectNodes=[])
            message = f"No healthy reference node; {len(suspects)} suspects marked failed"
            failed = tuple(failednodes.entries(suspects, FailureCause.WORKLOAD_FAILED, message))
            return Step(self.status, verdict=Verdict(False, message, failed))
        return self.next_round("confirmation", _confirmation(self.state), "Confirmation")

    def after_confirmation(self, results: Sequence[GroupResult]) -> Step:
        faulty = [r.nodes[0] for r in results if not r.passed]
        self.state.add("faultyNodes", faulty)
        self.state.add("healthyNodes", [r.nodes[0] for r in results if r.passed])
        self.state.remove("suspectNodes", [r.nodes[0] for r in results])
        return self.finish(SUSPECTS_CLEARED)


_AFTER_ROUND: Final[Mapping[str, Callable[[_Machine, Sequence[GroupResult]], Step]]] = {
    "intra-screening": _Machine.after_screening,
    "intra-screening-no-nvl": _Machine.after_no_nvl,
    "inter-screening": _Machine.after_inter,
    "cross-boundary": _Machine.after_cross,
    "bisection": _Machine.after_bisection,
    "confirmation": _Machine.after_confirmation,
}
"""What ends each stage's round: the stage a round records to the step after it."""


def advance(status: Mapping[str, Any], results: Sequence[GroupResult], settings: Settings) -> Step:
    """The step after the round ``status`` records ended with ``results``."""
    machine = _Machine(status, settings)
    transient = [
        {"round": machine.state.round, "group": r.name, "nodes": list(r.nodes), "stage": status.get("stage")}
        for r in results
        if r.transient
    ]
    if transient:
        machine.status["transientFailures"] = [*(status.get("transientFailures") or []), *transient]
    stage = status.get("stage")
    after = _AFTER_ROUND.get(stage) if isinstance(stage, str) else None
    if after is not None:
        return after(machine, results)
    raise ValueError(f"no round to advance in diagnose stage {stage!r}")


def stop(status: Mapping[str, Any], settings: Settings, why: str) -> Step:
    """End the diagnosis now (the deadline passed), with what it knows."""
    return _Machine(status, settings).stop(why)


def round_bound(domain_sizes: Sequence[int], settings: Settings) -> int:
    """Most rounds one faulty node takes: screening (twice for MNNVL), inter-domain, one
    bisection round per halving of the largest failing domain down to ``minGroupSize``,
    confirmation."""
    largest = max(domain_sizes, default=1)
    halvings = max(math.ceil(math.log2(max(largest / settings.min_group_size, 1))), 0)
    return (2 if settings.mnnvl else 1) + 1 + halvings + 1
