"""Which dependencies belong to one Job (copied per Job) and which to the whole Workflow, in
what order to create them, and how a Job-scoped copy is renamed.

A dependency is Job-scoped when the Job spec names it (a TrainingRuntime named by runtimeRef),
or when a Job-scoped dependency names it or shares a resource-name-shaped string with it (a
ComputeDomain and the ResourceClaimTemplate that reference one channel). Everything else is
created once for the Workflow. Kinds starting with ``Cluster`` are never copied.

Every dependency lives in its Workflow's namespace: the manager's ClusterRole may write in any
namespace, so a namespace written on a dependency would let whoever may create a Workflow (or a
WorkloadRun, through its overrides) create objects where they may not (``check_namespaces``).
Cluster-scoped kinds are created only from ``CLUSTER_SCOPED_ALLOWED``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre.naming import MAX_K8S_NAME_LEN, truncate

_NAME_SHAPE = re.compile(r"^[a-z0-9][-a-z0-9.]*[a-z0-9]$")
PROTECTED = ("workloadMetadata",)
CLUSTER_SCOPED_ALLOWED: Final[frozenset[tuple[str, str]]] = frozenset()
"""(API group, kind) of the cluster-scoped objects a Workflow may create. None: nothing the catalog
or the examples render is cluster-scoped, and a cluster-scoped object is outside every namespace
(docs/operations.md)."""


def _name(dep: Mapping[str, Any]) -> str:
    return str((dep.get("metadata") or {}).get("name") or "")


def _strings(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, str):
        found.add(node)
    elif isinstance(node, Mapping):
        for value in node.values():
            found |= _strings(value)
    elif isinstance(node, list):
        for item in node:
            found |= _strings(item)
    return found


def _name_shaped(value: str) -> bool:
    return 3 <= len(value) <= 253 and bool(_NAME_SHAPE.match(value)) and any("a" <= c <= "z" for c in value)


def _job_strings(job_spec: Mapping[str, Any]) -> set[str]:
    spec = copy.deepcopy(dict(job_spec))
    spec.pop("workloadMetadata", None)
    for patch in ((spec.get("workload") or {}).get("trainJob") or {}).get("runtimePatches") or ():
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        template.pop("metadata", None)
        for job in (template.get("spec") or {}).get("replicatedJobs") or ():
            (job.get("template") or {}).pop("metadata", None)
            pod = (job.get("template") or {}).get("spec", {}).get("template") or {}
            pod.pop("metadata", None)
    return _strings(spec)


def _without_when(dep: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in dep.items() if k != "when"}


def job_scoped(dependencies: Sequence[Mapping[str, Any]], job_spec: Mapping[str, Any]) -> list[int]:
    """Indexes of the Job-scoped dependencies."""
    names = {_name(d): i for i, d in enumerate(dependencies)}
    strings = [_strings(_without_when(d)) for d in dependencies]
    cluster = [str(d.get("kind", "")).startswith("Cluster") for d in dependencies]
    seeds = [names[s] for s in _job_strings(job_spec) if s in names and not cluster[names[s]]]
    scoped: set[int] = set()
    queue = list(dict.fromkeys(seeds))
    while queue:
        index = queue.pop(0)
        if index in scoped:
            continue
        scoped.add(index)
        own = strings[index]
        shared = {s for s in own if _name_shaped(s) and s not in names}
        for other, other_strings in enumerate(strings):
            if other in scoped or cluster[other]:
                continue
            if _name(dependencies[other]) in own or shared & other_strings:
                queue.append(other)
    return sorted(scoped)


def creation_order(dependencies: Sequence[Mapping[str, Any]], indexes: Iterable[int]) -> list[int]:
    """Kahn's order over "A names B" edges (B first); ties by original index; cycles appended."""
    chosen = sorted(indexes)
    strings = {i: _strings(_without_when(dependencies[i])) for i in chosen}
    needs = {i: {j for j in chosen if j != i and _name(dependencies[j]) in strings[i]} for i in chosen}
    ordered: list[int] = []
    while True:
        ready = [i for i in chosen if i not in ordered and not (needs[i] - set(ordered))]
        if not ready:
            break
        ordered.append(ready[0])
    return ordered + [i for i in chosen if i not in ordered]


