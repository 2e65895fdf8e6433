"""Per framework: the TrainJob trainer (command and args) and the TrainingRuntime's shape.

* torch: ``torchrun [-m module | script] args``; exec: ``command``/``args`` verbatim. Both run a
  single replicated job ``node`` (exec reuses the torch shape and label).
* mpi: a ``launcher`` that runs ``mpirun`` (once: a failure fails the group) and ``node`` workers
  running ``sshd``. Launch order: baseline, ``-x`` forwards of the merged env, platform ``mpiArgs``, the user's ``mpiArgs``,
  binary, args (OpenMPI keeps the last value of a repeated parameter, so the user wins).
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.constants import (
    TRAINER_API_VERSION,
    TRAINJOB_ANCESTOR_STEP_TRAINER,
    WORKLOAD_CONTAINER_NAME,
    Label,
    ReplicatedJob,
    TrainerFramework,
    TrainerKind,
)
from nvcre.api.v1alpha1.workloadrun import FrameworkSpec, MPIFramework
from nvcre.naming import runtime_name
from nvcre.render.gang import GangIntent
from nvcre.render.workloadrun.env import EnvVar, rank_forwards, replace_forwards
from nvcre.render.workloadrun.errors import BuildError
from nvcre.render.workloadrun.resources import launcher_resources
from nvcre.render.workloadrun.scheduling import stamp_replicated_job
from nvcre.render.workloadrun.volumes import (
    CONFIG_VOLUME,
    MPI_SSH_AUTH_VOLUME,
    MPI_SSH_RAW_PATH,
    ROOT_SSH_PATH,
    WorkloadPodVolumes,
    config_mount,
)

TORCH = "torch"
MPI = "mpi"
EXEC = "exec"

MPI_TIMEOUT_SECONDS = "3600"
SSH_KEYS_VOLUME = "ssh-keys"
MPI_HOSTFILE_VOLUME = "mpi-hostfile"
MPI_HOSTFILE_DIR = "/etc/mpi"
FIX_SSH_INIT = "fix-ssh-permissions"
WORKER_START_WAIT_SECONDS = 1200
#: A failed mpirun fails its group at once (the reference leaves the Job default, 6 retries with
#: the Job controller's doubling back-off: about ten minutes before anyone sees the failure). The
#: launcher pod is ``restartPolicy: Never`` so the failed container, and its log, stay for the
#: failure log. A group is retried by the Workflow's ``execution.retryFailedGroups``, in status.
LAUNCHER_BACKOFF_LIMIT = 0
#: Under a gang scheduler the launcher's init container waits for the workers' sshd, one
#: ``WORKER_START_WAIT_SECONDS`` window per pod: a worker slow to start (an image pull) gets the
#: Job default's 6 more windows, while ``MPIRUN_FAILURE_POLICY`` still fails the Job at once
#: when mpirun itself exits non-zero.
GANG_LAUNCHER_BACKOFF_LIMIT = 6
MPIRUN_FAILURE_POLICY: dict[str, Any] = {
    "rules": [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": WORKLOAD_CONTAINER_NAME, "operator": "NotIn", "values": [0]},
        }
    ]
}

_COPY_KEYS = f"""mkdir -p {ROOT_SSH_PATH}
cp {MPI_SSH_RAW_PATH}/* {ROOT_SSH_PATH}/
chmod 700 {ROOT_SSH_PATH}
chmod 600 {ROOT_SSH_PATH}/*
chmod 644 {ROOT_SSH_PATH}/*.pub {ROOT_SSH_PATH}/authorized_keys 2>/dev/null || true
"""

WORKER_SSHD_SCRIPT = (
    """set -e
if [ ! -x /usr/sbin/sshd ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server
fi
mkdir -p /var/run/sshd
"""
    + _COPY_KEYS
    + "exec /usr/sbin/sshd -De\n"
)

LAUNCHER_FIX_SSH_SCRIPT = "set -e\n" + _COPY_KEYS

LAUNCHER_WAIT_FOR_WORKERS_SCRIPT = f"""deadline=$(( $(date +%s) + {WORKER_START_WAIT_SECONDS} ))
for host in $(awk '{{print $1}}' {MPI_HOSTFILE_DIR}/hostfile); do
  until timeout 2 bash -c "exec 3<>/dev/tcp/$host/22" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "not every worker answered sshd within 20 minutes (still waiting for $host);" \\
        "see the events of the worker pods for the cause (image pull, volume attach, hostPath, init containers)" >&2
      exit 1
    fi
    sleep 5
  done
done
"""


def framework_of(framework: FrameworkSpec) -> str:
    """The one framework set; more than one, or none, is refused."""
    chosen = [n for n in (TORCH, MPI, EXEC) if getattr(framework, n) is not None]
    if len(chosen) > 1:
        raise BuildError(
            f"spec.framework: exactly one of torch, mpi or exec may be set, got {', '.join(chosen)}"
        )
    if not chosen:
        raise BuildError("exec framework selected but spec.framework.exec is nil")
    torch = framework.torch
    if torch is not None:
        if torch.script is not None and torch.module is not None:
            raise BuildError("spec.framework.torch: script and module are mutually exclusive")
        if torch.script is None and torch.module is None:
            raise BuildError("spec.framework.torch: either script or module must be set")
    return chosen[0]


# --- trainer ------------------------------------------------------------------------------------


def mpi_lead_args(gpus_per_node: int) -> list[str]:
    return [
        "-N",
        str(gpus_per_node),
        "--allow-run-as-root",
        "--mca",
        "plm_rsh_args",
        "-o StrictHostKeyChecking=no -o ConnectionAttempts=10",
    ]


def mpi_command_args(
    mpi: MPIFramework,
    gpus_per_node: int,
    merged_env: Sequence[EnvVar],
    user_env: Sequence[EnvVar],
    platform_mpi_args: Sequence[str],
) -> tuple[list[str], list[str]]:
    platform = replace_forwards(platform_mpi_args, user_env)
    user_args = list(mpi.mpi_args or [])
    args = (
        mpi_lead_args(gpus_per_node)
        + rank_forwards(merged_env, platform, user_args)
        + platform
        + user_args
        + [mpi.binary]
        + list(mpi.args or [])
    )
    return ["timeout", MPI_TIMEOUT_SECONDS, mpi.mpirun_path], args


def command_args(
    framework: FrameworkSpec,
    kind: str,
    gpus_per_node: int,
    merged_env: Sequence[EnvVar],
    user_env: Sequence[EnvVar],
    platform_mpi_args: Sequence[str],
) -> tuple[list[str], list[str]]:
    if kind == TORCH:
        torch = framework.torch
        assert torch is not None
        head = ["-m", torch.module] if torch.module is not None else [str(torch.script)]
        return ["torchrun"], head + list(torch.args or [])
    if kind == MPI:
        assert framework.mpi is not None
        return mpi_command_args(framework.mpi, gpus_per_node, merged_env, user_env, platform_mpi_args)
    assert framework.exec is not None
    return list(framework.exec.command), list(framework.exec.args or [])


def wrap_pre_command(
    pre: Sequence[str], command: Sequence[str], args: Sequence[str]
) -> tuple[list[str], list[str]]:
    """Platform preCommand lines, then ``exec`` of the original command, as one ``bash -c`` script.

    Each word is quoted for bash (``shlex.quote``), so it reaches the binary byte for byte: no
    expansion of ``$``, backticks or globs (the reference's Go ``%q`` double quotes expand them).
    """
    if not pre:
        return list(command), list(args)
    line = "exec " + " ".join(shlex.quote(a) for a in [*command, *args])
    return ["/bin/bash", "-c"], ["\n".join([*pre, line])]


# --- runtime ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeInputs:
    run_name: str
    image: str
    kind: str
    gpus_per_node: int
    nodes_per_job: int
    env: list[EnvVar]
    resources: dict[str, Any]
    pod: WorkloadPodVolumes
    config_set: bool
    gang: GangIntent | None


def _runtime(
    inputs: RuntimeInputs, framework_label: str, ml_policy: dict[str, Any], spec: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": TrainerKind.TRAINING_RUNTIME,
        "metadata": {
            "name": runtime_name(inputs.run_name),
            "labels": {Label.APP: inputs.run_name, Label.TRAINER_FRAMEWORK: framework_label},
        },
        "spec": {"mlPolicy": ml_policy, "template": {"spec": spec}},
    }


def _workload_container(inputs: RuntimeInputs) -> dict[str, Any]:
    return {
        "name": WORKLOAD_CONTAINER_NAME,
        "image": inputs.image,
        "env": [dict(v) for v in inputs.env],
        "resources": inputs.resources,
    }


def torch_runtime(inputs: RuntimeInputs) -> dict[str, Any]:
    """One replicated job ``node``; exec runs in the same shape."""
    container = _workload_container(inputs)
    container["volumeMounts"] = inputs.pod.mounts
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 30,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    if inputs.pod.init_containers:
        pod_spec["initContainers"] = inputs.pod.init_containers
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = inputs.pod.volumes
    node = {
        "name": ReplicatedJob.NODE,
        "template": {
            "metadata": {
                "labels": {
                    Label.TRAINJOB_ANCESTOR_STEP: TRAINJOB_ANCESTOR_STEP_TRAINER,
                    Label.APP: inputs.run_name,
                }
            },
            "spec": {"template": {"spec": pod_spec}},
        },
    }
    stamp_replicated_job(node, inputs.gang)
    ml_policy = {"numNodes": inputs.nodes_per_job, "torch": {"numProcPerNode": inputs.gpus_per_node}}
    return _runtime(inputs, TrainerFramework.TORCH, ml_policy, {"replicatedJobs": [node]})


def _ssh_auth_mount() -> dict[str, Any]:
    return {"name": MPI_SSH_AUTH_VOLUME, "mountPath": MPI_SSH_RAW_PATH, "readOnly": True}


def _ssh_keys_mount() -> dict[str, Any]:
    return {"name": SSH_KEYS_VOLUME, "mountPath": ROOT_SSH_PATH}


def _worker(inputs: RuntimeInputs) -> dict[str, Any]:
    container = _workload_container(inputs)
    container = {
        "name": container["name"],
        "image": container["image"],
        "command": ["sh", "-c"],
        "args": [WORKER_SSHD_SCRIPT],
        "env": container["env"],
        "readinessProbe": {"tcpSocket": {"port": 22}, "initialDelaySeconds": 5},
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "resources": container["resources"],
        "volumeMounts": [_ssh_auth_mount(), *inputs.pod.mounts],
    }
    pod_spec: dict[str, Any] = {"restartPolicy": "OnFailure"}
    if inputs.pod.init_containers:
        pod_spec["initContainers"] = inputs.pod.init_containers
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = inputs.pod.volumes
    worker = {"name": ReplicatedJob.NODE, "template": {"spec": {"template": {"spec": pod_spec}}}}
    stamp_replicated_job(worker, inputs.gang)
    return worker


def _launcher_retries(gang: bool) -> dict[str, Any]:
    """The launcher Job's retry fields: none, or under a gang scheduler retries of the worker
    wait only (a failed mpirun still fails the Job at once)."""
    if not gang:
        return {"backoffLimit": LAUNCHER_BACKOFF_LIMIT}
    return {
        "backoffLimit": GANG_LAUNCHER_BACKOFF_LIMIT,
        "podFailurePolicy": copy.deepcopy(MPIRUN_FAILURE_POLICY),
    }


def _launcher(inputs: RuntimeInputs) -> dict[str, Any]:
    gang = inputs.gang is not None
    init_mounts = [_ssh_auth_mount(), _ssh_keys_mount()]
    script = LAUNCHER_FIX_SSH_SCRIPT
    if gang:
        init_mounts.append({"name": MPI_HOSTFILE_VOLUME, "mountPath": MPI_HOSTFILE_DIR, "readOnly": True})
        script += LAUNCHER_WAIT_FOR_WORKERS_SCRIPT
    init = {
        "name": FIX_SSH_INIT,
        "image": inputs.image,
        "command": ["/bin/bash", "-c"],
        "args": [script],
        "volumeMounts": init_mounts,
    }
    mounts = [_ssh_auth_mount(), _ssh_keys_mount()]
    volumes: list[dict[str, Any]] = [{"name": SSH_KEYS_VOLUME, "emptyDir": {}}]
    if inputs.config_set:
        mounts.append(config_mount(read_only=True))
        volumes.append(copy.deepcopy(next(v for v in inputs.pod.volumes if v["name"] == CONFIG_VOLUME)))
    container = {
        "name": WORKLOAD_CONTAINER_NAME,
        "image": inputs.image,
        "env": [dict(v) for v in inputs.env],
        "resources": launcher_resources(),
        "volumeMounts": mounts,
    }
    pod_spec = {
        "restartPolicy": "Never",
        "initContainers": [init],
        "containers": [container],
        "volumes": volumes,
    }
    launcher: dict[str, Any] = {"name": ReplicatedJob.LAUNCHER}
    if not gang:
        # A gang scheduler admits the whole gang, launcher included, or nothing: gating the
        # launcher on worker readiness would deadlock it, so the init container waits instead.
        launcher["dependsOn"] = [{"name": ReplicatedJob.NODE, "status": "Ready"}]
    launcher["template"] = {
        "metadata": {"labels": {Label.TRAINJOB_ANCESTOR_STEP: TRAINJOB_ANCESTOR_STEP_TRAINER}},
        "spec": {**_launcher_retries(gang), "template": {"spec": pod_spec}},
    }
    stamp_replicated_job(launcher, inputs.gang)
    return launcher


def mpi_runtime(inputs: RuntimeInputs) -> dict[str, Any]:
    ml_policy = {
        "numNodes": 1,
        "mpi": {
            "mpiImplementation": "OpenMPI",
            "numProcPerNode": inputs.gpus_per_node,
            "sshAuthMountPath": MPI_SSH_RAW_PATH,
        },
    }
    spec = {
        "network": {"publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [ReplicatedJob.LAUNCHER]},
        "replicatedJobs": [_worker(inputs), _launcher(inputs)],
    }
    return _runtime(inputs, TrainerFramework.MPI, ml_policy, spec)


def training_runtime(inputs: RuntimeInputs) -> dict[str, Any]:
    return mpi_runtime(inputs) if inputs.kind == MPI else torch_runtime(inputs)
