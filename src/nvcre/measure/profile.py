"""LogProfiles compiled for Python: patterns, typed captures, timestamps, worker strategy.

A LogProfile's regular expressions are written for Go's RE2. They are translated for Python's
``re`` (``(?<name>`` groups, ``\\z``, ``\\Q…\\E``, POSIX classes) and compiled with ``re.ASCII``
so ``\\d \\w \\s`` match ASCII only, as in RE2. Matching is an unanchored search, like Go's
``FindStringSubmatch``. Every problem is a ``ProfileError`` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

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
DURATION_CAPTURES = frozenset({"stepTiming", "elapsedTime", "saveDuration", "loadDuration"})
_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


class ProfileError(ValueError):
    """A LogProfile that cannot be compiled; the message starts with the field at fault."""


@dataclass(frozen=True)
class Pattern:
    """One compiled event pattern of a profile."""

    key: str
    regex: re.Pattern[str]
    units: Mapping[str, str] = field(default_factory=dict)

    def search(self, line: str) -> re.Match[str] | None:
        return self.regex.search(line)


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

    def pattern(self, key: str) -> Pattern | None:
        return self.patterns.get(key)

    def parse_time(self, text: str) -> datetime | None:
        """A captured timestamp parsed with the profile's layout (aware, UTC when zoneless)."""
        return self.timestamp.parse(text)


# --- typed captures (spec 1.1: an unparsable number is 0) ----------------------------------------


def capture_text(match: re.Match[str], name: str) -> str:
    value = _group(match, name)
    return value.strip() if value else ""


def capture_int(match: re.Match[str], name: str) -> int:
    text = capture_text(match, name)
    return int(text) if text.isascii() and text.isdecimal() else 0


def capture_float(match: re.Match[str], name: str) -> float:
    try:
        value = float(capture_text(match, name))
    except ValueError:
        return 0.0
    return value if value == value and abs(value) != float("inf") else 0.0


def capture_seconds(pattern: Pattern, match: re.Match[str], name: str) -> float:
    """A duration capture in seconds, normalised by the pattern's ``units`` (default seconds)."""
    return capture_float(match, name) * _UNIT_SECONDS.get(pattern.units.get(name, "s"), 1.0)


def _group(match: re.Match[str], name: str) -> str | None:
    return match.group(name) if name in match.re.groupindex else None


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
    patterns = {key: compile_pattern(key, raw[key]) for key in PATTERN_KEYS if raw.get(key)}
    strategy = spec.get("workerStrategy") or {}
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
    )


def compile_pattern(key: str, pattern: Mapping[str, Any]) -> Pattern:
    where = f"spec.patterns.{key}"
    source = pattern.get("regex") or ""
    if not source:
        raise ProfileError(f"{where}.regex: required")
    try:
        regex = re.compile(translate_re2(source), re.ASCII)
    except (re.error, ValueError) as error:
        raise ProfileError(f"{where}.regex: {error}") from error
    missing = [name for name in REQUIRED_CAPTURES.get(key, ()) if name not in regex.groupindex]
    if missing:
        raise ProfileError(f"{where}.regex: must capture the named group(s) {missing}")
    units = dict(pattern.get("units") or {})
    bad = {name: unit for name, unit in units.items() if unit not in _UNIT_SECONDS}
    if bad:
        raise ProfileError(f"{where}.units: unknown unit(s) {bad}; use s, ms or us")
    example = pattern.get("example")
    if example and regex.search(example) is None:
        raise ProfileError(f"pattern {key}: example does not match regex")
    return Pattern(key, regex, units)


_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7F",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_POSIX_CLASS = re.compile(r"\[:(\^?)([a-z]+):\]")
_QUOTED = re.compile(r"\\Q(.*?)(?:\\E|$)", re.S)


def translate_re2(source: str) -> str:
    """Rewrite RE2-only syntax into Python ``re`` syntax (the rest is shared)."""
    if re.search(r"\\[pP]", source):
        raise ValueError("Unicode classes (\\p, \\P) are not supported; use ASCII classes")
    source = _QUOTED.sub(lambda m: re.escape(m.group(1)), source)
    source = source.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!")

    def posix(match: re.Match[str]) -> str:
        negate, name = match.groups()
        if name not in _POSIX:
            raise ValueError(f"unknown POSIX class [:{name}:]")
        if negate:
            raise ValueError(f"negated POSIX class [:^{name}:] is not supported")
        return _POSIX[name]

    source = _POSIX_CLASS.sub(posix, source)
    return re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", source)


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
