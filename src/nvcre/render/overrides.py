"""Workflow overrides: the context, ``when`` matching, and applying every matching override.

``apply_overrides`` walks ``spec.overrides`` in list order. For each override whose ``when``
matches it applies, in this order: ``jobTemplate`` (strategic merge patch of the JobTemplateSpec),
``jobTemplatePatch`` (RFC 6902), ``dependencies`` (deep merge by apiVersion, kind and name) and
``orchestration`` (each set field replaces). It never mutates its input and records every matched
override with a summary of its ``when`` and of what it patched. Any failure is an
``OverrideError`` whose message starts with the field path (``spec.overrides[2].jobTemplatePatch[0]``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from nvcre.api.v1alpha1.common import OverrideSpec, StringMatchSpec, WhenSpec
from nvcre.api.v1alpha1.constants import EventReason, TrainerKind, WorkflowReason
from nvcre.api.v1alpha1.meta import NvcreModel
from nvcre.platform.detect import topology_domain_count
from nvcre.platform.events import Event
from nvcre.render.merge import (
    JOB_TEMPLATE_SCHEMA,
    JSONPatchError,
    MergeError,
    json_patch,
    merge_dependencies,
    strategic_merge,
)

if TYPE_CHECKING:
    from nvcre.api.v1alpha1.workflow import WorkflowSpec

TOPOLOGY_MODE_SIMPLE: Final = "simple"
TOPOLOGY_MODE_TOPOLOGY: Final = "topology"
EXPRESSION_SUMMARY_LIMIT: Final = 40


class OverrideError(ValueError):
    """An override could not be parsed, matched or applied; ``path`` names the field."""

    reason: Final = WorkflowReason.OVERRIDE_ERROR

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")

    @property
    def condition_message(self) -> str:
        """The Workflow's ``Failed`` condition message."""
        return f"Failed to apply overrides: {self}"


# --- context -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OverrideContext:
    """What a ``when`` is matched against."""

    platform: str = ""
    gpu_architecture: str = ""
    workload_kind: str = ""
    topology_mode: str = TOPOLOGY_MODE_SIMPLE
    domain_count: int = 0
    config: Mapping[str, Any] | None = None
    """Matched by ``when.config``; without one a ``config`` clause never matches."""

    @classmethod
    def for_spec(
        cls,
        spec: Mapping[str, Any],
        *,
        platform: str,
        gpu_architecture: str,
        nodes: Sequence[Mapping[str, Any]] = (),
        config: Mapping[str, Any] | None = None,
    ) -> OverrideContext:
        """The context of a Workflow spec (wire form) on the given (discovered) nodes."""
        job_spec = _dig(spec, "jobTemplate", "spec")
        workload = _dig(job_spec, "workload")
        topology = _dig(spec, "orchestration", "topology")
        topology_key = topology.get("topologyKey") if topology else None
        return cls(
            platform=platform,
            gpu_architecture=gpu_architecture,
            workload_kind=TrainerKind.TRAIN_JOB if workload.get("trainJob") else "",
            topology_mode=TOPOLOGY_MODE_TOPOLOGY if topology else TOPOLOGY_MODE_SIMPLE,
            domain_count=topology_domain_count(nodes, str(topology_key) if topology_key else None),
            config=config,
        )

    def cel_variables(self) -> dict[str, Any]:
        """Variables of ``when.expression``."""
        return {
            "platform": self.platform,
            "gpuArchitecture": self.gpu_architecture,
            "workloadKind": self.workload_kind,
            "topologyMode": self.topology_mode,
            "domainCount": self.domain_count,
            "topology": {"mode": self.topology_mode, "domainCount": self.domain_count},
            "config": dict(self.config or {}),
        }


def _dig(data: Any, *keys: str) -> Mapping[str, Any]:
    for key in keys:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data if isinstance(data, Mapping) else {}


# --- when --------------------------------------------------------------------------------------


