"""The sandbox runs what nvcre renders: every catalog entry, rendered on every platform and GPU
architecture, read by the simulated accelerator as the workload itself would read it.

Each category is rendered as ``certification render`` renders it, with options that differ from
every default (``maxSteps`` 37, ``maxBytes`` 2G, ``numIterations`` 7, ``numCycles`` 3,
``exitDurationMins`` 11); its pods are built as Kubeflow Trainer builds them from the TrainJob
and TrainingRuntime (:func:`nvcre.testing.workloads.with_trainer`), and each pod's container is
handed to :func:`nvcre.sandbox.simulate.workload` exactly as the sandbox's runner hands it
(command, environment, mounted ConfigMap scripts). The expected values come from the render:
the step limit and exit duration the options set, the nccl-tests flags as the rendered argv
spells them (read here by splitting the words, with no shell), and the DCGM diagnostics' level,
host and ``-p`` parameters.
"""

from __future__ import annotations

import shlex
from functools import cache
from typing import Any

import pytest

from nvcre.api.v1alpha1.certification import Certification
from nvcre.catalog import CategoryRender, load_catalog, render_category
from nvcre.platform import GPU_ARCHITECTURES, PLATFORMS
from nvcre.platform.synthetic import synthetic_nodes
from nvcre.sandbox.dcgm import LEVELS
from nvcre.sandbox.model import parse_size
from nvcre.sandbox.nccl_args import COLLECTIVES
from nvcre.sandbox.runner import COMPLETION_INDEX, REPLICATED_JOB, container_command, container_files
from nvcre.sandbox.simulate import Workload, workload
from nvcre.testing import builders
from nvcre.testing.workloads import pods_of, with_trainer
from nvcre.workload.trainjob import build

OPTIONS = {"maxSteps": 37, "maxBytes": "2G", "numIterations": 7, "numCycles": 3, "exitDurationMins": 11}
ENTRIES = [(e.domain, e.variant) for e in load_catalog().list()]


def _certification() -> Certification:
    return Certification.model_validate(
        builders.Certification("matrix")
        .namespace("nvcre")
        .target({"nodeSelector": {"nvidia.com/gpu.present": "true"}})
        .spec(categories=[{"domain": d, "variant": v, "options": OPTIONS} for d, v in ENTRIES])
        .obj()
    )


def _render(platform: str, arch: str, index: int) -> CategoryRender:
    return render_category(
        _certification(), index, synthetic_nodes(platform, arch), platform=platform, offline=True
    )


def _pods(render: CategoryRender) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """The pods the category's first group runs (as Trainer builds them) and its ConfigMaps."""
    spec = render.workflow["spec"]
    trainjob = build(
        {"metadata": {"name": "matrix-job", "namespace": "nvcre"}, "spec": spec["jobTemplate"]["spec"]}
    )
    runtime_name = trainjob["spec"]["runtimeRef"]["name"]
    runtime = next(
        d
        for d in spec["dependencies"]
        if d["kind"] == "TrainingRuntime" and d["metadata"]["name"] == runtime_name
    )
    configmaps = {
        d["metadata"]["name"]: d.get("data") or {} for d in spec["dependencies"] if d["kind"] == "ConfigMap"
    }
    pods = with_trainer(pods_of(trainjob, runtime, bind=False), trainjob, runtime)
    for index, pod in enumerate(p for p in pods if p["metadata"]["labels"][REPLICATED_JOB] != "launcher"):
        pod["metadata"]["annotations"][COMPLETION_INDEX] = str(index)
    return pods, configmaps


def _read(pod: dict[str, Any], configmaps: dict[str, dict[str, str]]) -> Workload:
    command, env = container_command(pod)
    return workload(command, env, container_files(pod, configmaps))


