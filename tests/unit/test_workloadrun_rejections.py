"""Runs the build refuses, each with the one-line message a user sees (BuildFailed / CLI exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.cli.main import cli
from nvcre.render.workloadrun import BuildError, build_workflow
from nvcre.testing import builders
from nvcre.testing.builders import job_overlay, override, runtime_overlay, runtime_patch

MPI = {"mpi": {"mpirunPath": "/usr/local/mpi/bin/mpirun", "binary": "/usr/local/bin/all_reduce_perf_mpi"}}
TORCH = {"torch": {"script": "train.py"}}


def run(framework: dict[str, Any] | None = None, **spec: Any) -> WorkloadRun:
    body = {"image": "img", "framework": framework if framework is not None else MPI, "numNodes": 2, **spec}
    return WorkloadRun.model_validate({"metadata": {"name": "r"}, "spec": body})


def mounted(name: str, path: str, framework: dict[str, Any] | None = None, **spec: Any) -> WorkloadRun:
    """A run mounting an emptyDir volume ``name`` at ``path``."""
    return run(
        framework,
        volumes=[{"name": name, "emptyDir": {}}],
        volumeMounts=[{"name": name, "mountPath": path}],
        **spec,
    )


def gang_run_overriding(*jobs: dict[str, Any]) -> WorkloadRun:
    """A gang-scheduled run whose override changes these jobs of its runtime ``r-runtime``."""
    return run(gangScheduler=GANG, overrides=[override(dependencies=[runtime_overlay("r-runtime", *jobs)])])


def refuse(wr: WorkloadRun, *, platform: str | None = "aws", gpu_arch: str | None = "h100") -> str:
    with pytest.raises(BuildError) as info:
        build_workflow(wr, None, resolve=platform is not None, platform=platform, gpu_arch=gpu_arch)
    return str(info.value)


GANG = {"schedulerName": "kai-scheduler", "queue": "team-a"}


@pytest.mark.parametrize(
    ("wr", "message"),
    [
        pytest.param(
            run(volumes=[{"name": "dshm", "emptyDir": {}}]),
            'spec.volumes[0].name: "dshm" is reserved for the built-in /dev/shm volume',
            id="volume-dshm",
        ),
        pytest.param(
            run(volumes=[{"name": "x", "emptyDir": {}}, {"name": "config-volume", "emptyDir": {}}]),
            'spec.volumes[1].name: "config-volume" is reserved for the spec.config volume',
            id="volume-config-volume",
        ),
        pytest.param(
            run(volumes=[{"name": "mpi-ssh-auth", "secret": {"secretName": "s"}}]),
            'spec.volumes[0].name: "mpi-ssh-auth" is reserved for the SSH key Secret Kubeflow Trainer injects',
            id="mpi-volume-mpi-ssh-auth",
        ),
        pytest.param(
            run(TORCH, volumes=[{"name": "kubeflow-trainer-token", "emptyDir": {}}]),
            'spec.volumes[0].name: "kubeflow-trainer-token" is reserved for the token Kubeflow Trainer\'s '
            "status plugin injects",
            id="torch-volume-trainer-token",
        ),
        pytest.param(
            run(volumeMounts=[{"name": "config-volume", "mountPath": "/etc/app"}]),
            'spec.volumeMounts[0].name: "config-volume" is the spec.config volume, which exists only when '
            "spec.config is set",
            id="mount-config-volume-without-config",
        ),
        pytest.param(
            mounted("big", "/dev/shm"),
            'spec.volumeMounts[0].mountPath: "/dev/shm" is reserved for the built-in /dev/shm volume',
            id="mount-dev-shm",
        ),
        pytest.param(
            mounted("v", "/config/", config={"inline": {"a.sh": "echo"}}),
            'spec.volumeMounts[0].mountPath: "/config/" is reserved for the spec.config volume',
            id="mount-config-with-config",
        ),
        pytest.param(
            mounted("k", "/root/.ssh/authorized_keys"),
            'spec.volumeMounts[0].mountPath: "/root/.ssh/authorized_keys" is reserved for the worker\'s sshd '
            "setup (/root/.ssh and below)",
            id="mpi-mount-below-root-ssh",
        ),
        pytest.param(
            mounted("k", "/tmp//mpi-ssh-raw"),
            'spec.volumeMounts[0].mountPath: "/tmp//mpi-ssh-raw" is reserved for the SSH key Secret Kubeflow '
            "Trainer injects (/tmp/mpi-ssh-raw and below)",
            id="mpi-mount-ssh-raw",
        ),
        pytest.param(
            mounted("t", "/var/run/secrets/kubeflow/trainer/token", TORCH),
            'spec.volumeMounts[0].mountPath: "/var/run/secrets/kubeflow/trainer/token" is reserved for the token '
            "Kubeflow Trainer's status plugin injects (/var/run/secrets/kubeflow/trainer and below)",
            id="torch-mount-trainer-token",
        ),
        pytest.param(
            run(initContainers=[{"name": "node", "image": "busybox"}]),
            'spec.initContainers[0].name: "node" is the workload container\'s name',
            id="init-container-node",
        ),
        pytest.param(
            run(
                initContainers=[
                    {
                        "name": "stage",
                        "image": "busybox",
                        "volumeMounts": [{"name": "d", "mountPath": "/root/.ssh"}],
                    }
                ]
            ),
            'spec.initContainers[0].volumeMounts[0].mountPath: "/root/.ssh" is reserved for the worker\'s sshd '
            "setup (/root/.ssh and below)",
            id="init-container-mount-root-ssh",
        ),
        pytest.param(
            run(orchestration={"placement": "Unpinned", "testScale": "intra-node"}),
            'orchestration.placement: Unpinned is incompatible with orchestration.testScale "intra-node": '
            "intra-node runs one job per target node, Unpinned runs exactly one job; drop one of the two",
            id="unpinned-intra-node",
        ),
        pytest.param(
            run(orchestration={"placement": "Unpinned", "testScale": "intra-rack"}),
            'orchestration.placement: Unpinned is incompatible with orchestration.testScale "intra-rack": '
            "intra-rack runs one job per topology domain, Unpinned runs exactly one job; to keep a single job "
            "inside one domain, name the domain label in target.matchExpressions instead",
            id="unpinned-intra-rack",
        ),
        pytest.param(
            run(gangScheduler=GANG, workloadMetadata={"labels": {"kai.scheduler/queue": "team-b"}}),
            'spec.workloadMetadata.labels["kai.scheduler/queue"]: conflicting label value "team-b", expected "team-a"',
            id="workload-label-conflicts-with-queue",
        ),
        pytest.param(
            run(
                gangScheduler={
                    "schedulerName": "runai-scheduler",
                    "queueLabelKey": "runai/queue",
                    "queue": "a",
                },
                workloadMetadata={"labels": {"runai/queue": "b"}},
            ),
            'spec.workloadMetadata.labels["runai/queue"]: conflicting label value "b", expected "a"',
            id="runai-label-conflict",
        ),
        pytest.param(
            run(gangScheduler=GANG, workloadMetadata={"labels": {f"l{i:02}": "v" for i in range(32)}}),
            "spec.workloadMetadata.labels: 33 labels after merging and inserting the gangScheduler queue label "
            '"kai.scheduler/queue"; at most 32 are allowed',
            id="labels-over-32-after-insert",
        ),
        pytest.param(
            run(
                gangScheduler=GANG,
                overrides=[
                    override(
                        {"platform": {"equals": "aws"}},
                        job_template={
                            "spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": "team-b"}}}
                        },
                    )
                ],
            ),
            'spec.jobTemplate.spec.workloadMetadata.labels["kai.scheduler/queue"]: conflicting label value '
            '"team-b", expected "team-a"',
            id="override-changes-workload-queue",
        ),
        pytest.param(
            gang_run_overriding(job_overlay("node", labels={"kai.scheduler/queue": "team-b"})),
            'gangScheduler is configured with queue "team-a" but TrainingRuntime "r-runtime" replicatedJob "node" '
            'sets label "kai.scheduler/queue" to "team-b" on template.metadata.labels',
            id="override-changes-runtime-queue",
        ),
        pytest.param(
            gang_run_overriding(job_overlay("launcher", schedulerName=None)),
            'gangScheduler is configured with schedulerName "kai-scheduler" but TrainingRuntime "r-runtime" '
            'replicatedJob "launcher" does not set schedulerName on template.spec.template.spec',
            id="override-removes-launcher-scheduler",
        ),
        pytest.param(
            run(
                gangScheduler=GANG,
                overrides=[
                    override(
                        job_template={
                            "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "someone-elses"}}}}
                        }
                    )
                ],
            ),
            "spec.jobTemplate.spec.workload.trainJob.runtimeRef: an override repoints the runtime from "
            'TrainingRuntime "r-runtime" to TrainingRuntime "someone-elses", which is not among the '
            "Workflow's dependencies; gangScheduler cannot be verified on a runtime nvcre was not given",
            id="override-repoints-runtime",
        ),
        pytest.param(
            run({}),
            "exec framework selected but spec.framework.exec is nil",
            id="no-framework",
        ),
        pytest.param(
            run({**MPI, **TORCH}),
            "spec.framework: exactly one of torch, mpi or exec may be set, got torch, mpi",
            id="two-frameworks",
        ),
        pytest.param(
            run({"torch": {"script": "a.py", "module": "m"}}),
            "spec.framework.torch: script and module are mutually exclusive",
            id="torch-script-and-module",
        ),
        pytest.param(
            run({"torch": {"args": ["x"]}}),
            "spec.framework.torch: either script or module must be set",
            id="torch-neither",
        ),
        pytest.param(
            run(config={"inline": {"a": "b"}, "configMapRef": {"name": "c"}}),
            "spec.config: inline and configMapRef are mutually exclusive",
            id="config-both",
        ),
    ],
)
def test_refused_with_message(wr: WorkloadRun, message: str) -> None:
    assert refuse(wr) == message


def test_offline_onprem_nvl72_needs_the_nic_field() -> None:
    message = refuse(run(), platform="onprem", gpu_arch="gb200")
    assert message.startswith("spec.nicResourceName: required to render offline for onprem gb200")


def test_offline_without_architecture() -> None:
    message = refuse(run(), platform=None, gpu_arch=None)
    assert (
        message
        == "cannot determine GPU architecture: nvidia.com/gpu.product label required in target.nodeSelector"
    )


# --- through the CLI: one line on stderr, exit 1 --------------------------------------------------


def cli_error(tmp_path: Path, wr: dict[str, Any], *args: str) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(wr))
    result = CliRunner().invoke(cli, ["workloadrun", "render", str(path), *args])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


BASIC: dict[str, Any] = builders.WorkloadRun("demo").image("img").framework(MPI).nodes(1).obj()


def test_cli_invalid_platform_lists_the_valid_names(tmp_path: Path) -> None:
    assert cli_error(tmp_path, BASIC, "--platform", "aws2") == (
        'Error: invalid --platform "aws2": must be one of aws, gcp, azure, oci, onprem, togetherai, mistral, '
        "forge, nscale"
    )


def test_cli_invalid_gpu_arch(tmp_path: Path) -> None:
    assert cli_error(tmp_path, BASIC, "--gpu-arch", "v100").startswith(
        'Error: invalid --gpu-arch "v100": must be one of'
    )


def test_cli_gpu_arch_with_dry_run(tmp_path: Path) -> None:
    assert cli_error(tmp_path, BASIC, "--gpu-arch", "h100", "--dry-run") == (
        "Error: --gpu-arch cannot be combined with --dry-run: the architecture comes from the nodes"
    )


def test_cli_build_error_names_the_run(tmp_path: Path) -> None:
    wr = {**BASIC, "spec": {**BASIC["spec"], "volumes": [{"name": "dshm", "emptyDir": {}}]}}
    assert cli_error(tmp_path, wr, "--gpu-arch", "h100") == (
        'Error: workloadrun demo: spec.volumes[0].name: "dshm" is reserved for the built-in /dev/shm volume'
    )


def test_cli_gang_conflict_from_an_override(tmp_path: Path) -> None:
    spec = {
        **BASIC["spec"],
        "gangScheduler": GANG,
        "overrides": [
            override(
                {"platform": {"equals": "aws"}},
                job_template={"spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": "team-b"}}}},
            )
        ],
    }
    assert cli_error(tmp_path, {**BASIC, "spec": spec}, "--platform", "aws", "--gpu-arch", "h100") == (
        'Error: workloadrun demo: spec.jobTemplate.spec.workloadMetadata.labels["kai.scheduler/queue"]: '
        'conflicting label value "team-b", expected "team-a"'
    )


def test_cli_invalid_nic_resource_name(tmp_path: Path) -> None:
    assert cli_error(tmp_path, BASIC, "--gpu-arch", "h100", "--nic-resource-name", "kubernetes.io/rdma") == (
        'Error: invalid --nic-resource-name "kubernetes.io/rdma": nicResourceName must not use the reserved '
        "kubernetes.io or k8s.io domains"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"thresholds": {"busBandwithGBps": "value >= 400"}},
            "spec.thresholds: unknown threshold key(s) [busBandwithGBps]",
            id="threshold-key",
        ),
        pytest.param(
            {"thresholds": {"busBandwidthGBps": "value"}},
            'spec.thresholds["busBandwidthGBps"]: Invalid value: "value": must evaluate to bool, got double',
            id="threshold-not-boolean",
        ),
        pytest.param(
            {"bandwidthMeasurement": {"logProfileRef": "nccl-bandwidth", "sampleInterval": "1ns"}},
            "spec.bandwidthMeasurement.sampleInterval: sampleInterval must be at least 5s",
            id="sample-interval",
        ),
        pytest.param(
            {"overrides": [override({"expression": "platfrom == 'aws'"}, job_template={})]},
            "spec.overrides[0].when.expression: Invalid value: \"platfrom == 'aws'\": undeclared reference to 'platfrom'",
            id="override-expression-typo",
        ),
    ],
)
def test_cli_refuses_what_would_fail_after_the_workload(
    tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    """Mistakes that on main passed the render and failed the Job once its GPUs had run."""
    line = cli_error(tmp_path, {**BASIC, "spec": {**BASIC["spec"], **spec}}, "--gpu-arch", "h100")
    assert line.startswith(f"Error: {tmp_path / 'run.yaml'}: {message}"), line


def test_cli_schema_error_names_the_field(tmp_path: Path) -> None:
    wr = {**BASIC, "spec": {**BASIC["spec"], "numNodes": 0}}
    line = cli_error(tmp_path, wr, "--gpu-arch", "h100")
    assert "spec.numNodes" in line and line.startswith("Error: ")


# --- near misses that must be accepted ------------------------------------------------------------


@pytest.mark.parametrize(
    "wr",
    [
        pytest.param(
            mounted("s", "/dev/shm/x"),
            id="below-dev-shm",
        ),
        pytest.param(
            mounted("s", "/config/sub", config={"configMapRef": {"name": "cm"}}),
            id="below-config",
        ),
        pytest.param(
            run(
                config={"inline": {"a": "b"}},
                volumeMounts=[{"name": "config-volume", "mountPath": "/opt/cfg"}],
            ),
            id="config-volume-mount-with-config",
        ),
        pytest.param(
            mounted("s", "/root/.sshx"),
            id="sibling-of-root-ssh",
        ),
        pytest.param(
            run(TORCH, volumes=[{"name": "mpi-ssh-auth", "emptyDir": {}}]), id="torch-may-use-mpi-names"
        ),
        pytest.param(
            mounted("s", "/config"),
            id="config-path-free-without-config",
        ),
        pytest.param(
            run(orchestration={"placement": "Unpinned", "testScale": "full-scale"}), id="unpinned-full-scale"
        ),
    ],
)
def test_accepted(wr: WorkloadRun) -> None:
    build_workflow(wr, None, resolve=True, platform="aws", gpu_arch="h100")


def test_offline_platform_needs_a_known_architecture() -> None:
    wr = run(target={"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}})
    assert refuse(wr, platform="aws", gpu_arch=None) == (
        'spec.target.nodeSelector["nvidia.com/gpu.product"]: GPU architecture "tesla" has no platform '
        "overrides to resolve offline; known: a100, b200, b300, gb200, gb300, h100, h200, l40, l40s, "
        "rtxpro6000 (see --gpu-arch)"
    )


def test_dry_run_refuses_a_mixed_platform_fleet() -> None:
    nodes = [
        {
            "metadata": {"name": "a", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "spec": {"providerID": "aws:///x"},
        },
        {
            "metadata": {"name": "b", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "spec": {"providerID": "gce://p/z/b"},
        },
    ]
    with pytest.raises(BuildError, match=r"^heterogeneous platforms detected: map\[aws:1 gcp:1\]$"):
        build_workflow(run(), nodes, resolve=True)
    # the controller's own build is best effort: the first node's platform
    assert build_workflow(run(), nodes, resolve=False).platform == "aws"


def test_nic_field_off_its_targets_is_reported_not_dropped_silently() -> None:
    rendered = build_workflow(
        run(nicResourceName="rdma/ib"), None, resolve=True, platform="aws", gpu_arch="h100"
    )
    assert [(e.reason, e.message) for e in rendered.events] == [
        (
            "NICResourceDetection",
            "nicResourceName rdma/ib is requested only on on-prem GB200, GB300, B200 and B300 targets; "
            "not requested on aws h100",
        )
    ]
    assert "rdma/ib" not in str(rendered.workflow)


def test_a_trainjob_runtime_patch_is_folded_into_the_contract() -> None:
    patch = runtime_patch(
        "example.com/team", job_overlay("launcher", pod_labels={"kai.scheduler/queue": "team-b"})
    )
    entry = override(job_template={"spec": {"workload": {"trainJob": {"runtimePatches": [patch]}}}})
    assert refuse(run(gangScheduler=GANG, overrides=[entry])) == (
        'gangScheduler is configured with queue "team-a" but TrainJob runtimePatches[0] (manager '
        '"example.com/team") sets label "kai.scheduler/queue" to "team-b" for TrainingRuntime "r-runtime" '
        'replicatedJob "launcher" on template.spec.template.metadata.labels'
    )