def _string_matches(match: StringMatchSpec, value: str) -> bool:
    if match.equals and value != match.equals:
        return False
    if match.in_ and value not in match.in_:
        return False
    return not (match.not_in and value in match.not_in)


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and _subset(value, actual[key]) for key, value in expected.items()
        )
    return bool(expected == actual)


def when_matches(when: WhenSpec | Mapping[str, Any], ctx: OverrideContext, *, path: str = "when") -> bool:
    """All set clauses must hold; an empty ``when`` always matches.

    A CEL failure raises ``OverrideError`` at ``<path>.expression``.
    """
    spec = when if isinstance(when, WhenSpec) else _parse(WhenSpec, when, path)
    if spec.gpu_architecture and not _string_matches(spec.gpu_architecture, ctx.gpu_architecture):
        return False
    if spec.platform and not _string_matches(spec.platform, ctx.platform):
        return False
    if spec.workload_kind and spec.workload_kind != ctx.workload_kind:
        return False
    if spec.topology:
        if spec.topology.mode and spec.topology.mode != ctx.topology_mode:
            return False
        count = spec.topology.domain_count
        if count:
            if count.equals is not None and ctx.domain_count != count.equals:
                return False
            if count.greater_than is not None and not ctx.domain_count > count.greater_than:
                return False
            if count.less_than is not None and not ctx.domain_count < count.less_than:
                return False
    if spec.config is not None and (ctx.config is None or not _subset(spec.config, ctx.config)):
        return False
    if spec.expression:
        from nvcre import cel  # cel-python is costly to import: only the renders with an expression pay

        try:
            return cel.evaluate_bool(spec.expression, ctx.cel_variables())
        except cel.CELError as error:
            raise OverrideError(f"{path}.expression", str(error)) from error
    return True


def _summarize_match(match: StringMatchSpec) -> str:
    parts = []
    if match.equals:
        parts.append(match.equals)
    if match.in_:
        parts.append(f"in [{','.join(match.in_)}]")
    if match.not_in:
        parts.append(f"notIn [{','.join(match.not_in)}]")
    return ",".join(parts)


def summarize_when(when: WhenSpec) -> str:
    """``gpuArchitecture=notIn [a100], platform=azure``; ``<always>`` for an empty when."""
    parts: list[str] = []
    if when.gpu_architecture and _summarize_match(when.gpu_architecture):
        parts.append(f"gpuArchitecture={_summarize_match(when.gpu_architecture)}")
    if when.platform and _summarize_match(when.platform):
        parts.append(f"platform={_summarize_match(when.platform)}")
    if when.workload_kind:
        parts.append(f"workloadKind={when.workload_kind}")
    if when.topology and when.topology.mode:
        parts.append(f"topology.mode={when.topology.mode}")
    if when.topology and when.topology.domain_count:
        count = when.topology.domain_count
        bounds = [
            f"{sign}{value}"
            for sign, value in (("=", count.equals), (">", count.greater_than), ("<", count.less_than))
            if value is not None
        ]
        if bounds:
            parts.append(f"topology.domainCount{','.join(bounds)}")
    if when.config is not None:
        parts.append("config=<custom>")
    if when.expression:
        text = when.expression
        if len(text) > EXPRESSION_SUMMARY_LIMIT:
            text = text[: EXPRESSION_SUMMARY_LIMIT - 3] + "..."
        parts.append(f"expression={text}")
    return ", ".join(parts) if parts else "<always>"


# --- records -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedOverride:
    """One matched override: ``status.orchestration.appliedOverrides[]`` plus its event."""

    index: int
    when: WhenSpec
    patches: tuple[str, ...]
    """``jobTemplate``, ``jobTemplatePatch``, ``<n> dependencies``, ``orchestration`` (those present)."""
    no_op: bool

    @property
    def when_summary(self) -> str:
        return summarize_when(self.when)

    @property
    def patches_summary(self) -> str:
        return ", ".join(self.patches) if self.patches else "none"

    def to_status(self) -> dict[str, Any]:
        """Wire form of the API's ``AppliedOverride`` (index, when, patches, noOp)."""
        return {
            "index": self.index,
            "when": self.when.to_dict(),
            "patches": list(self.patches),
            "noOp": self.no_op,
        }

    def to_summary(self) -> dict[str, Any]:
        """Human-readable form (used for render annotations): the status with ``when`` and
        ``patches`` summarized."""
        return {**self.to_status(), "when": self.when_summary, "patches": self.patches_summary}

    @property
    def event(self) -> Event:
        if self.no_op:
            return Event.warning(
                EventReason.OVERRIDE_NO_OP,
                f"Override[{self.index}] matched ({self.when_summary}) but produced no changes — check field paths",
            )
        return Event.normal(
            EventReason.OVERRIDE_APPLIED,
            f"Override[{self.index}] matched ({self.when_summary}), patching {self.patches_summary}",
        )


