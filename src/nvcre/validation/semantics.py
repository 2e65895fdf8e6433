"""Checks beyond the schema: what nvcre would otherwise refuse only after the GPUs ran.

The structural schema (and, at admission, the CRDs' CEL rules) checks types, lengths, threshold
keys, the comprehension-macro count and the sampleInterval minimum. What only nvcre's own code
can check runs here, with the functions the controllers run:

- threshold keys against the registry, and each threshold expression compiled and tried on a
  sample ``value``: it must give a bool (after the workload the Job would fail
  ``InvalidThresholdExpression``);
- node-health and override ``when`` expressions compiled within their limits and tried on a
  sample node or render context: an undeclared name, a result that is not a bool or an evaluation
  over budget is reported (an error that depends on the node's own fields is not);
- ``sampleInterval`` at least the minimum, a run's ``deadline`` longer than zero;
- a Certification's categories: no two may run as one Workflow (a category listed twice without
  options of its own that its Workflow's name carries);
- a LogProfile's patterns compiled;
- a measurement's ``logProfileRef``: a profile known here (built in, or a LogProfile validated
  alongside) must have the pattern the measurement reads; an unknown name is a warning, as the
  profile may exist on the cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from nvcre.api.v1alpha1.limits import (
    EXPRESSION_MAX_STEPS,
    HEALTH_EXPRESSION_MAX_STEPS,
    MIN_SAMPLE_INTERVAL_SECONDS,
    SAMPLE_INTERVAL_MESSAGE,
)
from nvcre.durations import parse_duration
from nvcre.validation.findings import Finding

Profiles = Mapping[str, Mapping[str, Any]]
"""LogProfile manifests by name."""

MEASUREMENTS = (("bandwidthMeasurement", "bandwidthResult"), ("goodputMeasurement", "trainingStep"))
"""Each measurement of a Job and the LogProfile pattern it reads."""
MEASUREMENT_KINDS = {"BandwidthMeasurement": "bandwidthResult", "GoodputMeasurement": "trainingStep"}


def _dig(data: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data if isinstance(data, dict) else {}


def _items(data: Any) -> list[tuple[int, dict[str, Any]]]:
    return [
        (i, item) for i, item in enumerate(data if isinstance(data, list) else ()) if isinstance(item, dict)
    ]


@dataclass
class Semantics:
    findings: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    """Not errors: what validation cannot know (a LogProfile that may exist on the cluster)."""


def semantic_findings(document: Mapping[str, Any], profiles: Profiles | None = None) -> Semantics:
    """The problems of a schema-valid object that only nvcre's own code finds.

    ``profiles`` are the LogProfiles validated alongside, which measurements may name besides
    the built-in ones.
    """
    checker = _Checker(profiles or {})
    spec = _dig(document, "spec")
    match document.get("kind"):
        case "WorkloadRun":
            checker.deadline(spec.get("deadline"))
            checker.thresholds(spec.get("thresholds"), "spec.thresholds")
            checker.measurements(spec, "spec")
            checker.overrides(spec.get("overrides"), "spec.overrides")
        case "Certification":
            checker.deadline(spec.get("deadline"))
            checker.thresholds(spec.get("thresholds"), "spec.thresholds")
            for index, category in _items(spec.get("categories")):
                path = f"spec.categories[{index}].options.thresholds"
                checker.thresholds(_dig(category, "options").get("thresholds"), path)
            checker.categories(str(_dig(document, "metadata").get("name") or ""), spec.get("categories"))
        case "Workflow":
            checker.job_spec(_dig(spec, "jobTemplate", "spec"), "spec.jobTemplate.spec")
            performance = _dig(spec, "validation", "performance", "thresholds")
            checker.thresholds(
                performance.get("thresholds"), "spec.validation.performance.thresholds.thresholds"
            )
            checker.overrides(spec.get("overrides"), "spec.overrides")
            for index, dependency in _items(spec.get("dependencies")):
                checker.when(dependency.get("when"), f"spec.dependencies[{index}].when")
        case "Job":
            checker.job_spec(spec, "spec")
        case "BandwidthMeasurement" | "GoodputMeasurement" as kind:
            checker.measurement(spec, "spec", MEASUREMENT_KINDS[kind])
        case "LogProfile":
            checker.log_profile(document)
    return checker.out


class _Checker:
    def __init__(self, profiles: Profiles) -> None:
        self.profiles = profiles
        self.out = Semantics()

    def _error(self, path: str, message: str) -> None:
        self.out.findings.append(Finding(path, message))

    def deadline(self, deadline: Any) -> None:
        """A run's ``spec.deadline`` longer than zero (the CRD's CEL rule)."""
        from nvcre.api.v1alpha1.common import DEADLINE_MESSAGE

        if isinstance(deadline, str) and deadline:
            try:
                zero = parse_duration(deadline) <= 0
            except ValueError:
                zero = False  # the schema's pattern says so
            if zero:
                self._error("spec.deadline", DEADLINE_MESSAGE)

    def job_spec(self, spec: Mapping[str, Any], path: str) -> None:
        """A Job spec, or the part of one an override patches in."""
        self.thresholds(spec.get("thresholds"), f"{path}.thresholds")
        expression = _dig(spec, "nodeHealthMonitor", "cel").get("expression")
        if isinstance(expression, str):
            self.health_expression(expression, f"{path}.nodeHealthMonitor.cel.expression")
        self.measurements(spec, path)

    def thresholds(self, thresholds: Any, path: str) -> None:
        if not isinstance(thresholds, dict):
            return
        from nvcre.cel import CELError
        from nvcre.measure.thresholds import check_threshold, unknown_keys

        unknown = unknown_keys(thresholds)
        if unknown is not None:
            self._error(path, unknown.message)
        for key, expression in thresholds.items():
            if not isinstance(expression, str):
                continue
            try:
                check_threshold(expression)
            except CELError as error:
                self._error(f"{path}[{json.dumps(key)}]", _invalid(expression, error.error))

    def categories(self, certification: str, categories: Any) -> None:
        """Two categories that would run as one Workflow (the controller refuses them alike)."""
        from pydantic import ValidationError

        from nvcre.api.v1alpha1.certification import Category
        from nvcre.catalog.options import name_clash

        try:
            parsed = [Category.model_validate(c) for c in categories or ()]
        except ValidationError:
            return  # the schema reports it
        clash = name_clash(certification, parsed)
        if clash is not None:
            self._error(f"spec.categories[{clash.second}]", clash.message(parsed))

    def health_expression(self, expression: str, path: str) -> None:
        from nvcre.health.nodes import with_defaults

        sample = {"node": with_defaults({"metadata": {"name": "sample-node"}})}
        self._expression(expression, path, sample, HEALTH_EXPRESSION_MAX_STEPS)

    def when(self, when: Any, path: str) -> None:
        expression = when.get("expression") if isinstance(when, Mapping) else None
        if isinstance(expression, str):
            from nvcre.render.overrides import OverrideContext

            self._expression(
                expression, f"{path}.expression", OverrideContext().cel_variables(), EXPRESSION_MAX_STEPS
            )

    def overrides(self, overrides: Any, path: str) -> None:
        for index, override in _items(overrides):
            self.when(override.get("when"), f"{path}[{index}].when")
            self.job_spec(_dig(override, "jobTemplate", "spec"), f"{path}[{index}].jobTemplate.spec")

    def _expression(self, expression: str, path: str, sample: Mapping[str, Any], steps: int) -> None:
        """Compiled within its limits, then tried on a sample: its type, its undeclared names and
        its budget are properties of the expression; other errors may come from the sample."""
        from nvcre.cel import CELError, compile_expression

        try:
            compile_expression(expression).evaluate_bool(sample, steps=steps)
        except CELError as error:
            if error.kind != "evaluate" or error.error.startswith("undeclared reference"):
                self._error(path, _invalid(expression, error.error))

    def measurements(self, spec: Mapping[str, Any], path: str) -> None:
        for key, needs in MEASUREMENTS:
            measurement = spec.get(key)
            if isinstance(measurement, dict):
                self.measurement(measurement, f"{path}.{key}", needs)

    def measurement(self, measurement: Mapping[str, Any], path: str, needs: str) -> None:
        interval = measurement.get("sampleInterval")
        if isinstance(interval, str) and interval:
            try:
                too_short = parse_duration(interval) < MIN_SAMPLE_INTERVAL_SECONDS * 1_000_000_000
            except ValueError:
                too_short = False  # the schema's pattern says so
            if too_short:
                self._error(f"{path}.sampleInterval", SAMPLE_INTERVAL_MESSAGE)
        name = measurement.get("logProfileRef")
        if isinstance(name, str) and name:
            self._profile_ref(name, f"{path}.logProfileRef", needs)

    def _profile_ref(self, name: str, path: str, needs: str) -> None:
        builtin = _builtin_profiles()
        profile = self.profiles.get(name) or builtin.get(name)
        if profile is None:
            where = ", ".join(sorted(builtin))
            self.out.warnings.append(
                Finding(
                    path,
                    f'LogProfile "{name}" is neither built in ({where}) nor among the manifests '
                    "validated; it must exist on the cluster",
                )
            )
        elif not _reads(profile, needs):
            alternative = " (nor spec.reader: NcclTests)" if needs == "bandwidthResult" else ""
            self._error(
                path,
                f'LogProfile "{name}" has no spec.patterns.{needs}{alternative}, which this measurement reads',
            )

    def log_profile(self, document: Mapping[str, Any]) -> None:
        from nvcre.validation.logprofiles import profile_problems

        for path, problem in profile_problems(dict(document)):
            self._error(path or "spec", problem)


def _reads(profile: Mapping[str, Any], needs: str) -> bool:
    """Whether the profile reads what a measurement needs: its pattern, or for bandwidth rows the
    built-in nccl-tests table reader."""
    from nvcre.measure.nccl.reader import NCCL_TESTS

    spec = _dig(profile, "spec")
    if needs == "bandwidthResult" and spec.get("reader") == NCCL_TESTS:
        return True
    return bool(_dig(spec, "patterns").get(needs))


@cache
def _builtin_profiles() -> dict[str, dict[str, Any]]:
    from nvcre.measure.builtin import builtin_profiles

    return {str(p["metadata"]["name"]): p for p in builtin_profiles()}


def _invalid(expression: str, why: str) -> str:
    return f"Invalid value: {json.dumps(expression)}: {why}"
