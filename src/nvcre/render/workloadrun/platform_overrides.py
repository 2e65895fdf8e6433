"""The WorkloadRun platform override table (``platform_overrides.yaml``), rendered for one run."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from nvcre import yamlio
from nvcre.render.workloadrun.env import EnvVar, env_to_mpi_args, replace_in_place

_PLACEHOLDER = re.compile(r"\$\{(\w+)(\|str)?\}")
_DROP = object()


@lru_cache(maxsize=1)
def _table() -> tuple[list[dict[str, Any]], dict[str, list[EnvVar]]]:
    pkg = resources.files(__package__)
    rows = yamlio.load(pkg.joinpath("platform_overrides.yaml").read_text())
    env = yamlio.load(pkg.joinpath("nccl_env.yaml").read_text())
    return rows, env


@dataclass(frozen=True)
class TableData:
    """What the table is rendered with."""

    entry: str
    framework: str
    nodes_per_job: int
    gpus_per_node: int
    mlnx_per_node: int
    nic_resource_name: str
    enable_mnnvl: bool
    strict_domain: bool

    def values(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "nodesPerJob": self.nodes_per_job,
            "gpusPerNode": self.gpus_per_node,
            "mlnxPerNode": self.mlnx_per_node,
            "nicResourceName": self.nic_resource_name,
            "strictDomain": True if self.strict_domain else _DROP,
            "mnnvl": "1" if self.enable_mnnvl else "0",
        }


def _subst(value: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            v = values[whole.group(1)]
            return str(v) if whole.group(2) and v is not _DROP else v
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            sv = _subst(v, values)
            if sv is not _DROP:
                out[_subst(k, values)] = sv
        return out
    if isinstance(value, list):
        return [_subst(v, values) for v in value]
    return value


@dataclass(frozen=True)
class PlatformRow:
    """One rendered row: an override for the Workflow plus what the build bakes in when it matches."""

    name: str
    when: dict[str, Any]
    override: dict[str, Any] | None
    pre_command: list[str] = field(default_factory=list)
    mpi_args: list[str] = field(default_factory=list)


_OVERRIDE_KEYS = ("jobTemplate", "jobTemplatePatch", "dependencies", "orchestration")


def render_table(data: TableData, user_env: Sequence[EnvVar]) -> list[PlatformRow]:
    """Every row that applies to this framework and whose required values are set, in order.

    A user ``spec.env`` value replaces a same-name variable in a row's env (it stays where the row
    puts it); names only the user sets are not copied into the rows.
    """
    rows, fragments = _table()
    values = data.values()
    out: list[PlatformRow] = []
    for raw in rows:
        frameworks = raw.get("frameworks")
        if frameworks and data.framework not in frameworks:
            continue
        if any(not values[r] for r in raw.get("requires", [])):
            continue
        row = _subst(raw, values)
        mpi_args = list(row.get("mpiArgs", []))
        override: dict[str, Any] = {"when": row["when"]}
        override.update({k: row[k] for k in _OVERRIDE_KEYS if k in row})
        if "env" in row:
            env = replace_in_place(_subst(fragments[row["env"]], values), user_env)
            if data.framework == "mpi":
                mpi_args += env_to_mpi_args(env)
            else:
                trainer = {"trainer": {"env": env}}
                override["jobTemplate"] = {"spec": {"workload": {"trainJob": trainer}}}
        has_patch = len(override) > 1
        out.append(
            PlatformRow(
                name=row["name"],
                when=row["when"],
                override=override if has_patch else None,
                pre_command=list(row.get("preCommand", [])),
                mpi_args=mpi_args,
            )
        )
    return out


@dataclass(frozen=True)
class Baked:
    pre_command: list[str]
    mpi_args: list[str]


def bake(rows: Sequence[PlatformRow], matches: Callable[[dict[str, Any]], bool]) -> Baked:
    """preCommand lines and mpiArgs of the rows that match the detected platform and GPU, in order."""
    pre: list[str] = []
    mpi: list[str] = []
    for row in rows:
        if (row.pre_command or row.mpi_args) and matches(row.when):
            pre += row.pre_command
            mpi += row.mpi_args
    return Baked(pre, mpi)


def overrides(rows: Sequence[PlatformRow]) -> list[dict[str, Any]]:
    """The rows that patch the Workflow, as ``spec.overrides`` entries."""
    return [row.override for row in rows if row.override is not None]