@dataclass(frozen=True)
class OverrideResult:
    """The effective spec (overrides list kept as given) and every matched override, in order."""

    spec: dict[str, Any]
    applied: tuple[AppliedOverride, ...]
    total: int
    """How many overrides the spec has."""
    context: OverrideContext

    def status_records(self) -> list[dict[str, Any]]:
        return [record.to_status() for record in self.applied]

    @property
    def events(self) -> tuple[Event, ...]:
        """``OverrideApplied``/``OverrideNoOp`` per match, or ``NoOverridesMatched`` when none did."""
        if self.applied:
            return tuple(record.event for record in self.applied)
        if not self.total:
            return ()
        return (
            Event.normal(
                EventReason.NO_OVERRIDES_MATCHED,
                f"0 of {self.total} overrides matched "
                f"(platform={self.context.platform}, gpuArchitecture={self.context.gpu_architecture})",
            ),
        )


# --- application -------------------------------------------------------------------------------


def _describe(item: Mapping[str, Any], prefix: str) -> tuple[str, str]:
    """(field path, message) of one pydantic error, the path rooted at ``prefix``."""
    loc = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"])
    message = "unknown field" if item["type"] == "extra_forbidden" else str(item["msg"])
    return f"{prefix}{loc}", message


def _validation_error(error: ValidationError, prefix: str) -> tuple[str, str]:
    """(field path, message) of the first pydantic error."""
    return _describe(error.errors()[0], prefix)


def _parse(model: type[Any], raw: Any, path: str) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise OverrideError(*_validation_error(error, path)) from error