def _rendered_flags(pod: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """(binary, flag -> value) of the nccl-tests run in the pod's argv, read word by word."""
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
    words = [
        w for arg in (*container.get("command", ()), *container.get("args", ())) for w in shlex.split(arg)
    ]
    at = next(i for i, w in enumerate(words) if w.rsplit("/", 1)[-1].split("_perf")[0] in COLLECTIVES)
    args = words[at + 1 :]
    return words[at].rsplit("/", 1)[-1], dict(zip(args[::2], args[1::2], strict=False))


def _check_diag(main: Workload, pod: dict[str, Any]) -> None:
    """The ``dcgmi diag`` the simulator reads is the rendered one: its level (and so its tests),
    host, ``--json``, ``--verbose`` and every ``-p``, read word by word."""
    diag = main.dcgm
    assert diag is not None, "no dcgmi diag recognised"
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
    words = [*container.get("command", ()), *container.get("args", ())]
    flags = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--host", "--run")}
    assert words[:2] == ["dcgmi", "diag"]
    assert (diag.level, diag.host, diag.json, diag.verbose) == (
        int(flags["--run"]),
        flags["--host"],
        True,
        True,
    )
    assert diag.tests == LEVELS[int(flags["--run"])]
    rendered = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-p"]
    assert rendered and dict(diag.params) == dict(p.split("=", 1) for p in rendered)


def _admits(condition: dict[str, Any] | None, value: str) -> bool:
    if not condition:
        return True
    if "equals" in condition:
        return bool(condition["equals"] == value)
    if "in" in condition:
        return value in condition["in"]
    return value not in condition.get("notIn", ())


@cache
def _overrides(index: int) -> list[dict[str, Any]]:
    nodes = synthetic_nodes("onprem", "h100")
    unresolved = render_category(_certification(), index, nodes, offline=True, resolve_overrides=False)
    return list(unresolved.workflow["spec"].get("overrides") or ())


def _architectures(index: int, platform: str) -> list[str]:
    """The architectures that render category ``index`` differently on ``platform``: each one an
    override that can apply there names, and one that none names (the entry's generic path)."""
    named: set[str] = set()
    for override in _overrides(index):
        when = override.get("when") or {}
        if _admits(when.get("platform"), platform):
            arch = when.get("gpuArchitecture") or {}
            named |= {arch["equals"]} if "equals" in arch else set(arch.get("in", arch.get("notIn", ())))
    generic = [a for a in GPU_ARCHITECTURES if a not in named][:1]
    return sorted(named & set(GPU_ARCHITECTURES)) + generic


def _cases() -> list[Any]:
    cases = []
    for index, (domain, variant) in enumerate(ENTRIES):
        for platform in PLATFORMS:
            archs = ["h100"] if domain == "diagnostics" else _architectures(index, platform)
            cases += [
                pytest.param(platform, arch, index, id=f"{platform}-{arch}-{variant}") for arch in archs
            ]
    return cases


@pytest.mark.parametrize(("platform", "arch", "index"), _cases())
def test_the_simulator_reads_what_the_render_runs(platform: str, arch: str, index: int) -> None:
    render = _render(platform, arch, index)
    pods, configmaps = _pods(render)
    read = {pod["metadata"]["name"]: _read(pod, configmaps) for pod in pods}
    assert {name: w.error for name, w in read.items() if w.error} == {}, "a pod's script failed"
    launcher = [p for p in pods if p["metadata"]["labels"][REPLICATED_JOB] == "launcher"]
    workers = [p for p in pods if p not in launcher]
    main = read[(launcher or workers)[0]["metadata"]["name"]]
    if render.domain == "diagnostics":  # one dcgmi diag per node, as the render spells it
        _check_diag(main, workers[0])
        assert all(read[p["metadata"]["name"]].dcgm == main.dcgm for p in workers)
        return
    if render.domain == "training":
        assert main.training is not None, f"{render.key}: no training run recognised"
        assert main.training.train_iters == OPTIONS["maxSteps"]
        assert main.training.exit_minutes == OPTIONS["exitDurationMins"]
        assert main.training.procs_per_node == render.gpus_per_node
        assert all(read[p["metadata"]["name"]].training == main.training for p in workers)
        return
    test = main.nccl
    assert test is not None, f"{render.key}: no nccl-tests run recognised"
    binary, flags = _rendered_flags((launcher or workers)[0])
    measured = render.workflow["spec"]["jobTemplate"]["spec"]["bandwidthMeasurement"]["testType"]
    assert (test.binary, test.collective.name) == (binary, measured.removeprefix("loopback_"))
    assert (test.min_bytes, test.max_bytes, test.step_factor) == (
        parse_size(flags["-b"]),
        parse_size(flags["-e"]),
        int(flags["-f"]),
    )
    assert test.max_bytes == parse_size(str(OPTIONS["maxBytes"]))
    assert (test.iters, test.cycles) == (int(flags["-n"]), int(flags["-N"]))
    if render.variant != "nccl-loopback":  # its sweep is fixed: -n 10 -N 2
        assert (test.iters, test.cycles) == (OPTIONS["numIterations"], OPTIONS["numCycles"])
    if launcher:  # mpirun: one rank per GPU on every worker, which runs sshd
        assert test.procs_per_host == render.gpus_per_node
        assert all(read[p["metadata"]["name"]].worker is not None for p in workers)
    else:  # one process drives every GPU of its node
        assert test.procs_per_host * test.ngpus == render.gpus_per_node
