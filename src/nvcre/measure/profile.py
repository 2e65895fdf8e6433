"""LogProfiles compiled for matching: patterns, typed captures, timestamps, worker strategy.

A LogProfile's regular expressions are RE2 syntax (Go's ``regexp``) and are compiled with RE2
(``google-re2``): matching takes time linear in the line, whatever the pattern and the line (a
backtracking engine can take minutes on one long line), and ``\\d \\w \\s`` match ASCII only.
Matching is an unanchored search, like Go's ``FindStringSubmatch``; a profile's patterns share a
:class:`Prefilter` that tells, in one pass over a line, which of them can match it. RE2 releases
the GIL while it matches. Every problem is a ``ProfileError`` naming the field.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import re2

from nvcre.measure.timelayout import LayoutError, TimeLayout, compile_layout

PATTERN_KEYS = (
    "trainingStep",
    "checkpointSave",
    "checkpointDone",
    "checkpointRestore",
    "checkpointLoaded",
    "checkpointTime",
    "applicationStart",
    "wallClock",
    "warmupStep",
    "bandwidthResult",
    "networkTransport",
)
REQUIRED_CAPTURES: Mapping[str, tuple[str, ...]] = {
    "bandwidthResult": ("size", "algBW", "busBW"),
    "networkTransport": ("transport",),
}
READERS = ("Patterns", "NcclTests")
"""``spec.reader``: the profile's own ``bandwidthResult`` pattern (default), or nvcre's built-in
nccl-tests table reader (:mod:`nvcre.measure.nccl`)."""
_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
MAX_PATTERN_MEMORY = 8 << 20
"""Bytes RE2 may use for one compiled pattern (RE2's default); a larger one is refused."""


class ProfileError(ValueError):
    """A LogProfile that cannot be compiled; the message starts with the field at fault."""


class Match:
    """One search's named captures (a group that took no part is None), read like ``re.Match``."""

    __slots__ = ("_groups",)

    def __init__(self, groups: dict[str, str | None]) -> None:
        self._groups = groups

    def group(self, name: str) -> str | None:
        return self._groups.get(name)

    __getitem__ = group

    def groupdict(self) -> dict[str, str | None]:
        return dict(self._groups)


def _options() -> Any:
    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    return options


def compile_regex(source: str) -> Any:
    """``source`` compiled with RE2 (UTF-8); raises ``ValueError`` with RE2's reason."""
    try:
        return re2.compile(source, _options())
    except re2.error as error:
        reason = error.args[0] if error.args else "cannot be compiled"
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ValueError(text) from None


class Prefilter:
    """Which of a profile's patterns occur in a line, found in one pass over it (an RE2 set).

    A parser searches each line with several patterns in turn; the set answers for all of them at
    once and remembers the last line it was asked about (per thread), so a line no pattern
    matches (most lines) costs one pass instead of one per pattern. The set also holds an empty
    pattern, which every line matches: an answer without it means RE2 gave up (its memory
    budget), and then every pattern is searched as if there were no prefilter.
    """

    def __init__(self, sources: list[str]) -> None:
        self._set = re2.Set.SearchSet(_options())
        for source in sources:
            self._set.Add(source)
        self._always = self._set.Add("")
        self._set.Compile()
        self._last = threading.local()

    def candidates(self, line: str) -> tuple[bytes, frozenset[int] | None]:
        """``line`` as UTF-8, and the indices of the patterns that occur in it (None: unknown)."""
        last = self._last
        if getattr(last, "line", None) is line:
            return last.data, last.hits
        data = line.encode(errors="replace")
        found = self._set.Match(data) or ()
        hits = frozenset(found) if self._always in found else None
        last.line, last.data, last.hits = line, data, hits
        return data, hits


@dataclass(frozen=True)
class Pattern:
    """One compiled event pattern of a profile."""

    key: str
    regex: Any
    """The RE2 pattern (``re2._Regexp``)."""
    units: Mapping[str, str] = field(default_factory=dict)
    names: tuple[tuple[str, int], ...] = ()
    """(name, index) of every named group."""
    prefilter: Prefilter | None = None
    """The profile's prefilter, in which this pattern is number ``index``."""
    index: int = -1

    @classmethod
    def of(cls, key: str, regex: Any, units: Mapping[str, str] | None = None) -> Pattern:
        names = tuple(sorted(dict(regex.groupindex).items(), key=lambda item: item[1]))
        return cls(key, regex, dict(units or {}), names)

    def search(self, line: str) -> Match | None:
        """The first match anywhere in ``line`` (matched as UTF-8 bytes, captures decoded)."""
        if self.prefilter is None:
            data = line.encode(errors="replace")
        else:
            data, hits = self.prefilter.candidates(line)
            if hits is not None and self.index not in hits:
                return None
        found = self.regex.search(data)
        if found is None:
            return None
        groups: dict[str, str | None] = {}
        for name, index in self.names:
            value = found[index]
            groups[name] = None if value is None else value.decode(errors="replace")
        return Match(groups)


@dataclass(frozen=True)
class WorkerStrategy:
    type: Literal["Single", "Multi"] = "Single"
    lifecycle_pod: Literal["first", "last"] = "first"
    training_step_pod: Literal["first", "last"] = "first"
    replicated_job_name: str | None = None
    """None when the profile does not say; each measurement has its own default."""


@dataclass(frozen=True)
class CompiledProfile:
    """A LogProfile ready to match lines; ``resource_version`` tells when to compile it again."""

    name: str
    resource_version: str
    timestamp: TimeLayout
    patterns: Mapping[str, Pattern]
    worker_strategy: WorkerStrategy = WorkerStrategy()
    container_name: str | None = None
    warmup_steps: int = 0
    log_interval: int = 0
    reader: str = "Patterns"

    def pattern(self, key: str) -> Pattern | None:
        return self.patterns.get(key)

    def parse_time(self, text: str) -> datetime | None:
        """A captured timestamp parsed with the profile's layout (aware, UTC when zoneless)."""
        return self.timestamp.parse(text)


# --- typed captures (spec 1.1: an unparsable number is 0) ----------------------------------------


def capture_text(match: Match, name: str) -> str:
    value = match.group(name)
    return value.strip() if value else ""


def capture_int(match: Match, name: str) -> int:
    text = capture_text(match, name)
    return int(text) if text.isascii() and text.isdecimal() else 0


def capture_float(match: Match, name: str) -> float:
    try:
        value = float(capture_text(match, name))
    except ValueError:
        return 0.0
    return value if value == value and abs(value) != float("inf") else 0.0


def capture_seconds(pattern: Pattern, match: Match, name: str) -> float:
    """A duration capture in seconds, normalised by the pattern's ``units`` (default seconds)."""
    return capture_float(match, name) * _UNIT_SECONDS.get(pattern.units.get(name, "s"), 1.0)


# --- compilation ---------------------------------------------------------------------------------


def compile_profile(profile: Mapping[str, Any]) -> CompiledProfile:
    """Compile a LogProfile object (wire form: ``metadata``, ``spec``)."""
    meta = profile.get("metadata") or {}
    spec = profile.get("spec") or {}
    layout = (spec.get("timestamp") or {}).get("layout") or ""
    if not layout:
        raise ProfileError("spec.timestamp.layout: required")
    try:
        timestamp = compile_layout(layout)
    except LayoutError as error:
        raise ProfileError(f"spec.timestamp.layout: {error}") from error
    raw = spec.get("patterns") or {}
    unknown = sorted(set(raw) - set(PATTERN_KEYS))
    if unknown:
        raise ProfileError(f"spec.patterns: unknown pattern(s) {unknown}; known: {list(PATTERN_KEYS)}")
    patterns = _prefiltered({key: compile_pattern(key, raw[key]) for key in PATTERN_KEYS if raw.get(key)})
    strategy = spec.get("workerStrategy") or {}
    reader = spec.get("reader") or READERS[0]
    if reader not in READERS:
        raise ProfileError(f"spec.reader: {reader!r} is not one of {list(READERS)}")
    return CompiledProfile(
        name=str(meta.get("name") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        timestamp=timestamp,
        patterns=patterns,
        worker_strategy=WorkerStrategy(
            type=strategy.get("type") or "Single",
            lifecycle_pod=strategy.get("lifecyclePod") or "first",
            training_step_pod=strategy.get("trainingStepPod") or "first",
            replicated_job_name=strategy.get("replicatedJobName") or None,
        ),
        container_name=spec.get("containerName") or None,
        warmup_steps=max(int(spec.get("warmupSteps") or 0), 0),
        log_interval=max(int(spec.get("logInterval") or 0), 0),
        reader=str(reader),
    )


def compile_pattern(key: str, pattern: Mapping[str, Any]) -> Pattern:
    where = f"spec.patterns.{key}"
    source = pattern.get("regex") or ""
    if not source:
        raise ProfileError(f"{where}.regex: required")
    if not isinstance(source, str):
        raise ProfileError(f"{where}.regex: must be a string")
    try:
        regex = compile_regex(source)
    except ValueError as error:
        raise ProfileError(f"{where}.regex: {error}") from error
    compiled = Pattern.of(key, regex, pattern.get("units"))
    captured = {name for name, _ in compiled.names}
    missing = [name for name in REQUIRED_CAPTURES.get(key, ()) if name not in captured]
    if missing:
        raise ProfileError(f"{where}.regex: must capture the named group(s) {missing}")
    bad = {name: unit for name, unit in compiled.units.items() if unit not in _UNIT_SECONDS}
    if bad:
        raise ProfileError(f"{where}.units: unknown unit(s) {bad}; use s, ms or us")
    example = pattern.get("example")
    if example and compiled.search(example) is None:
        raise ProfileError(f"pattern {key}: example does not match regex")
    return compiled


def _prefiltered(patterns: dict[str, Pattern]) -> dict[str, Pattern]:
    """The patterns sharing one :class:`Prefilter` (each alone when RE2 cannot build the set)."""
    try:
        prefilter = Prefilter([p.regex.pattern for p in patterns.values()])
    except re2.error:
        return patterns
    return {
        key: replace(pattern, prefilter=prefilter, index=index)
        for index, (key, pattern) in enumerate(patterns.items())
    }


class ProfileCache:
    """Compiled profiles by name, compiled again when the object's resourceVersion changes."""

    def __init__(self) -> None:
        self._compiled: dict[str, CompiledProfile] = {}

    def get(self, profile: Mapping[str, Any]) -> CompiledProfile:
        meta = profile.get("metadata") or {}
        name, version = str(meta.get("name") or ""), str(meta.get("resourceVersion") or "")
        cached = self._compiled.get(name)
        if cached is None or cached.resource_version != version or not version:
            cached = self._compiled[name] = compile_profile(profile)
        return cached
