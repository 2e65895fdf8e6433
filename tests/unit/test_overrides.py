"""The override engine: when matching (incl. CEL), merge semantics, JSON patch, records, purity."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvcre.api.v1alpha1.common import WhenSpec
from nvcre.api.v1alpha1.constants import EventReason, EventType
from nvcre.api.v1alpha1.workflow import AppliedOverride as AppliedOverrideModel
from nvcre.api.v1alpha1.workflow import WorkflowSpec
from nvcre.render.merge import (
    POD_TEMPLATE_SCHEMA,
    JSONPatchError,
    MergeError,
    deep_merge_named,
    json_patch,
    merge_dependencies,
    strategic_merge,
)
from nvcre.render.overrides import (
    OverrideContext,
    OverrideError,
    apply_overrides,
    summarize_when,
    when_matches,
)
from nvcre.testing.builders import (
    TrainingRuntime,
    job_overlay,
    override,
    replicated_job,
    runtime_overlay,
    runtime_patch,
)

AWS_H100 = OverrideContext(platform="aws", gpu_architecture="h100", workload_kind="TrainJob")
AZURE_H100 = OverrideContext(platform="azure", gpu_architecture="h100", workload_kind="TrainJob")


def runtime(name: str = "nccl-runtime") -> dict[str, Any]:
    """A TrainingRuntime dependency with launcher and node replicated jobs."""
    gpus = {"nvidia.com/gpu": "8"}
    node = replicated_job(
        "node",
        container_fields={
            "resources": {"limits": gpus, "requests": gpus},
            "volumeMounts": [
                {"name": "mpi-ssh-auth", "mountPath": "/tmp/mpi-ssh-raw"},
                {"name": "dshm", "mountPath": "/dev/shm"},
            ],
        },
        tolerations=[{"operator": "Exists"}],
        volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    )
    launcher = replicated_job("launcher", container="node", container_fields={"args": ["a"]})
    built = TrainingRuntime(name).label_map({"app": "nccl"}).ml_policy(mpi={"numProcPerNode": 8})
    return built.jobs(launcher, node).obj()


def spec(overrides: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "jobTemplate": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "workload": {
                    "trainJob": {
                        "runtimeRef": {"name": "nccl-runtime", "kind": "TrainingRuntime"},
                        "trainer": {
                            "image": "base",
                            "command": ["mpirun"],
                            "args": ["-N", "8", "bin"],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "numNodes": 2,
                        },
                        "runtimePatches": [{"manager": "nvcre.nvidia.com/catalog", "time": "x"}],
                    }
                },
                "workloadMetadata": {"labels": {"kai.scheduler/queue": "team-a"}},
            },
        },
        "orchestration": {"execution": {"maxConcurrent": 2, "timeoutPerJob": "1h"}, "iterations": 1},
        "dependencies": [runtime()],
        "overrides": overrides or [],
    }


def trainer(result: dict[str, Any]) -> dict[str, Any]:
    trainer_: dict[str, Any] = result["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    return trainer_


def node_pod(dependency: dict[str, Any], job: str = "node") -> dict[str, Any]:
    for replicated in dependency["spec"]["template"]["spec"]["replicatedJobs"]:
        if replicated["name"] == job:
            pod: dict[str, Any] = replicated["template"]["spec"]["template"]["spec"]
            return pod
    raise AssertionError(job)


# --- when ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "matches"),
    [
        ({}, True),
        ({"platform": {"equals": "aws"}}, True),
        ({"platform": {"equals": "gcp"}}, False),
        ({"platform": {"equals": "AWS"}}, False),
        ({"platform": {"in": ["gcp", "aws"]}}, True),
        ({"platform": {"in": ["gcp"]}}, False),
        ({"platform": {"notIn": ["aws"]}}, False),
        ({"gpuArchitecture": {"notIn": ["gb200", "gb300"]}}, True),
        ({"gpuArchitecture": {"in": ["gb200", "gb300"]}}, False),
        ({"platform": {"equals": "aws"}, "gpuArchitecture": {"equals": "h100"}}, True),
        ({"platform": {"equals": "aws"}, "gpuArchitecture": {"equals": "a100"}}, False),
        ({"platform": {"equals": "aws", "notIn": ["aws"]}}, False),
        ({"workloadKind": "TrainJob"}, True),
        ({"workloadKind": "PyTorchJob"}, False),
        ({"topology": {"mode": "simple"}}, True),
        ({"topology": {"mode": "topology"}}, False),
        ({"topology": {"domainCount": {"equals": 0}}}, True),
        ({"topology": {"domainCount": {"greaterThan": 0}}}, False),
        ({"topology": {"domainCount": {"lessThan": 1}}}, True),
        ({"config": {"x": 1}}, False),
        ({"expression": 'platform == "aws" && gpuArchitecture.startsWith("h")'}, True),
        ({"expression": 'gpuArchitecture in ["gb200", "gb300"]'}, False),
        ({"expression": 'platform.contains("w") && size(platform) == 3'}, True),
        ({"expression": 'gpuArchitecture.matches("^h[0-9]+$")'}, True),
        ({"expression": 'workloadKind == "TrainJob" && topologyMode == "simple" && domainCount == 0'}, True),
        ({"expression": 'topology.mode == "simple" && topology.domainCount == 0'}, True),
        ({"expression": "size(config) == 0"}, True),
        ({"platform": {"equals": "aws"}, "expression": "false"}, False),
    ],
)
def test_when_matching(when: dict[str, Any], matches: bool) -> None:
    assert when_matches(when, AWS_H100) is matches


def test_topology_domain_count_bounds() -> None:
    ctx = OverrideContext(topology_mode="topology", domain_count=3)
    assert when_matches(
        {"topology": {"mode": "topology", "domainCount": {"greaterThan": 2, "lessThan": 4}}}, ctx
    )
    assert not when_matches({"topology": {"domainCount": {"greaterThan": 3}}}, ctx)
    assert not when_matches({"topology": {"domainCount": {"lessThan": 3}}}, ctx)
    assert when_matches({"topology": {"domainCount": {"equals": 3}}}, ctx)


def test_config_subset_match_when_context_has_config() -> None:
    ctx = OverrideContext(config={"a": {"b": 1, "c": [1, 2]}, "d": "x"})
    assert when_matches({"config": {"a": {"b": 1}}}, ctx)
    assert when_matches({"config": {"a": {"c": [1, 2]}, "d": "x"}}, ctx)
    assert not when_matches({"config": {"a": {"b": 2}}}, ctx)
    assert not when_matches({"config": {"z": 1}}, ctx)
    assert when_matches({"expression": "config.d == 'x'"}, ctx)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ('platform == "aws" &&', "syntax error"),
        ("nosuch == 1", "undeclared reference to 'nosuch'"),
        ('"a string"', "must evaluate to bool, got string"),
        ("1 / 0 == 1", "divide by zero"),
    ],
)
def test_cel_errors_name_the_override(expression: str, fragment: str) -> None:
    overrides = [{"when": {}}, override({"expression": expression}, job_template={})]
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec(overrides), AWS_H100)
    assert error.value.path == "spec.overrides[1].when.expression"
    assert str(error.value).startswith("spec.overrides[1].when.expression: ")
    assert fragment in str(error.value)
    assert "\n" not in str(error.value)


def test_context_from_spec_and_nodes() -> None:
    workflow_spec = spec()
    workflow_spec["orchestration"]["topology"] = {"topologyKey": "nvidia.com/gpu.clique"}
    nodes = [
        {"metadata": {"name": n, "labels": {"nvidia.com/gpu.clique": c}}}
        for n, c in (("a", "c0"), ("b", "c1"), ("c", "c1"))
    ]
    ctx = OverrideContext.for_spec(workflow_spec, platform="onprem", gpu_architecture="gb200", nodes=nodes)
    assert (ctx.workload_kind, ctx.topology_mode, ctx.domain_count) == ("TrainJob", "topology", 2)
    bare = OverrideContext.for_spec(
        {"jobTemplate": {"spec": {"workload": {}}}}, platform="aws", gpu_architecture="h100"
    )
    assert (bare.workload_kind, bare.topology_mode, bare.domain_count) == ("", "simple", 0)


# --- summaries -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "summary"),
    [
        ({}, "<always>"),
        (
            {"platform": {"equals": "azure"}, "gpuArchitecture": {"notIn": ["a100"]}},
            "gpuArchitecture=notIn [a100], platform=azure",
        ),
        ({"gpuArchitecture": {"in": ["gb200", "gb300"]}}, "gpuArchitecture=in [gb200,gb300]"),
        (
            {"workloadKind": "TrainJob", "topology": {"mode": "topology"}},
            "workloadKind=TrainJob, topology.mode=topology",
        ),
        ({"topology": {"domainCount": {"greaterThan": 1, "lessThan": 4}}}, "topology.domainCount>1,<4"),
        ({"topology": {"domainCount": {"equals": 2}}}, "topology.domainCount=2"),
        ({"config": {"a": 1}}, "config=<custom>"),
        ({"expression": 'platform == "aws"'}, 'expression=platform == "aws"'),
        (
            {"expression": 'platform == "aws" && gpuArchitecture == "h100" && true'},
            'expression=platform == "aws" && gpuArchitecture ...',
        ),
    ],
)
def test_when_summary(when: dict[str, Any], summary: str) -> None:
    assert summarize_when(WhenSpec.model_validate(when)) == summary


# --- jobTemplate: strategic merge ------------------------------------------------------------


def test_job_template_maps_merge_and_lists_replace_wholesale() -> None:
    overrides = [
        override(
            {"platform": {"equals": "aws"}},
            job_template={
                "metadata": {"labels": {"extra": "x"}},
                "spec": {
                    "workload": {
                        "trainJob": {
                            "trainer": {
                                "image": "efa",
                                "args": ["--new"],
                                "env": [{"name": "B", "value": "override"}],
                            }
                        }
                    }
                },
            },
        )
    ]
    result = apply_overrides(spec(overrides), AWS_H100)
    t = trainer(result.spec)
    assert t["image"] == "efa"
    assert t["command"] == ["mpirun"]  # untouched sibling
    assert t["numNodes"] == 2
    assert t["args"] == ["--new"]  # atomic list: replaced
    assert t["env"] == [{"name": "B", "value": "override"}]  # Kubeflow trainer.env: replaced whole
    assert result.spec["jobTemplate"]["metadata"]["labels"] == {"team": "a", "extra": "x"}


def test_runtime_patches_are_replaced_wholesale() -> None:
    patch = runtime_patch("site", {"name": "node"})
    overrides = [override(job_template={"spec": {"workload": {"trainJob": {"runtimePatches": [patch]}}}})]
    result = apply_overrides(spec(overrides), AWS_H100)
    assert result.spec["jobTemplate"]["spec"]["workload"]["trainJob"]["runtimePatches"] == [patch]


def test_explicit_null_deletes() -> None:
    overrides = [
        override(
            job_template={
                "metadata": {"labels": {"team": None, "absent": None}},
                "spec": {"workload": {"trainJob": {"trainer": {"command": None, "numNodes": None}}}},
            }
        )
    ]
    result = apply_overrides(spec(overrides), AWS_H100)
    assert result.spec["jobTemplate"]["metadata"]["labels"] == {}
    assert "command" not in trainer(result.spec)
    assert "numNodes" not in trainer(result.spec)


def test_unknown_field_in_job_template_patch_fails_with_path() -> None:
    overrides = [
        {"when": {}},
        {"when": {}},
        override(job_template={"spec": {"workload": {"trainJob": {"trainer": {"imagee": "x"}}}}}),
    ]
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec(overrides), AWS_H100)
    assert str(error.value) == (
        "spec.overrides[2].jobTemplate: the result is not a valid job template: "
        "jobTemplate.spec.workload.trainJob.trainer.imagee: unknown field"
    )


def test_unknown_override_field_fails_with_path() -> None:
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec([{"when": {}, "jobTemplatePach": []}]), AWS_H100)
    assert str(error.value) == "spec.overrides[0].jobTemplatePach: unknown field"
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec([{"when": {"platfrom": {"equals": "aws"}}}]), AWS_H100)
    assert str(error.value) == "spec.overrides[0].when.platfrom: unknown field"
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec([{"when": {}, "orchestration": {"diagnose": {}}}]), AWS_H100)
    assert str(error.value) == "spec.overrides[0].orchestration.diagnose: unknown field"


def test_smp_merges_core_lists_by_key_under_pod_template_schema() -> None:
    base = {
        "metadata": {"labels": {"a": "1"}},
        "spec": {
            "containers": [
                {
                    "name": "node",
                    "image": "img",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                    "args": ["x"],
                },
                {"name": "sidecar", "image": "s"},
            ],
            "volumes": [{"name": "dshm", "emptyDir": {}}],
            "tolerations": [{"operator": "Exists"}],
        },
    }
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "node",
                    "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
                    "volumeMounts": [{"name": "ib", "mountPath": "/dev/infiniband"}],
                    "args": ["y"],
                },
                {"name": "sidecar", "$patch": "delete"},
                {"name": "extra", "image": "e"},
            ],
            "volumes": [{"name": "ib", "hostPath": {"path": "/dev/infiniband"}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        }
    }
    merged = strategic_merge(base, patch, POD_TEMPLATE_SCHEMA)
    containers = merged["spec"]["containers"]
    assert [c["name"] for c in containers] == ["node", "extra"]
    assert containers[0]["image"] == "img"
    assert containers[0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "two"},
        {"name": "C", "value": "3"},
    ]
    assert [m["mountPath"] for m in containers[0]["volumeMounts"]] == ["/dev/shm", "/dev/infiniband"]
    assert containers[0]["args"] == ["y"]
    assert [v["name"] for v in merged["spec"]["volumes"]] == ["dshm", "ib"]
    assert merged["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert merged["metadata"] == {"labels": {"a": "1"}}


def test_smp_patch_item_without_merge_key_is_an_error() -> None:
    with pytest.raises(MergeError) as error:
        strategic_merge(
            {"spec": {"volumes": []}}, {"spec": {"volumes": [{"emptyDir": {}}]}}, POD_TEMPLATE_SCHEMA
        )
    assert error.value.path == "spec.volumes[0]"


def test_smp_replace_directive() -> None:
    merged = strategic_merge({"a": {"x": 1, "y": 2}}, {"a": {"$patch": "replace", "z": 3}})
    assert merged == {"a": {"z": 3}}


# --- jobTemplatePatch: RFC 6902 ----------------------------------------------------------------


def test_json_patch_operations_apply_after_merge() -> None:
    overrides = [
        {
            "when": {},
            "jobTemplate": {"spec": {"workload": {"trainJob": {"trainer": {"image": "merged"}}}}},
            "jobTemplatePatch": [
                {"op": "test", "path": "/spec/workload/trainJob/trainer/image", "value": "merged"},
                {"op": "add", "path": "/spec/workload/trainJob/trainer/args/-", "value": "-n"},
                {"op": "add", "path": "/spec/workload/trainJob/trainer/args/0", "value": "first"},
                {"op": "replace", "path": "/spec/workload/trainJob/trainer/numNodes", "value": 4},
                {"op": "remove", "path": "/spec/workload/trainJob/trainer/env/0"},
                {
                    "op": "copy",
                    "from": "/spec/workload/trainJob/trainer/image",
                    "path": "/spec/workload/trainJob/trainer/args/1",
                },
                {"op": "move", "from": "/metadata/labels/team", "path": "/metadata/labels/owner"},
            ],
        }
    ]
    result = apply_overrides(spec(overrides), AWS_H100)
    t = trainer(result.spec)
    assert t["image"] == "merged"
    assert t["args"] == ["first", "merged", "-N", "8", "bin", "-n"]
    assert t["numNodes"] == 4
    assert t["env"] == [{"name": "B", "value": "2"}]
    assert result.spec["jobTemplate"]["metadata"]["labels"] == {"owner": "a"}
    assert result.applied[0].patches == ("jobTemplate", "jobTemplatePatch")


def test_json_patch_given_as_json_string() -> None:
    ops = json.dumps([{"op": "replace", "path": "/spec/workload/trainJob/trainer/image", "value": "s"}])
    result = apply_overrides(spec([{"when": {}, "jobTemplatePatch": ops}]), AWS_H100)
    assert trainer(result.spec)["image"] == "s"


@pytest.mark.parametrize(
    ("operations", "index", "fragment"),
    [
        ([{"op": "remove", "path": "/spec/nothing"}], 0, 'path "/spec/nothing" does not exist'),
        ([{"op": "add", "path": "/spec/workload/x"}, {"op": "nope", "path": "/"}], 0, 'requires "value"'),
        (
            [{"op": "add", "path": "/spec/suspend", "value": True}, {"op": "nope", "path": "/x"}],
            1,
            'unknown op "nope"',
        ),
        (
            [{"op": "test", "path": "/spec/workload/trainJob/trainer/image", "value": "other"}],
            0,
            'test failed: "/spec/workload/trainJob/trainer/image" is "base", expected "other"',
        ),
        ([{"op": "replace", "path": "spec/suspend", "value": True}], 0, "invalid JSON pointer"),
        ([{"op": "add", "path": "/spec/workload/trainJob/trainer/args/9", "value": "x"}], 0, "out of range"),
        ([{"op": "move", "from": "/spec", "path": "/spec/workload/x"}], 0, "own child"),
    ],
)
def test_json_patch_errors_name_the_operation(operations: list[Any], index: int, fragment: str) -> None:
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec([{"when": {}}, {"when": {}, "jobTemplatePatch": operations}]), AWS_H100)
    assert error.value.path == f"spec.overrides[1].jobTemplatePatch[{index}]"
    assert fragment in str(error.value)


def test_json_patch_not_a_list_and_bad_json() -> None:
    with pytest.raises(
        OverrideError, match=r"^spec\.overrides\[0\]\.jobTemplatePatch\[0\]: a JSON patch must be an array"
    ):
        apply_overrides(spec([{"when": {}, "jobTemplatePatch": {"op": "add"}}]), AWS_H100)
    with pytest.raises(OverrideError, match=r"^spec\.overrides\[0\]\.jobTemplatePatch: not valid JSON"):
        apply_overrides(spec([{"when": {}, "jobTemplatePatch": "[{"}]), AWS_H100)


def test_json_patch_result_must_be_a_valid_job_template() -> None:
    ops = [{"op": "add", "path": "/spec/bogus", "value": 1}]
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec([{"when": {}, "jobTemplatePatch": ops}]), AWS_H100)
    assert str(error.value) == (
        "spec.overrides[0].jobTemplatePatch: the result is not a valid job template: jobTemplate.spec.bogus: unknown field"
    )


def test_json_patch_is_atomic_and_pure() -> None:
    doc = {"a": [1, 2]}
    with pytest.raises(JSONPatchError):
        json_patch(doc, [{"op": "add", "path": "/a/-", "value": 3}, {"op": "remove", "path": "/zz"}])
    assert doc == {"a": [1, 2]}
    assert json_patch(doc, [{"op": "add", "path": "/a/-", "value": 3}]) == {"a": [1, 2, 3]}
    assert doc == {"a": [1, 2]}


def test_json_patch_escapes_and_strict_test_equality() -> None:
    doc = {"labels": {"kai.scheduler/queue": "a", "t~x": 1}, "n": 1}
    out = json_patch(doc, [{"op": "replace", "path": "/labels/kai.scheduler~1queue", "value": "b"}])
    assert out["labels"]["kai.scheduler/queue"] == "b"
    assert json_patch(doc, [{"op": "test", "path": "/labels/t~0x", "value": 1.0}]) == doc
    with pytest.raises(JSONPatchError, match="test failed"):
        json_patch(doc, [{"op": "test", "path": "/n", "value": True}])
    assert json_patch(doc, [{"op": "replace", "path": "", "value": {"x": 1}}]) == {"x": 1}


# --- dependencies --------------------------------------------------------------------------------


def test_seed_hostpath_rdma_override_merges_privileged_into_worker_node_container() -> None:
    """The documented WorkloadRun example: containers merge by name, the built-in mounts stay."""
    base = spec()
    base["dependencies"] = [runtime("nccl-hostpath-rdma-runtime")]
    node_spec = node_pod(base["dependencies"][0])
    node_spec["volumes"].append(
        {"name": "ib-dev", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}}
    )
    node_spec["containers"][0]["volumeMounts"].append({"name": "ib-dev", "mountPath": "/dev/infiniband"})
    entry = override(
        dependencies=[
            runtime_overlay(
                "nccl-hostpath-rdma-runtime",
                job_overlay("node", containers=[{"name": "node", "securityContext": {"privileged": True}}]),
            )
        ]
    )
    base["overrides"] = [entry]
    result = apply_overrides(base, OverrideContext(platform="onprem", gpu_architecture="gb200"))
    (dependency,) = result.spec["dependencies"]
    worker = node_pod(dependency)
    (container,) = worker["containers"]
    assert container["securityContext"] == {"privileged": True}
    assert container["image"] == "img"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert [m["name"] for m in container["volumeMounts"]] == ["mpi-ssh-auth", "dshm", "ib-dev"]
    assert [v["name"] for v in worker["volumes"]] == ["dshm", "ib-dev"]
    launcher = node_pod(dependency, "launcher")
    assert "securityContext" not in launcher["containers"][0]
    assert [j["name"] for j in dependency["spec"]["template"]["spec"]["replicatedJobs"]] == [
        "launcher",
        "node",
    ]
    assert dependency["metadata"]["labels"] == {"app": "nccl"}
    assert result.applied[0].patches == ("1 dependencies",)


def test_dependency_resource_maps_merge_and_unnamed_lists_replace() -> None:
    patch = runtime_overlay(
        "nccl-runtime",
        job_overlay(
            "node",
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
            containers=[
                {
                    "name": "node",
                    "image": "efa",
                    "resources": {
                        "limits": {"vpc.amazonaws.com/efa": "32"},
                        "requests": {"vpc.amazonaws.com/efa": "32"},
                    },
                }
            ],
        ),
    )
    merged = merge_dependencies([runtime()], [patch])[0]
    worker = node_pod(merged)
    container = worker["containers"][0]
    assert container["image"] == "efa"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert container["resources"]["requests"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert worker["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]


def test_dependency_null_deletes_and_unmatched_is_appended() -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "topo"},
        "data": {"a": None, "topo.xml": "<x/>"},
    }
    delete = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "nccl-runtime", "labels": {"app": None}},
    }
    other_kind = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nccl-runtime"}}
    merged = merge_dependencies([runtime()], [config_map, delete, other_kind])
    assert [d["kind"] for d in merged] == ["TrainingRuntime", "ConfigMap", "ConfigMap"]
    assert merged[0]["metadata"] == {"name": "nccl-runtime", "labels": {}}
    assert merged[1]["data"] == {"topo.xml": "<x/>"}


def test_dependency_patch_needs_identity() -> None:
    overrides = [override(dependencies=[{"kind": "ConfigMap", "metadata": {"name": "x"}}])]
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec(overrides), AWS_H100)
    assert str(error.value) == "spec.overrides[0].dependencies[0]: apiVersion required to match a dependency"


def test_deep_merge_named_lists() -> None:
    base = {
        "items": [{"name": "a", "v": 1}, {"name": "b", "v": 2}],
        "plain": [1, 2],
        "mixed": [{"name": "a"}, {"x": 1}],
    }
    patch = {
        "items": [{"name": "b", "v": None, "w": 3}, {"name": "c"}],
        "plain": [3],
        "mixed": [{"name": "z"}],
    }
    assert deep_merge_named(base, patch) == {
        "items": [{"name": "a", "v": 1}, {"name": "b", "w": 3}, {"name": "c"}],
        "plain": [3],
        "mixed": [{"name": "z"}],
    }
    # an empty list in the patch replaces (it names nothing to merge by)
    assert deep_merge_named(base, {"items": []})["items"] == []


# --- orchestration -------------------------------------------------------------------------------


def test_orchestration_fields_replace_wholesale() -> None:
    overrides = [
        {
            "when": {},
            "orchestration": {
                "execution": {"timeoutPerJob": "2h"},
                "topology": {"topologyKey": "nvidia.com/gpu.clique"},
                "iterations": 3,
                "placement": "Unpinned",
            },
        }
    ]
    result = apply_overrides(spec(overrides), AWS_H100)
    assert result.spec["orchestration"] == {
        "execution": {"timeoutPerJob": "2h"},
        "topology": {"topologyKey": "nvidia.com/gpu.clique"},
        "iterations": 3,
        "placement": "Unpinned",
    }


def test_orchestration_null_fields_keep_base() -> None:
    result = apply_overrides(
        spec([{"when": {}, "orchestration": {"execution": None, "iterations": 2}}]), AWS_H100
    )
    assert result.spec["orchestration"]["execution"] == {"maxConcurrent": 2, "timeoutPerJob": "1h"}
    assert result.spec["orchestration"]["iterations"] == 2


# --- order, records, events, purity --------------------------------------------------------------


def test_later_override_wins_and_records_in_order() -> None:
    overrides = [
        override(
            {"platform": {"equals": "azure"}, "gpuArchitecture": {"notIn": ["a100"]}},
            job_template={"spec": {"workload": {"trainJob": {"trainer": {"args": ["generic"]}}}}},
            dependencies=[
                runtime(),
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "topo"}},
            ],
        ),
        override({"platform": {"equals": "aws"}}, job_template={"spec": {"stallMultiplier": 3}}),
        override(
            {"platform": {"equals": "azure"}, "gpuArchitecture": {"equals": "h100"}},
            job_template={"spec": {"workload": {"trainJob": {"trainer": {"args": ["h100"]}}}}},
        ),
    ]
    result = apply_overrides(spec(overrides), AZURE_H100)
    assert trainer(result.spec)["args"] == ["h100"]
    assert [a.index for a in result.applied] == [0, 2]
    first, second = result.applied
    assert first.when_summary == "gpuArchitecture=notIn [a100], platform=azure"
    assert first.patches_summary == "jobTemplate, 2 dependencies"
    assert second.patches_summary == "jobTemplate"
    assert result.total == 3
    assert [e.message for e in result.events] == [
        "Override[0] matched (gpuArchitecture=notIn [a100], platform=azure), patching jobTemplate, 2 dependencies",
        "Override[2] matched (gpuArchitecture=h100, platform=azure), patching jobTemplate",
    ]
    assert {e.reason for e in result.events} == {EventReason.OVERRIDE_APPLIED}


def test_no_op_override_is_recorded_and_warned() -> None:
    overrides = [
        {"when": {"gpuArchitecture": {"in": ["h100"]}}},
        override(job_template={"spec": {"workload": {"trainJob": {"trainer": {"image": "base"}}}}}),
        override(job_template={"spec": {"workload": {"trainJob": {"trainer": {"image": "new"}}}}}),
    ]
    result = apply_overrides(spec(overrides), AWS_H100)
    assert [(a.index, a.no_op, a.patches_summary) for a in result.applied] == [
        (0, True, "none"),
        (1, True, "jobTemplate"),
        (2, False, "jobTemplate"),
    ]
    warning = result.events[0]
    assert (warning.type, warning.reason) == (EventType.WARNING, EventReason.OVERRIDE_NO_OP)
    assert (
        warning.message
        == "Override[0] matched (gpuArchitecture=in [h100]) but produced no changes — check field paths"
    )


def test_status_records_fit_the_api_model() -> None:
    overrides = [
        override({"platform": {"equals": "aws"}}, job_template={"spec": {"stallMultiplier": 3}}),
        {"when": {}},
    ]
    result = apply_overrides(spec(overrides), AWS_H100)
    records = result.status_records()
    assert records == [
        {"index": 0, "when": {"platform": {"equals": "aws"}}, "patches": ["jobTemplate"], "noOp": False},
        {"index": 1, "when": {}, "patches": [], "noOp": True},
    ]
    for record in records:
        AppliedOverrideModel.model_validate(record)


def test_nothing_matched_event() -> None:
    result = apply_overrides(spec([{"when": {"platform": {"equals": "gcp"}}}]), AWS_H100)
    assert result.applied == ()
    (event,) = result.events
    assert (event.type, event.reason, event.message) == (
        EventType.NORMAL,
        EventReason.NO_OVERRIDES_MATCHED,
        "0 of 1 overrides matched (platform=aws, gpuArchitecture=h100)",
    )
    assert apply_overrides(spec(), AWS_H100).events == ()


def test_apply_is_pure_and_keeps_overrides() -> None:
    overrides = [
        override(job_template={"metadata": {"labels": {"team": None}}}),
        override(dependencies=[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]),
        {
            "when": {},
            "jobTemplatePatch": [
                {"op": "add", "path": "/spec/workload/trainJob/trainer/args/-", "value": "x"}
            ],
        },
    ]
    original = spec(overrides)
    snapshot = copy.deepcopy(original)
    result = apply_overrides(original, AWS_H100)
    assert original == snapshot
    assert result.spec["overrides"] == snapshot["overrides"]
    result.spec["dependencies"][0]["metadata"]["name"] = "mutated"
    assert original == snapshot
    # applying twice from the same input gives the same result (no accumulation)
    assert apply_overrides(original, AWS_H100).spec == apply_overrides(original, AWS_H100).spec


def test_accepts_workflow_spec_model_and_keeps_nulls() -> None:
    model = WorkflowSpec.model_validate(
        spec([override(job_template={"metadata": {"labels": {"team": None}}})])
    )
    result = apply_overrides(model, AWS_H100)
    assert result.spec["jobTemplate"]["metadata"]["labels"] == {}


def test_explicit_overrides_argument() -> None:
    result = apply_overrides(
        spec(), AWS_H100, overrides=[override(job_template={"spec": {"stallMultiplier": 3}})]
    )
    assert result.spec["jobTemplate"]["spec"]["stallMultiplier"] == 3


# --- properties ----------------------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "c", "name", "env"])
_SCALARS = st.one_of(st.integers(-3, 3), st.text("xyz", max_size=2), st.booleans())
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(_KEYS, children, max_size=3),
    ),
    max_leaves=12,
)
_OBJECTS = st.dictionaries(_KEYS, _JSON, max_size=4)


@given(_OBJECTS)
def test_merging_empty_patch_is_identity(base: dict[str, Any]) -> None:
    assert strategic_merge(base, {}) == base
    assert strategic_merge(base, {}, POD_TEMPLATE_SCHEMA) == base
    assert deep_merge_named(base, {}) == base
    assert json_patch(base, []) == base


@given(_OBJECTS, _OBJECTS)
@settings(max_examples=200)
def test_merges_are_pure_and_idempotent(base: dict[str, Any], patch: dict[str, Any]) -> None:
    base_copy, patch_copy = copy.deepcopy(base), copy.deepcopy(patch)
    once = strategic_merge(base, patch)
    assert (base, patch) == (base_copy, patch_copy)
    assert strategic_merge(once, patch) == once
    named_once = deep_merge_named(base, patch)
    assert (base, patch) == (base_copy, patch_copy)
    assert deep_merge_named(named_once, patch) == named_once


@given(_OBJECTS, _OBJECTS)
def test_patch_values_win(base: dict[str, Any], patch: dict[str, Any]) -> None:
    merged = strategic_merge(base, patch)
    for key, value in patch.items():
        if not isinstance(value, dict):
            assert merged[key] == value
    for key in base.keys() - patch.keys():
        assert merged[key] == base[key]


def test_override_error_condition() -> None:
    with pytest.raises(OverrideError) as error:
        apply_overrides(spec([{"when": {"expression": "nosuch"}}]), AWS_H100)
    assert error.value.reason == "OverrideError"
    assert error.value.condition_message.startswith(
        "Failed to apply overrides: spec.overrides[0].when.expression: evaluating CEL expression 'nosuch'"
    )


@given(_OBJECTS, _KEYS, _JSON)
def test_json_patch_add_then_remove_restores(base: dict[str, Any], key: str, value: Any) -> None:
    if key in base:
        return
    added = json_patch(base, [{"op": "add", "path": f"/{key}", "value": value}])
    assert added[key] == value
    assert json_patch(added, [{"op": "test", "path": f"/{key}", "value": value}]) == added
    assert json_patch(added, [{"op": "remove", "path": f"/{key}"}]) == base


@given(st.lists(_SCALARS, max_size=5), st.data())
def test_json_patch_array_insert_positions(items: list[Any], data: st.DataObject) -> None:
    position = data.draw(st.integers(0, len(items)))
    doc = {"a": items}
    inserted = json_patch(doc, [{"op": "add", "path": f"/a/{position}", "value": "new"}])
    assert inserted["a"] == [*items[:position], "new", *items[position:]]
    appended = json_patch(doc, [{"op": "add", "path": "/a/-", "value": "new"}])
    assert appended["a"] == [*items, "new"]
    if items:
        moved = json_patch(doc, [{"op": "move", "from": "/a/0", "path": "/a/-"}])
        assert moved["a"] == [*items[1:], items[0]]


def test_problems_already_in_the_base_are_not_blamed_on_an_override() -> None:
    base = spec([override(job_template={"spec": {"workload": {"trainJob": {"trainer": {"image": "x"}}}}})])
    base["jobTemplate"]["spec"]["workload"]["trainJob"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "node"}]}
    ]
    result = apply_overrides(base, AWS_H100)
    assert trainer(result.spec)["image"] == "x"
    base["overrides"].append(override(job_template={"spec": {"bogus": 1}}))
    with pytest.raises(OverrideError, match=r"jobTemplate\.spec\.bogus: unknown field$"):
        apply_overrides(base, AWS_H100)
