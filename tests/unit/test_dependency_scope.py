"""Every dependency lives in its Workflow's namespace; cluster-scoped kinds only from the allow-list;
a dependency's own ``when`` decides whether it exists on the detected platform.

The same rule refuses the Workflow offline (``nvcrectl workflow render``, ``nvcrectl workloadrun
render``) and in the Workflow controller (through ``resolve_workflow``); the integration test
``tests/integration/test_dependency_scope.py`` drives the controller with its own ServiceAccount.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.cli.main import cli
from nvcre.orchestration.dependencies import (
    CLUSTER_SCOPED_ALLOWED,
    DependencyScopeError,
    check_cluster_scoped,
    check_namespaces,
)
from nvcre.platform import synthetic_nodes
from nvcre.render.workflow import resolve_workflow
from nvcre.render.workloadrun import BuildError, build_workflow
from nvcre.testing import builders
from nvcre.testing.rejections import WORKFLOW, at


def config_map(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"a": "b"}, **extra}


def workflow(
    namespace: str | None, dependencies: list[Any], overrides: list[Any] | None = None
) -> dict[str, Any]:
    doc = at(at(WORKFLOW, "spec.dependencies", dependencies), "metadata.namespace", namespace or "<delete>")
    return at(doc, "spec.overrides", overrides) if overrides is not None else doc


def refusal(spec: dict[str, Any], namespace: str) -> str:
    with pytest.raises(DependencyScopeError) as info:
        check_namespaces(spec, namespace)
    return str(info.value)


# --- the rule ----------------------------------------------------------------------------------


def test_a_dependency_in_another_namespace_is_refused_naming_the_field() -> None:
    spec = {"dependencies": [config_map("a"), config_map("b", "team-a"), config_map("c", "kube-system")]}
    assert refusal(spec, "team-a") == (
        'spec.dependencies[2].metadata.namespace: "kube-system" is not the Workflow\'s namespace "team-a"; '
        "a dependency is always created in its Workflow's namespace (leave the field out)"
    )


def test_an_override_dependency_in_another_namespace_is_refused_even_when_it_does_not_match() -> None:
    spec = {
        "dependencies": [config_map("a")],
        "overrides": [
            {"when": {}},
            {
                "when": {"platform": {"equals": "nowhere"}},
                "dependencies": [config_map("a"), config_map("b", "x")],
            },
        ],
    }
    assert refusal(spec, "team-a").startswith(
        'spec.overrides[1].dependencies[1].metadata.namespace: "x" is not the Workflow\'s namespace "team-a"'
    )


def test_without_a_namespace_on_the_workflow_any_namespace_on_a_dependency_is_refused() -> None:
    assert refusal({"dependencies": [config_map("a", "default")]}, "").startswith(
        'spec.dependencies[0].metadata.namespace: "default" is not the Workflow\'s namespace (it has none)'
    )


def test_the_workflows_own_namespace_or_none_is_accepted() -> None:
    check_namespaces({"dependencies": [config_map("a"), config_map("b", "team-a")]}, "team-a")
    check_namespaces({"dependencies": [config_map("a", "")]}, "")


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("resource.k8s.io/v1", "DeviceClass"),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"),
        ("v1", "Namespace"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ],
)
def test_cluster_scoped_kinds_are_refused(api_version: str, kind: str) -> None:
    assert frozenset() == CLUSTER_SCOPED_ALLOWED
    with pytest.raises(DependencyScopeError) as info:
        check_cluster_scoped(api_version, kind, "x")
    assert str(info.value) == (
        f'{kind} "x" ({api_version}) is cluster-scoped; a Workflow creates its dependencies only in its own '
        "namespace"
    )


# --- the shared resolve (controller and nvcrectl workflow render) -----------------------------


NODES = synthetic_nodes("aws", "h100", count=1)


def test_resolve_refuses_a_dependency_in_another_namespace() -> None:
    with pytest.raises(DependencyScopeError, match=r"^spec\.dependencies\[0\]\.metadata\.namespace: "):
        resolve_workflow(workflow("team-a", [config_map("c", "kube-system")]), NODES)


def test_resolve_refuses_an_override_dependency_in_another_namespace() -> None:
    overrides = [{"when": {}, "dependencies": [config_map("c", "kube-system")]}]
    with pytest.raises(
        DependencyScopeError, match=r"^spec\.overrides\[0\]\.dependencies\[0\]\.metadata\.namespace: "
    ):
        resolve_workflow(workflow("team-a", [], overrides), NODES)


def test_resolve_keeps_only_the_dependencies_whose_when_matches() -> None:
    dependencies = [
        config_map("everywhere"),
        config_map("aws-only", when={"platform": {"equals": "aws"}}),
        config_map("gcp-only", when={"platform": {"equals": "gcp"}}),
    ]
    resolved = resolve_workflow(workflow("team-a", dependencies), NODES)
    assert [d["metadata"]["name"] for d in resolved.spec["dependencies"]] == ["everywhere", "aws-only"]
    assert all("when" not in d for d in resolved.spec["dependencies"])


# --- offline CLIs ------------------------------------------------------------------------------


def test_nvcrectl_workflow_render_refuses_a_dependency_in_another_namespace(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(workflow("team-a", [config_map("c", "kube-system")])))
    result = CliRunner().invoke(
        cli, ["workflow", "render", "--platform", "aws", "--gpu-arch", "h100", str(path)]
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        'Error: spec.dependencies[0].metadata.namespace: "kube-system" is not the Workflow\'s namespace "team-a"'
    )


WORKLOADRUN: dict[str, Any] = (
    builders.WorkloadRun("r")
    .namespace("team-a")
    .image("img")
    .framework({"exec": {"command": ["true"]}})
    .nodes(1)
    .spec(
        overrides=[
            {"when": {"platform": {"equals": "gcp"}}},
            {"when": {}, "dependencies": [config_map("ok"), config_map("evil", "kube-system")]},
        ]
    )
    .obj()
)
WORKLOADRUN_MESSAGE = (
    'spec.overrides[1].dependencies[1].metadata.namespace: "kube-system" is not the Workflow\'s namespace '
    '"team-a"; a dependency is always created in its Workflow\'s namespace (leave the field out)'
)


@pytest.mark.parametrize("resolve", [True, False], ids=["resolved", "as-the-controller-builds"])
def test_workloadrun_build_refuses_an_override_dependency_in_another_namespace(resolve: bool) -> None:
    with pytest.raises(BuildError) as info:
        build_workflow(
            WorkloadRun.model_validate(WORKLOADRUN), None, resolve=resolve, platform="aws", gpu_arch="h100"
        )
    assert str(info.value) == WORKLOADRUN_MESSAGE


def test_nvcrectl_workloadrun_render_refuses_an_override_dependency_in_another_namespace(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wr.yaml"
    path.write_text(yaml.safe_dump(WORKLOADRUN))
    result = CliRunner().invoke(
        cli, ["workloadrun", "render", str(path), "--platform", "aws", "--gpu-arch", "h100"]
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert WORKLOADRUN_MESSAGE in result.stderr


def test_workloadrun_override_dependency_in_its_own_namespace_is_rendered() -> None:
    body = copy.deepcopy(WORKLOADRUN)
    body["spec"]["overrides"][1]["dependencies"][1]["metadata"]["namespace"] = "team-a"
    rendered = build_workflow(
        WorkloadRun.model_validate(body), None, resolve=True, platform="aws", gpu_arch="h100"
    )
    names = [d["metadata"]["name"] for d in rendered.workflow["spec"]["dependencies"]]
    assert names[-2:] == ["ok", "evil"]