def _canonical(spec: Mapping[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)


def _job_template_problems(job_template: Any) -> list[tuple[str, str]]:
    # Imported here: the Workflow kind's models are only needed once an override patches a job
    # template, and an offline WorkloadRun render (a cold start) never builds them otherwise.
    from nvcre.api.v1alpha1.workflow import JobTemplate

    try:
        JobTemplate.model_validate(job_template)
    except ValidationError as error:
        return [_describe(item, "jobTemplate") for item in error.errors()]
    return []


def _check_job_template(before: Any, after: Any, path: str) -> None:
    """Fail when the override made the job template invalid (problems it did not add are not its fault)."""
    existing = set(_job_template_problems(before))
    for where, message in _job_template_problems(after):
        if (where, message) not in existing:
            raise OverrideError(path, f"the result is not a valid job template: {where}: {message}")


def _split_spec(spec: Mapping[str, Any] | WorkflowSpec) -> tuple[dict[str, Any], list[Any]]:
    if isinstance(spec, NvcreModel):  # a WorkflowSpec
        return spec.to_dict(), list(spec.overrides or [])
    if not isinstance(spec, Mapping):
        raise TypeError(f"spec must be a mapping or a WorkflowSpec, got {type(spec).__name__}")
    raw = spec.get("overrides")
    if raw is not None and not isinstance(raw, list):
        raise OverrideError("spec.overrides", "must be a list")
    return copy.deepcopy(dict(spec)), list(raw or [])


def parse_overrides(raw: Iterable[Any], path: str = "spec.overrides") -> list[OverrideSpec]:
    """Typed overrides; an unknown or ill-typed field raises ``OverrideError`` naming it."""
    return [
        item if isinstance(item, OverrideSpec) else _parse(OverrideSpec, item, f"{path}[{index}]")
        for index, item in enumerate(raw)
    ]


def apply_override(
    spec: Mapping[str, Any], override: OverrideSpec, path: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Apply one override (already matched) to a copy of ``spec``; returns it and the patch summary."""
    result = copy.deepcopy(dict(spec))
    patches: list[str] = []
    if override.job_template is not None:
        patches.append("jobTemplate")
        try:
            merged = strategic_merge(
                result.get("jobTemplate") or {}, override.job_template, JOB_TEMPLATE_SCHEMA
            )
        except MergeError as error:
            raise OverrideError(f"{path}.jobTemplate.{error.path}".rstrip("."), error.message) from error
        _check_job_template(result.get("jobTemplate"), merged, f"{path}.jobTemplate")
        result["jobTemplate"] = merged
    if override.job_template_patch is not None:
        patches.append("jobTemplatePatch")
        operations = override.job_template_patch
        if isinstance(operations, str):
            try:
                operations = json.loads(operations)
            except json.JSONDecodeError as error:
                raise OverrideError(f"{path}.jobTemplatePatch", f"not valid JSON: {error.msg}") from error
        try:
            patched = json_patch(result.get("jobTemplate") or {}, operations)
        except JSONPatchError as error:
            raise OverrideError(f"{path}.jobTemplatePatch[{error.index}]", error.message) from error
        _check_job_template(result.get("jobTemplate"), patched, f"{path}.jobTemplatePatch")
        result["jobTemplate"] = patched
    if override.dependencies is not None:
        patches.append(f"{len(override.dependencies)} dependencies")
        try:
            result["dependencies"] = merge_dependencies(
                result.get("dependencies") or [], override.dependencies
            )
        except MergeError as error:
            raise OverrideError(f"{path}.dependencies{error.path}", error.message) from error
    if override.orchestration is not None:
        patches.append("orchestration")
        fields = override.orchestration.model_dump(by_alias=True, exclude_unset=True, mode="json")
        orchestration = dict(result.get("orchestration") or {})
        for key, value in fields.items():
            if value is not None:
                orchestration[key] = copy.deepcopy(value)
        result["orchestration"] = orchestration
    return result, tuple(patches)


def apply_overrides(
    spec: Mapping[str, Any] | WorkflowSpec,
    ctx: OverrideContext,
    overrides: Iterable[Any] | None = None,
) -> OverrideResult:
    """Apply every override of ``spec`` (or the given ``overrides``) whose ``when`` matches ``ctx``.

    Pure: ``spec`` is not modified. The returned spec keeps its ``overrides`` list unchanged.
    Always apply to the spec as stored, never to a result of this function: a JSON patch that
    appends (``/-``) would append again.
    """
    base, own = _split_spec(spec)
    items = parse_overrides(own if overrides is None else overrides)
    current = base
    applied: list[AppliedOverride] = []
    for index, override in enumerate(items):
        path = f"spec.overrides[{index}]"
        if not when_matches(override.when, ctx, path=f"{path}.when"):
            continue
        before = _canonical(current)
        current, patches = apply_override(current, override, path)
        applied.append(AppliedOverride(index, override.when, patches, _canonical(current) == before))
    return OverrideResult(current, tuple(applied), len(items), ctx)


def select_dependencies(
    dependencies: Iterable[Mapping[str, Any]], ctx: OverrideContext, path: str = "spec.dependencies"
) -> list[dict[str, Any]]:
    """The dependencies whose own ``when`` matches (all without one), with ``when`` removed."""
    selected: list[dict[str, Any]] = []
    for index, dependency in enumerate(dependencies):
        item = copy.deepcopy(dict(dependency))
        when = item.pop("when", None)
        if when is None or when_matches(when, ctx, path=f"{path}[{index}].when"):
            selected.append(item)
    return selected


__all__ = [
    "AppliedOverride",
    "OverrideContext",
    "OverrideError",
    "OverrideResult",
    "apply_override",
    "apply_overrides",
    "parse_overrides",
    "select_dependencies",
    "summarize_when",
    "when_matches",
]
