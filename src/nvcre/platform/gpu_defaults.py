"""Per-node GPU and NIC defaults by architecture and platform (package data ``gpu_defaults.yaml``).

Resolution of each field: the caller's explicit value, then the platform override for the
architecture (an explicit 0 counts), then the architecture default, then the fallback for an
architecture without an entry, which raises a ``GPUArchitectureDefaults`` warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

import yaml

from nvcre import yamlio
from nvcre.api.v1alpha1.constants import EventReason
from nvcre.platform.detect import UNKNOWN_ARCHITECTURE
from nvcre.platform.events import Event, warning_if

_FIELDS: Final = {"gpusPerNode": int, "mlnxPerNode": int, "enableMNNVL": bool}


class GPUDefaultsDataError(RuntimeError):
    """The packaged gpu_defaults.yaml is missing or malformed (a build defect, not user input)."""


@dataclass(frozen=True)
class _Table:
    architectures: dict[str, dict[str, Any]]
    fallback: dict[str, Any]
    platform_overrides: dict[str, dict[str, dict[str, Any]]]


def _entry(where: str, raw: Any, *, complete: bool) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise GPUDefaultsDataError(f"gpu_defaults.yaml: {where} must be a mapping")
    for key, value in raw.items():
        kind = _FIELDS.get(key)
        if kind is None:
            raise GPUDefaultsDataError(f"gpu_defaults.yaml: {where}.{key}: unknown field")
        if type(value) is not kind or (isinstance(value, int) and value < 0):
            raise GPUDefaultsDataError(f"gpu_defaults.yaml: {where}.{key}: must be a {kind.__name__} >= 0")
    if complete and set(raw) != set(_FIELDS):
        missing = ", ".join(sorted(set(_FIELDS) - set(raw)))
        raise GPUDefaultsDataError(f"gpu_defaults.yaml: {where}: missing {missing}")
    return dict(raw)


def parse_table(text: str) -> _Table:
    """Parse and check the table; ``GPUDefaultsDataError`` names the first problem."""
    try:
        raw = yamlio.load(text)
    except yaml.YAMLError as error:
        raise GPUDefaultsDataError(f"gpu_defaults.yaml: not valid YAML: {error}") from error
    if not isinstance(raw, dict) or not isinstance(raw.get("architectures"), dict):
        raise GPUDefaultsDataError("gpu_defaults.yaml: architectures must be a mapping")
    architectures = {
        str(arch): _entry(f"architectures.{arch}", entry, complete=True)
        for arch, entry in raw["architectures"].items()
    }
    fallback = _entry("fallback", raw.get("fallback"), complete=True)
    overrides: dict[str, dict[str, dict[str, Any]]] = {}
    for platform, per_arch in (raw.get("platformOverrides") or {}).items():
        if not isinstance(per_arch, dict):
            raise GPUDefaultsDataError(f"gpu_defaults.yaml: platformOverrides.{platform} must be a mapping")
        overrides[str(platform)] = {
            str(arch): _entry(f"platformOverrides.{platform}.{arch}", entry, complete=False)
            for arch, entry in per_arch.items()
        }
    return _Table(architectures, fallback, overrides)


@cache
def _table() -> _Table:
    try:
        text = resources.files("nvcre.platform").joinpath("gpu_defaults.yaml").read_text()
    except OSError as error:
        raise GPUDefaultsDataError(f"gpu_defaults.yaml: cannot read packaged data: {error}") from error
    return parse_table(text)


@dataclass(frozen=True)
class GPUDefaults:
    """Resolved per-node values for one architecture on one platform."""

    architecture: str
    platform: str
    gpus_per_node: int
    mlnx_per_node: int
    enable_mnnvl: bool
    fallback_fields: tuple[str, ...] = ()
    """Fields (wire names) that came from the fallback because the architecture has no entry."""

    @property
    def message(self) -> str:
        """The ``GPUArchitectureDefaults`` warning text, ``""`` when no fallback value was used."""
        if not self.fallback_fields:
            return ""
        if self.architecture in ("", UNKNOWN_ARCHITECTURE):
            what = "GPU architecture is unknown (no target node has the nvidia.com/gpu.product label)"
        else:
            what = f'GPU architecture "{self.architecture}" has no gpu-defaults entry'
        values = {
            "gpusPerNode": self.gpus_per_node,
            "mlnxPerNode": self.mlnx_per_node,
            "enableMNNVL": str(self.enable_mnnvl).lower(),
        }
        used = ", ".join(f"{name}={values[name]}" for name in self.fallback_fields)
        return f"{what}; using fallback defaults {used}"

    @property
    def events(self) -> tuple[Event, ...]:
        return warning_if(EventReason.GPU_ARCHITECTURE_DEFAULTS, self.message)


def known_architectures() -> tuple[str, ...]:
    """Architectures with an entry in the table, sorted."""
    return tuple(sorted(_table().architectures))


def resolve_gpu_defaults(
    architecture: str,
    platform: str = "",
    *,
    gpus_per_node: int | None = None,
    mlnx_per_node: int | None = None,
    enable_mnnvl: bool | None = None,
) -> GPUDefaults:
    """Explicit values win; otherwise platform override, architecture default, fallback."""
    table = _table()
    arch_entry = table.architectures.get(architecture)
    platform_entry = table.platform_overrides.get(platform, {}).get(architecture, {})
    explicit: dict[str, Any] = {
        "gpusPerNode": gpus_per_node,
        "mlnxPerNode": mlnx_per_node,
        "enableMNNVL": enable_mnnvl,
    }
    values: dict[str, Any] = {}
    fallback: list[str] = []
    for name in _FIELDS:
        if explicit[name] is not None:
            values[name] = explicit[name]
        elif name in platform_entry:
            values[name] = platform_entry[name]
        elif arch_entry is not None:
            values[name] = arch_entry[name]
        else:
            values[name] = table.fallback[name]
            fallback.append(name)
    return GPUDefaults(
        architecture=architecture,
        platform=platform,
        gpus_per_node=int(values["gpusPerNode"]),
        mlnx_per_node=int(values["mlnxPerNode"]),
        enable_mnnvl=bool(values["enableMNNVL"]),
        fallback_fields=tuple(fallback),
    )


def gpu_defaults(architecture: str, platform: str = "") -> GPUDefaults:
    """The table's values for an architecture on a platform (no explicit values)."""
    return resolve_gpu_defaults(architecture, platform)
