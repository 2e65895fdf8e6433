"""Deterministic child-object names: truncation with an FNV-1a suffix, identical to the reference.

Kubernetes object names are ASCII (DNS-1123), so character and byte lengths coincide; every length
below is a character count of such a name. The hash is taken over the UTF-8 bytes of the name.
"""

from __future__ import annotations

from typing import Final

MAX_K8S_NAME_LEN: Final = 63
"""General Kubernetes name limit used for measurements and job-scoped dependency copies."""
MAX_WORKLOAD_NAME_LEN: Final = 44
"""TrainJob names (the JobSet created for a TrainJob inherits its name)."""
MAX_JOB_NAME_LEN: Final = 35
"""NVCRE Job names; ``<job>-workload`` then fits ``MAX_WORKLOAD_NAME_LEN``."""
MAX_WORKFLOW_NAME_LEN: Final = 31
"""Workflow names generated for certification categories."""

HASH_LEN: Final = 5

_FNV32_OFFSET_BASIS: Final = 0x811C9DC5
_FNV32_PRIME: Final = 0x01000193
_MASK32: Final = 0xFFFFFFFF


def fnv1a32(s: str) -> int:
    """FNV-1a 32-bit hash of the UTF-8 bytes of ``s``."""
    h = _FNV32_OFFSET_BASIS
    for byte in s.encode("utf-8"):
        h ^= byte
        h = (h * _FNV32_PRIME) & _MASK32
    return h


def short_hash(name: str) -> str:
    """The 5-character name suffix: first 5 characters of ``'%05x' % fnv1a32(name)``.

    ``'%05x'`` pads to *at least* five digits; a 32-bit hash usually prints as eight, and only
    the leading five are kept (so the suffix comes from the high-order bits).
    """
    return format(fnv1a32(name), "05x")[:HASH_LEN]


def truncate(name: str, max_len: int) -> str:
    """Shorten ``name`` to at most ``max_len`` characters, keeping it unique through a hash.

    Names that fit are returned unchanged. Otherwise the first ``max(max_len - 6, 1)`` characters
    are kept, trailing ``-`` are stripped from that prefix, and ``-`` plus :func:`short_hash` of
    the full original name is appended. (With ``max_len < 7`` the result is 7 characters long,
    as in the reference.)
    """
    if len(name) <= max_len:
        return name
    prefix = name[: max(max_len - HASH_LEN - 1, 1)].rstrip("-")
    return f"{prefix}-{short_hash(name)}"


def extract_hash(name: str) -> str:
    """A 5-character token identifying ``name``.

    If the text after the last ``-`` is exactly 5 characters it is returned as is (for names made
    by :func:`truncate` that is the hash suffix). Otherwise :func:`short_hash` of the whole name.
    Like the reference, a name whose last segment is any 5-character word (``...-train``)
    yields that word.
    """
    _, dash, last = name.rpartition("-")
    if dash and len(last) == HASH_LEN:
        return last
    return short_hash(name)


# --- child names -------------------------------------------------------------------------------


def category_options_suffix(
    *,
    nodes_per_job: int | None = None,
    enable_mnnvl: bool | None = None,
    test_scale: str = "",
    enable_checkpoint: bool | None = None,
    max_steps: int | None = None,
    exit_duration_mins: int | None = None,
    gpus_per_node: int | None = None,
) -> str:
    """Suffix distinguishing a category's Workflow by its per-category options.

    Parts, in this order, for each option that is set: ``n<nodesPerJob>``, ``mnnvl``/``nomnnvl``,
    ``<testScale>``, ``ckpt`` (only when checkpointing is enabled), ``s<maxSteps>``,
    ``e<exitDurationMins>``, ``g<gpusPerNode>``; joined with ``-`` and prefixed with ``-``.
    Empty when no option is set.
    """
    parts: list[str] = []
    if nodes_per_job is not None:
        parts.append(f"n{nodes_per_job}")
    if enable_mnnvl is not None:
        parts.append("mnnvl" if enable_mnnvl else "nomnnvl")
    if test_scale:
        parts.append(test_scale)
    if enable_checkpoint:
        parts.append("ckpt")
    if max_steps is not None:
        parts.append(f"s{max_steps}")
    if exit_duration_mins is not None:
        parts.append(f"e{exit_duration_mins}")
    if gpus_per_node is not None:
        parts.append(f"g{gpus_per_node}")
    return "".join(f"-{p}" for p in parts)


