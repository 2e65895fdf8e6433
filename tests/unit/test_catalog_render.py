"""render_category: the pure Certification-category -> Workflow function the controller reuses."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.api.v1alpha1.certification import Certification
from nvcre.api.v1alpha1.constants import Annotation, EventReason, Label
from nvcre.api.v1alpha1.workflow import Workflow
from nvcre.catalog import BuildError, CategoryNotFound, NoNodesMatch, load_catalog, render_category
from nvcre.platform import GPU_ARCHITECTURES, PLATFORMS, synthetic_nodes
from nvcre.render.workflow import resolve_workflow


def _cert(
    *categories: dict[str, Any], name: str = "c1", uid: str | None = None, **spec: Any
) -> Certification:
    metadata: dict[str, Any] = {"name": name, "namespace": "team"}
    if uid:
        metadata["uid"] = uid
    return Certification.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                "categories": list(categories),
                **spec,
            },
        }
    )


def _cat(key: str, **options: Any) -> dict[str, Any]:
    domain, variant = key.split("/")
    return {"domain": domain, "variant": variant, **({"options": options} if options else {})}


def _node(
    name: str, product: str | None, gpus: str = "8", provider: str = "", **alloc: str
) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.present": "true"}
    if product:
        labels["nvidia.com/gpu.product"] = product
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": provider} if provider else {},
        "status": {"allocatable": {"nvidia.com/gpu": gpus, **alloc}},
    }


H100 = "NVIDIA-H100-80GB-HBM3"
AR = "communication/nccl-all-reduce"


def _trainer(workflow: dict[str, Any]) -> dict[str, Any]:
    trainer: dict[str, Any] = workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    return trainer


def test_workflow_identity_labels_and_owner() -> None:
    result = render_category(
        _cert(_cat(AR, testScale="intra-rack"), uid="u-1"), 0, [_node("a", H100), _node("b", H100)]
    )
    meta = result.workflow["metadata"]
    # Truncate("c1-communication-nccl-all-reduce-intra-rack", 31): the category's own testScale
    # is in its name, so the category may be listed again at another scale
    assert meta["name"] == "c1-communication-nccl-all-aea9a"
    assert len(meta["name"]) <= 31
    assert meta["namespace"] == "team"
    assert meta["labels"] == {
        Label.MANAGED_BY: "nvcre",
        Label.CERTIFICATION: "c1",
        Label.CATEGORY_DOMAIN: "communication",
        Label.CATEGORY_VARIANT: "nccl-all-reduce",
    }
    assert meta["annotations"] == {Annotation.REQUESTED_TEST_SCALE: "intra-rack"}
    assert meta["ownerReferences"][0]["uid"] == "u-1" and meta["ownerReferences"][0]["controller"] is True
    assert "overrides" not in result.workflow["spec"]
    Workflow.model_validate(result.workflow)


def test_real_nodes_size_the_job_to_every_capable_node() -> None:
    nodes = [_node(f"n{i}", H100) for i in range(5)]
    assert render_category(_cert(_cat(AR)), 0, nodes).nodes_per_job == 5
    assert render_category(_cert(_cat(AR, nodesPerJob=3)), 0, nodes).nodes_per_job == 3
    assert render_category(_cert(_cat(AR, nodesPerJob=9)), 0, nodes).nodes_per_job == 5  # clamped


def test_training_snaps_to_the_largest_valid_count() -> None:
    nodes = [_node(f"n{i}", H100) for i in range(7)]
    result = render_category(_cert(_cat("training/nemotron5-56b")), 0, nodes)
    assert result.nodes_per_job == 7
    assert _trainer(result.workflow)["numNodes"] == 7


def test_capacity_filter_excludes_nodes_with_too_few_gpus() -> None:
    nodes = [_node("a", H100, gpus="8"), _node("b", H100, gpus="4"), _node("c", H100, gpus="0")]
    result = render_category(_cert(_cat(AR)), 0, nodes)
    assert result.nodes == ("a", "c")  # 0 (device plugin restarting) is kept
    assert result.excluded_nodes == ("b",)


def test_majority_vote_and_events() -> None:
    nodes = [
        _node("a", H100),
        _node("b", "NVIDIA-A100-SXM4-40GB"),
        _node("c", "NVIDIA-A100-SXM4-40GB"),
        _node("d", None),
    ]
    result = render_category(_cert(_cat(AR)), 0, nodes)
    assert result.gpu_architecture == "a100"
    assert result.nodes == ("b", "c")
    assert [e.reason for e in result.events] == [EventReason.HETEROGENEOUS_GPU]


def test_unknown_architecture_falls_back_with_a_warning() -> None:
    result = render_category(_cert(_cat(AR)), 0, [_node("a", "Tesla-T4")])
    assert result.gpus_per_node == 4
    assert [e.reason for e in result.events] == [EventReason.GPU_ARCHITECTURE_DEFAULTS]


def test_nic_detection_event_on_onprem_gb200() -> None:
    result = render_category(_cert(_cat(AR)), 0, [_node("a", "NVIDIA-GB200", gpus="4")])
    assert [e.reason for e in result.events] == [EventReason.NIC_RESOURCE_DETECTION]


def test_architecture_from_the_target_selector_when_no_node_is_labelled() -> None:
    cert = Certification.model_validate(
        {
            "metadata": {"name": "c1"},
            "spec": {
                "target": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-GB200"}},
                "categories": [_cat(AR)],
            },
        }
    )
    assert render_category(cert, 0, [_node("a", None, gpus="4")]).gpu_architecture == "gb200"


def test_errors() -> None:
    with pytest.raises(CategoryNotFound):
        render_category(_cert(_cat("communication/nope")), 0, [_node("a", H100)])
    with pytest.raises(NoNodesMatch, match="communication/nccl-all-reduce: no nodes match target"):
        render_category(_cert(_cat(AR)), 0, [])
    with pytest.raises(BuildError, match="cannot determine GPU architecture"):
        render_category(_cert(_cat(AR)), 0, [_node("a", None)])


def test_unresolved_render_keeps_the_overrides() -> None:
    result = render_category(
        _cert(_cat(AR)), 0, synthetic_nodes("aws", "h100"), offline=True, resolve_overrides=False
    )
    assert len(result.workflow["spec"]["overrides"]) == 18
    assert result.platform == ""
    assert Annotation.DETECTED_PLATFORM not in result.detection_annotations()


def test_forced_platform_wins_over_detection() -> None:
    nodes = [_node("m", "NVIDIA-GB300", gpus="4", provider="metal3://x")]
    assert render_category(_cert(_cat(AR)), 0, nodes).platform == "mistral"
    assert render_category(_cert(_cat(AR)), 0, nodes, platform="onprem").platform == "onprem"


@pytest.mark.parametrize("key", [e.key for e in load_catalog().list()])
def test_every_category_renders_on_every_platform_and_architecture(key: str) -> None:
    """No template, fragment or override of the catalog breaks on any platform x architecture."""
    for platform in PLATFORMS:
        for arch in GPU_ARCHITECTURES:
            result = render_category(_cert(_cat(key)), 0, synthetic_nodes(platform, arch), offline=True)
            assert result.platform == platform and result.gpu_architecture == arch
            Workflow.model_validate(result.workflow)
            trainer = _trainer(result.workflow)
            assert trainer["numProcPerNode"] in (1, result.gpus_per_node)


@pytest.mark.parametrize("key", [e.key for e in load_catalog().list()])
def test_every_replicated_job_comes_after_the_jobs_it_depends_on(key: str) -> None:
    """JobSet's webhook refuses a ``dependsOn`` on the first replicated job or naming a later one
    (the MPI launcher waits for ``node``, so ``node`` is listed first, as spec/catalog.md has it)."""
    for platform in PLATFORMS:
        for arch in GPU_ARCHITECTURES:
            result = render_category(_cert(_cat(key)), 0, synthetic_nodes(platform, arch), offline=True)
            for dependency in result.workflow["spec"].get("dependencies") or ():
                if dependency["kind"] != "TrainingRuntime":
                    continue
                seen: list[str] = []
                for job in dependency["spec"]["template"]["spec"]["replicatedJobs"]:
                    needs = [d["name"] for d in job.get("dependsOn") or ()]
                    assert set(needs) <= set(seen), (platform, arch, job["name"], needs, seen)
                    seen.append(job["name"])


@pytest.mark.parametrize(
    ("platform", "arch"),
    [("aws", "gb300"), ("gcp", "h100"), ("azure", "h100"), ("mistral", "gb300"), ("forge", "l40")],
)
def test_controller_resolution_of_an_unresolved_render_matches_the_resolved_render(
    platform: str, arch: str
) -> None:
    """The Workflow controller resolving the overrides later gives what the Certification render gives now.

    (Not on OCI: its gpu-defaults platform overrides change the template data itself, which a
    render that does not know the platform cannot anticipate.)
    """
    cert = _cert(
        *(_cat(e.key) for e in load_catalog().list()), gangScheduler={"schedulerName": "kai-scheduler"}
    )
    nodes = synthetic_nodes(platform, arch)
    for index in range(len(cert.spec.categories)):
        now = render_category(cert, index, nodes, offline=True)
        later = render_category(cert, index, nodes, offline=True, resolve_overrides=False)
        resolved = resolve_workflow(later.workflow, nodes, annotate=False)
        assert resolved.workflow["spec"] == now.workflow["spec"]
        # and resolving an already resolved Workflow changes nothing
        again = resolve_workflow(now.workflow, nodes, annotate=False)
        assert again.workflow["spec"] == now.workflow["spec"]
        assert not again.gang.restored


def test_unpinned_uses_the_requested_size_exactly() -> None:
    nodes = [_node(f"n{i}", H100) for i in range(3)]
    assert render_category(_cert(_cat(AR, placement="Unpinned", nodesPerJob=2)), 0, nodes).nodes_per_job == 2
    with pytest.raises(BuildError, match=r"options\.nodesPerJob: 4 nodes requested but only 3 matching node"):
        render_category(_cert(_cat(AR, placement="Unpinned", nodesPerJob=4)), 0, nodes)
    with pytest.raises(BuildError, match="requires at least 32 GPUs"):  # not snapped to a valid count either
        render_category(_cert(_cat("training/nemotron5-56b", placement="Unpinned", nodesPerJob=3)), 0, nodes)
