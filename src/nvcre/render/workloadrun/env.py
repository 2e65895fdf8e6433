"""Environment of the workload containers and its forwarding to MPI ranks.

The auto-detected NCCL defaults (spec/catalog.md 7.2) are merged with ``spec.env``; a user value
wins by name. For MPI, ``sshd`` gives every rank a fresh environment, so the merged set is also
forwarded with ``mpirun -x``: ``-x NAME=value``, or ``-x NAME`` for a ``valueFrom`` variable (mpirun
then reads it from the launcher's env).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

EnvVar = dict[str, Any]


def base_nccl_env(enable_mnnvl: bool) -> list[EnvVar]:
    """``BaseNCCLEnvVars``: the NCCL defaults every WorkloadRun workload container gets."""
    pairs = [
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "NET,INIT"),
        ("NCCL_NVLS_ENABLE", "1"),
        ("NCCL_CUMEM_ENABLE", "1"),
        ("NCCL_NET_GDR_C2C", "1"),
        ("NCCL_NET_GDR_LEVEL", "PHB"),
        ("NCCL_P2P_NET_CHUNKSIZE", "2097152"),
        ("NCCL_SHM_DISABLE", "1"),
        ("NCCL_MNNVL_ENABLE", "1" if enable_mnnvl else "0"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
    ]
    return [{"name": n, "value": v} for n, v in pairs]


def merge_env(base: Sequence[EnvVar], user: Sequence[EnvVar]) -> list[EnvVar]:
    """Base variables the user did not set (base order), then every user variable (user order)."""
    user_names = {v["name"] for v in user}
    return [dict(v) for v in base if v["name"] not in user_names] + [dict(v) for v in user]


def replace_in_place(env: Sequence[EnvVar], user: Sequence[EnvVar]) -> list[EnvVar]:
    """``env`` with each same-name entry replaced by the user's variable; nothing added."""
    by_name = {v["name"]: v for v in user}
    return [dict(by_name.get(v["name"], v)) for v in env]


def forward_arg(var: Mapping[str, Any]) -> str:
    """The value after ``-x`` that forwards one variable to the ranks."""
    if "valueFrom" in var:
        return str(var["name"])
    return f"{var['name']}={var.get('value', '')}"


def env_to_mpi_args(env: Iterable[Mapping[str, Any]]) -> list[str]:
    """``-x`` pairs for every variable, in order."""
    args: list[str] = []
    for var in env:
        args += ["-x", forward_arg(var)]
    return args


def _x_name(value: str) -> str:
    return value.split("=", 1)[0]


def forwarded_names(args: Sequence[str]) -> set[str]:
    """Names an mpirun argument list forwards with ``-x NAME[=value]`` (also ``-x NAME=v`` as one token)."""
    names: set[str] = set()
    for i, arg in enumerate(args):
        if arg == "-x" and i + 1 < len(args):
            names.add(_x_name(args[i + 1]))
        elif arg.startswith("-x ") and arg[3:].strip():
            names.add(_x_name(arg[3:].strip()))
    return names


def replace_forwards(args: Sequence[str], user: Sequence[EnvVar]) -> list[str]:
    """``args`` with every ``-x NAME[=value]`` of a user-set name carrying the user's value instead."""
    by_name = {v["name"]: v for v in user}
    out = list(args)
    for i in range(len(out) - 1):
        if out[i] == "-x":
            name = _x_name(out[i + 1])
            if name in by_name:
                out[i + 1] = forward_arg(by_name[name])
    return out


def rank_forwards(
    merged: Sequence[EnvVar], platform_args: Sequence[str], user_mpi_args: Sequence[str]
) -> list[str]:
    """``-x`` pairs for the merged env, minus names a platform override or the user already forwards.

    A platform-forwarded name keeps the platform's pair (carrying the user's value when ``spec.env``
    sets it); a name the user forwards in ``mpiArgs`` is left to that later, winning pair.
    """
    skip = forwarded_names(platform_args) | forwarded_names(user_mpi_args)
    return env_to_mpi_args(v for v in merged if v["name"] not in skip)
