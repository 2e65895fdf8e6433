"""Built-in volumes, the user's volumes, mounts, config and init containers, and what is reserved.

Seed 001: ``spec.volumes``, ``spec.volumeMounts``, ``spec.config`` and ``spec.initContainers``
land on the pods where the workload runs (torch/exec node pods, MPI worker pods), never on the
MPI launcher, except ``spec.config``, which the launcher also mounts read-only at ``/config``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import WORKLOAD_CONTAINER_NAME
from nvcre.api.v1alpha1.workloadrun import WorkloadRunSpec
from nvcre.naming import config_map_name
from nvcre.render.workloadrun.errors import BuildError

DSHM_VOLUME = "dshm"
DSHM_PATH = "/dev/shm"
CONFIG_VOLUME = "config-volume"
CONFIG_PATH = "/config"
CONFIG_MODE = 0o755
MPI_SSH_AUTH_VOLUME = "mpi-ssh-auth"
MPI_SSH_RAW_PATH = "/tmp/mpi-ssh-raw"
ROOT_SSH_PATH = "/root/.ssh"
TRAINER_TOKEN_VOLUME = "kubeflow-trainer-token"
TRAINER_TOKEN_PATH = "/var/run/secrets/kubeflow/trainer"


def dshm_volume() -> dict[str, Any]:
    return {"name": DSHM_VOLUME, "emptyDir": {"medium": "Memory"}}


def dshm_mount() -> dict[str, Any]:
    return {"name": DSHM_VOLUME, "mountPath": DSHM_PATH}


@dataclass(frozen=True)
class Reserved:
    """What a framework's pods already use: volume names, exact paths, and trees."""

    volume_names: dict[str, str]
    exact_paths: dict[str, str]
    path_trees: dict[str, str]


def reserved_for(framework: str, config_set: bool) -> Reserved:
    names = {DSHM_VOLUME: "the built-in /dev/shm volume", CONFIG_VOLUME: "the spec.config volume"}
    exact = {DSHM_PATH: "the built-in /dev/shm volume"}
    if config_set:
        exact[CONFIG_PATH] = "the spec.config volume"
    if framework == "mpi":
        names[MPI_SSH_AUTH_VOLUME] = "the SSH key Secret Kubeflow Trainer injects"
        trees = {
            MPI_SSH_RAW_PATH: "the SSH key Secret Kubeflow Trainer injects",
            ROOT_SSH_PATH: "the worker's sshd setup",
        }
    else:
        names[TRAINER_TOKEN_VOLUME] = "the token Kubeflow Trainer's status plugin injects"
        trees = {TRAINER_TOKEN_PATH: "the token Kubeflow Trainer's status plugin injects"}
    return Reserved(names, exact, trees)


def _normalise(path: str) -> str:
    """``/root//.ssh/`` and ``/root/./.ssh`` are ``/root/.ssh`` (POSIX keeps a leading ``//``; we do not)."""
    if path.startswith("/"):
        return posixpath.normpath("/" + path.lstrip("/"))
    return posixpath.normpath(path)


def _check_mount(mount: dict[str, Any], field: str, reserved: Reserved, config_set: bool) -> None:
    name = str(mount.get("name", ""))
    if name == CONFIG_VOLUME and not config_set:
        raise BuildError(
            f'{field}.name: "{CONFIG_VOLUME}" is the spec.config volume, which exists only when spec.config is set'
        )
    if name in reserved.volume_names and name != CONFIG_VOLUME:
        raise BuildError(f'{field}.name: "{name}" is reserved for {reserved.volume_names[name]}')
    raw = str(mount.get("mountPath", ""))
    path = _normalise(raw)
    if path in reserved.exact_paths:
        raise BuildError(f'{field}.mountPath: "{raw}" is reserved for {reserved.exact_paths[path]}')
    for tree, owner in reserved.path_trees.items():
        if path == tree or path.startswith(tree + "/"):
            raise BuildError(f'{field}.mountPath: "{raw}" is reserved for {owner} ({tree} and below)')


def check_reserved(spec: WorkloadRunSpec, framework: str) -> None:
    """Refuse user volumes, mounts and init containers that reuse a built-in name or path."""
    config_set = spec.config is not None
    reserved = reserved_for(framework, config_set)
    for i, vol in enumerate(spec.volumes or []):
        name = str(vol.get("name", ""))
        if name in reserved.volume_names:
            raise BuildError(
                f'spec.volumes[{i}].name: "{name}" is reserved for {reserved.volume_names[name]}'
            )
    for i, mount in enumerate(spec.volume_mounts or []):
        _check_mount(mount, f"spec.volumeMounts[{i}]", reserved, config_set)
    for i, init in enumerate(spec.init_containers or []):
        if init.get("name") == WORKLOAD_CONTAINER_NAME:
            raise BuildError(
                f'spec.initContainers[{i}].name: "{WORKLOAD_CONTAINER_NAME}" is the workload container\'s name'
            )
        for j, mount in enumerate(init.get("volumeMounts") or []):
            _check_mount(mount, f"spec.initContainers[{i}].volumeMounts[{j}]", reserved, config_set)


def check_config(spec: WorkloadRunSpec) -> None:
    config = spec.config
    if config is None:
        return
    if config.inline is not None and config.config_map_ref is not None:
        raise BuildError("spec.config: inline and configMapRef are mutually exclusive")
    if config.inline is None and config.config_map_ref is None:
        raise BuildError("spec.config: set inline or configMapRef")
    if config.config_map_ref is not None and not config.config_map_ref.name:
        raise BuildError("spec.config.configMapRef.name: must not be empty")


def config_volume(run_name: str, spec: WorkloadRunSpec) -> dict[str, Any] | None:
    config = spec.config
    if config is None:
        return None
    cm = config.config_map_ref.name if config.config_map_ref is not None else config_map_name(run_name)
    return {"name": CONFIG_VOLUME, "configMap": {"name": cm, "defaultMode": CONFIG_MODE}}


def config_mount(*, read_only: bool = False) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": CONFIG_VOLUME, "mountPath": CONFIG_PATH}
    if read_only:
        mount["readOnly"] = True
    return mount


def config_map(run_name: str, spec: WorkloadRunSpec) -> dict[str, Any] | None:
    """The ``<run>-config`` ConfigMap holding ``spec.config.inline``; none for ``configMapRef``."""
    if spec.config is None or spec.config.inline is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name(run_name), "labels": {"app": run_name}},
        "data": dict(sorted(spec.config.inline.items())),
    }


@dataclass(frozen=True)
class WorkloadPodVolumes:
    """What the workload pods (torch/exec node pods, MPI workers) get."""

    volumes: list[dict[str, Any]]
    mounts: list[dict[str, Any]]
    init_containers: list[dict[str, Any]]


def workload_pod_volumes(run_name: str, spec: WorkloadRunSpec) -> WorkloadPodVolumes:
    volumes = [dshm_volume()]
    mounts = [dshm_mount()]
    cfg = config_volume(run_name, spec)
    if cfg is not None:
        volumes.append(cfg)
        mounts.append(config_mount())
    volumes += [dict(v) for v in spec.volumes or []]
    mounts += [dict(m) for m in spec.volume_mounts or []]
    return WorkloadPodVolumes(volumes, mounts, [dict(c) for c in spec.init_containers or []])


def names(items: Sequence[dict[str, Any]]) -> list[str]:
    return [str(i.get("name", "")) for i in items]