def certification_workflow_name(
    certification: str, domain: str, variant: str, options_suffix: str = ""
) -> str:
    """Workflow for one certification category: ``<cert>-<domain>-<variant><suffix>``, max 31."""
    return truncate(f"{certification}-{domain}-{variant}{options_suffix}", MAX_WORKFLOW_NAME_LEN)


def workload_run_workflow_name(workload_run: str) -> str:
    """The Workflow of a WorkloadRun carries exactly the run's name."""
    return workload_run


def uses_single_job_name(total_groups: int, iterations: int, *, diagnose: bool = False) -> bool:
    """Whether a Workflow's only Job is named ``<workflow>-job`` (one group, one iteration)."""
    return not diagnose and total_groups <= 1 and iterations <= 1


def job_name(workflow: str, group: str, iteration: int, *, single: bool) -> str:
    """Job for a group in an iteration (1-based): ``<wf>-job`` or ``<wf>-<group>-iter-<n>``, max 35."""
    raw = f"{workflow}-job" if single else f"{workflow}-{group}-iter-{iteration}"
    return truncate(raw, MAX_JOB_NAME_LEN)


def dependency_copy_suffix(workflow: str, group: str, iteration: int, *, single: bool) -> str:
    """Suffix of a job-scoped dependency copy: ``-<wfHash>-job`` or ``-<wfHash>-<group>-iter-<n>``."""
    wf_hash = extract_hash(workflow)
    return f"-{wf_hash}-job" if single else f"-{wf_hash}-{group}-iter-{iteration}"


def dependency_copy_name(dependency: str, workflow: str, group: str, iteration: int, *, single: bool) -> str:
    """Name of the per-Job copy of a job-scoped dependency (max 63)."""
    suffix = dependency_copy_suffix(workflow, group, iteration, single=single)
    return truncate(dependency + suffix, MAX_K8S_NAME_LEN)


def trainjob_name(job: str) -> str:
    """TrainJob created for a Job: ``<job>-workload``, max 44 (its JobSet inherits the name)."""
    return truncate(f"{job}-workload", MAX_WORKLOAD_NAME_LEN)


def goodput_measurement_name(job: str) -> str:
    """GoodputMeasurement created for a Job: ``<job>-goodput``, max 63."""
    return truncate(f"{job}-goodput", MAX_K8S_NAME_LEN)


def bandwidth_measurement_name(job: str) -> str:
    """BandwidthMeasurement created for a Job: ``<job>-bandwidth``, max 63."""
    return truncate(f"{job}-bandwidth", MAX_K8S_NAME_LEN)


def runtime_name(workload_run: str) -> str:
    """TrainingRuntime generated for a WorkloadRun."""
    return f"{workload_run}-runtime"


def config_map_name(workload_run: str) -> str:
    """ConfigMap holding a WorkloadRun's ``spec.config.inline`` files."""
    return f"{workload_run}-config"


def checkpoint_pvc_name(workload_run: str) -> str:
    """PersistentVolumeClaim for a WorkloadRun's checkpoints."""
    return f"{workload_run}-checkpoint-pvc"


def _uid8(owner_uid: str) -> str:
    if not owner_uid:
        raise ValueError("owner UID is empty")
    return owner_uid[:8]


def succeeded_nodes_config_map_name(owner_uid: str) -> str:
    """ConfigMap listing a Workflow's succeeded nodes: ``succeeded-nodes-<uid[:8]>``."""
    return f"succeeded-nodes-{_uid8(owner_uid)}"


def failed_nodes_config_map_name(owner_uid: str) -> str:
    """ConfigMap listing a Workflow's failed nodes: ``failed-nodes-<uid[:8]>``."""
    return f"failed-nodes-{_uid8(owner_uid)}"
