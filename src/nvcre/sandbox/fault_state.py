"""The faults in force in a running sandbox: the state file's format and how it changes.

``up`` writes the faults it was given (``--fault``); ``nvcrectl sandbox fault add|clear`` change
them while the sandbox runs; the runner reads the file at every poll and gives a group the faults
in force when the group starts, so a group that already runs keeps the faults it started with.
Each change raises :attr:`FaultState.generation`, which the runner acknowledges once it applied
the change (see :mod:`nvcre.sandbox.state`).

The file (``faults.json`` in the sandbox's state directory)::

    {"version": 1, "generation": 3,
     "faults": [{"spec": "gpu-node-003=slow-nic:0.85", "added": "2026-12-04T18:40:12Z"}]}

``spec`` is the fault as it was given, read by the one parser
(:func:`~nvcre.sandbox.faults.parse_fault`); ``added`` is when it was added (UTC, RFC 3339).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.sandbox.faults import Fault, FaultSpecError, parse_fault

VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One fault in force: as it was given, parsed, and when it was added."""

    spec: str
    fault: Fault
    added: str

    @property
    def ends(self) -> tuple[str, ...]:
        """The node (or, for ``link``, both ends) the fault names."""
        return (self.fault.node,) if self.fault.peer is None else (self.fault.node, self.fault.peer)

    @property
    def key(self) -> tuple[str, frozenset[str]]:
        """What a fault added later replaces: the same kind on the same node (or link)."""
        return self.fault.kind, frozenset(self.ends)


def entry(spec: str, added: str) -> Entry:
    """``spec`` parsed (:class:`~nvcre.sandbox.faults.FaultSpecError` if it does not)."""
    return Entry(spec, parse_fault(spec), added)


@dataclass(frozen=True)
class FaultState:
    """The faults in force, in the order they were added, and the change's number."""

    generation: int = 0
    entries: tuple[Entry, ...] = ()

    @property
    def faults(self) -> tuple[Fault, ...]:
        return tuple(e.fault for e in self.entries)


def initial(specs: Iterable[str], now: str) -> FaultState:
    """The state a sandbox starts with: ``up``'s faults as given (two of one kind on one node
    both hold, as they do at ``up``)."""
    return FaultState(1, tuple(entry(s, now) for s in specs))


def added(state: FaultState, specs: Sequence[str], now: str) -> FaultState:
    """``state`` with ``specs`` added at ``now``. A fault of a kind the node (or link) already has
    replaces that one (its argument, delay and time): ``slow-nic:0.5`` after ``slow-nic:0.85``
    leaves 0.5, not their product. Raises :class:`FaultSpecError` for a spec that does not parse,
    before anything changes."""
    new = [entry(s, now) for s in specs]
    entries = list(state.entries)
    for e in new:
        entries = [old for old in entries if old.key != e.key] + [e]
    return FaultState(state.generation + 1, tuple(entries))


def cleared(state: FaultState, nodes: Collection[str] | None = None) -> FaultState:
    """``state`` without the faults of ``nodes`` (a ``link`` naming one of them goes too), or
    without any fault when ``nodes`` is ``None``. Always a new generation, so that the runner
    also takes back what a fault of a group started before an earlier clear wrote since."""
    kept = () if nodes is None else tuple(e for e in state.entries if not set(e.ends) & set(nodes))
    return FaultState(state.generation + 1, kept)


def removed(before: FaultState, after: FaultState) -> list[Entry]:
    """The entries of ``before`` that ``after`` no longer has."""
    return [e for e in before.entries if e not in after.entries]


def by_node(state: FaultState, nodes: Iterable[str]) -> dict[str, list[Entry]]:
    """Each of ``nodes`` -> the faults in force that name it (a link under both its ends)."""
    return {n: [e for e in state.entries if n in e.ends] for n in nodes}


def encode(state: FaultState) -> str:
    document = {
        "version": VERSION,
        "generation": state.generation,
        "faults": [{"spec": e.spec, "added": e.added} for e in state.entries],
    }
    return json.dumps(document, indent=2) + "\n"


def decode(text: str) -> FaultState:
    """The state in ``text``; :class:`ValueError` names what is wrong with it."""
    try:
        document: Any = json.loads(text)
    except ValueError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(document, Mapping) or document.get("version") != VERSION:
        raise ValueError(f"expected an object with version {VERSION}")
    generation = document.get("generation")
    faults = document.get("faults")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        raise ValueError(f"generation {generation!r} is not a whole number >= 0")
    if not isinstance(faults, list):
        raise ValueError("faults is not a list")
    entries = []
    for i, item in enumerate(faults):
        if not isinstance(item, Mapping) or not all(isinstance(item.get(k), str) for k in ("spec", "added")):
            raise ValueError(f"faults[{i}] needs the strings spec and added")
        try:
            entries.append(entry(item["spec"], item["added"]))
        except FaultSpecError as error:
            raise ValueError(f"faults[{i}]: {error}") from None
    return FaultState(generation, tuple(entries))


__all__ = [
    "VERSION",
    "Entry",
    "FaultState",
    "added",
    "by_node",
    "cleared",
    "decode",
    "encode",
    "entry",
    "initial",
    "removed",
]