@dataclass(frozen=True)
class JobScopedCopies:
    objects: list[dict[str, Any]]
    """The renamed copies, in creation order."""
    job_spec: dict[str, Any]
    """The Job spec with every reference rewritten to the copies."""


def _replace_quoted(document: Any, replacements: Mapping[str, str]) -> Any:
    text = json.dumps(document)
    for old, new in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(json.dumps(old), json.dumps(new))
    return json.loads(text)


def job_scoped_copies(
    dependencies: Sequence[Mapping[str, Any]],
    job_spec: Mapping[str, Any],
    suffix: str,
) -> JobScopedCopies:
    """Renamed copies of the Job-scoped dependencies and the Job spec pointing at them.

    ``suffix`` comes from :func:`nvcre.naming.dependency_copy_suffix`.
    Every quoted occurrence of an old name is replaced (workload metadata labels excepted, so a
    queue label that happens to equal a name is never rewritten).
    """
    scoped = job_scoped(dependencies, job_spec)
    names = {_name(dependencies[i]) for i in scoped}
    counts: dict[str, int] = {}
    for i in scoped:
        for value in _strings(_without_when(dependencies[i])):
            if _name_shaped(value) and value not in names:
                counts[value] = counts.get(value, 0) + 1
    shared = {v for v, n in counts.items() if n >= 2}
    replacements = {old: truncate(old + suffix, MAX_K8S_NAME_LEN) for old in names | shared}
    copies = [
        _replace_quoted(_without_when(dependencies[i]), replacements)
        for i in creation_order(dependencies, scoped)
    ]
    protected = {k: job_spec[k] for k in PROTECTED if k in job_spec}
    spec = _replace_quoted({k: v for k, v in job_spec.items() if k not in protected}, replacements)
    spec.update(copy.deepcopy(protected))
    return JobScopedCopies(copies, spec)


# --- scope --------------------------------------------------------------------------------------


class DependencyScopeError(ValueError):
    """A dependency would be created outside its Workflow's namespace (another namespace, named by
    its field, or a cluster-scoped kind)."""


def _namespace_problem(dependency: Any, namespace: str, path: str) -> str | None:
    metadata = dependency.get("metadata") if isinstance(dependency, Mapping) else None
    written = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    if not written or written == namespace:
        return None
    theirs = f'"{namespace}"' if namespace else "(it has none)"
    return (
        f'{path}.metadata.namespace: "{written}" is not the Workflow\'s namespace {theirs}; a dependency is '
        "always created in its Workflow's namespace (leave the field out)"
    )


def check_namespaces(spec: Mapping[str, Any], namespace: str, path: str = "spec") -> None:
    """Refuse a ``metadata.namespace`` other than ``namespace`` on any dependency of ``spec``,
    its own or an override's (matching or not: the spec is wrong on every platform)."""
    dependencies = spec.get("dependencies") or ()
    overrides = spec.get("overrides") or ()
    candidates = [(d, f"{path}.dependencies[{i}]") for i, d in enumerate(dependencies)]
    for i, override in enumerate(overrides):
        nested = (override.get("dependencies") if isinstance(override, Mapping) else None) or ()
        candidates += [(d, f"{path}.overrides[{i}].dependencies[{j}]") for j, d in enumerate(nested)]
    for dependency, where in candidates:
        problem = _namespace_problem(dependency, namespace, where)
        if problem:
            raise DependencyScopeError(problem)


def check_cluster_scoped(api_version: str, kind: str, name: str) -> None:
    """Refuse a cluster-scoped kind that is not in ``CLUSTER_SCOPED_ALLOWED``."""
    group = api_version.rpartition("/")[0]
    if (group, kind) not in CLUSTER_SCOPED_ALLOWED:
        raise DependencyScopeError(
            f'{kind} "{name}" ({api_version}) is cluster-scoped; a Workflow creates its dependencies '
            "only in its own namespace"
        )
