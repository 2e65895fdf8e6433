"""nvcre.setup.plan: what ``nvcrectl setup`` decides from what it read (cli.md 3, user-reports 7-9)."""

from __future__ import annotations

import json

import pytest

from nvcre.setup import plan
from nvcre.setup.plan import JobSetController, JobSetEvidence, Observed, Release, TrainerInventory

DIGEST = "sha256:" + "a" * 64


def test_skip_phases_rejects_unknown_names() -> None:
    assert plan.parse_phases("deps, helm", plan.INIT_PHASES) == {"deps", "helm"}
    assert plan.parse_phases("", plan.INIT_PHASES) == frozenset()
    with pytest.raises(plan.PlanError, match="unknown phase"):
        plan.parse_phases("deps,cr", plan.INIT_PHASES)


@pytest.mark.parametrize(
    ("image", "values"),
    [
        (
            "reg.local:5000/nvcre/manager:v1",
            {"manager.image.repository": "reg.local:5000/nvcre/manager", "manager.image.tag": "v1"},
        ),
        (
            f"ghcr.io/x/manager@{DIGEST}",
            {"manager.image.repository": "ghcr.io/x/manager", "manager.image.digest": DIGEST},
        ),
        ("manager", {"manager.image.repository": "manager"}),
    ],
)
def test_image_by_tag_or_digest(image: str, values: dict[str, str]) -> None:
    assert plan.image_values(image) == values


@pytest.mark.parametrize(
    "image", ["ghcr.io/x/m:v1,manager.image.pullPolicy=Always", "a b", "X/Upper:1", "m@sha256:short"]
)
def test_image_that_could_smuggle_values_is_refused(image: str) -> None:
    with pytest.raises(plan.PlanError, match="invalid --image"):
        plan.image_values(image)


def test_helm_values_turn_off_the_charts_logprofiles_and_bind_the_pull_secret() -> None:
    values = plan.helm_values(None, "0.1.0", pull_secret=True)
    assert values["logProfiles.install"] is False
    assert plan.nested(values) == {
        "manager": {
            "image": {"repository": plan.IMAGE_REPOSITORY, "tag": "0.1.0"},
            "imagePullSecrets": [plan.PULL_SECRET],
        },
        "logProfiles": {"install": False},
    }


def test_release_states_from_helm_list() -> None:
    listed = json.dumps(
        [{"name": "kubeflow-trainer", "status": "deployed", "chart": "kubeflow-trainer-2.3.0"}]
    )
    assert plan.release_from_helm("kubeflow-trainer", "kubeflow-system", 0, listed) == Release(
        "kubeflow-trainer", "kubeflow-system", "deployed", "2.3.0"
    )
    rc = json.dumps([{"name": "nvcre", "status": "pending-upgrade", "chart": "nvcre-0.2.0-rc.1"}])
    assert plan.release_from_helm("nvcre", "nvcre", 0, rc).chart_version == "0.2.0-rc.1"
    assert plan.release_from_helm("nvcre", "nvcre", 0, "[]").state == plan.NOT_INSTALLED
    assert plan.release_from_helm("nvcre", "nvcre", 1, "").state == plan.UNKNOWN
    assert plan.release_from_helm("nvcre", "nvcre", 0, "not json").state == plan.UNKNOWN


def _controller(namespace: str, name: str, **labels: str) -> JobSetController:
    return JobSetController(namespace, name, labels)


@pytest.mark.parametrize(
    ("evidence", "owner"),
    [
        (JobSetEvidence(crd_present=False), "absent"),
        (JobSetEvidence(crd_present=True), "crd-only"),
        (
            JobSetEvidence(
                True,
                [
                    _controller(
                        "kubeflow-system",
                        "jobset-controller",
                        **{"app.kubernetes.io/instance": "kubeflow-trainer"},
                    )
                ],
                ["kubeflow-system/jobset-webhook-service"],
            ),
            "bundled",
        ),
        (
            JobSetEvidence(True, [_controller("jobset", "jobset", **{"helm.sh/chart": "jobset-0.11.0"})]),
            "external",
        ),
        (
            JobSetEvidence(
                True,
                [_controller("jobset-system", "jobset-controller-manager")],
                ["jobset-system/jobset-webhook-service"],
            ),
            "external",
        ),
        # helm template | kubectl apply: neither Helm's labels nor the kustomize layout
        (JobSetEvidence(True, [_controller("batch", "my-jobset")], ["batch/my-jobset-webhook"]), "unknown"),
        (JobSetEvidence(True, [], ["batch/some-webhook"]), "unknown"),
    ],
)
def test_jobset_owner(evidence: JobSetEvidence, owner: str) -> None:
    assert plan.jobset_owner(evidence) == owner


def test_deps_skips_a_healthy_release_and_installs_otherwise() -> None:
    deployed = Release("kubeflow-trainer", "kubeflow-system", "deployed", "2.3.0")
    assert plan.deps_step(deployed, "2.3.0", True, "bundled").action == "skip"
    # The CRD gone (deleted by hand): reinstall even though helm says deployed.
    assert plan.deps_step(deployed, "2.3.0", False, "bundled").action == "install"
    other = plan.deps_step(
        Release("kubeflow-trainer", "kubeflow-system", "deployed", "2.2.1"), "2.3.0", True, "bundled"
    )
    assert (other.action, other.message) == (
        "install",
        '[deps] Kubeflow Trainer release is in state "deployed"; attempting install of v2.3.0...',
    )
    fresh = plan.deps_step(
        Release("kubeflow-trainer", "kubeflow-system", plan.NOT_INSTALLED), "2.3.0", True, "external"
    )
    assert fresh.message == "[deps] Installing Kubeflow Trainer v2.3.0..."
    assert fresh.values == {"jobset.install": False}
    refused = plan.deps_step(
        Release("kubeflow-trainer", "kubeflow-system", plan.NOT_INSTALLED), "2.3.0", True, "unknown"
    )
    assert refused.action == "refuse"
    assert "--skip-phases=deps" in refused.message


def test_recovery_needs_the_conflict_signature_and_a_stuck_release() -> None:
    def conflict(obj: str, kind: str = "/v1, Kind=Secret", field: str = ".data.ca.crt") -> str:
        return (
            f"Error: UPGRADE FAILED: conflict occurred while applying object {obj} {kind}: Apply failed "
            f'with 1 conflict: conflict with "trainer-controller-manager" using v1: {field}\n'
        )

    secret = conflict("kubeflow-system/kubeflow-trainer-webhook-cert")
    assert plan.is_recoverable_failure(secret, "failed")
    assert plan.is_recoverable_failure(secret, "pending-install")
    assert not plan.is_recoverable_failure(secret, "deployed")
    assert not plan.is_recoverable_failure("context deadline exceeded", "failed")
    # Only a Secret's .data in the Trainer namespace: recovery deletes that namespace.
    assert not plan.is_recoverable_failure(conflict("team-a/webhook-cert"), "failed")
    assert not plan.is_recoverable_failure(conflict("kubeflow-system/c", "/v1, Kind=ConfigMap"), "failed")
    assert not plan.is_recoverable_failure(
        conflict("kubeflow-system/kubeflow-trainer-webhook-cert", field=".metadata.labels"), "failed"
    )
    several = (
        "Error: UPGRADE FAILED: conflict occurred while applying object kubeflow-system/jobset-webhook-server-cert\n"
        '/v1, Kind=Secret: Apply failed with 2 conflicts: conflicts with "jobset-controller" using v1:\n'
        "- .data.ca.crt\n- .data.tls.crt\n"
    )
    assert plan.is_recoverable_failure(several, "failed")
    elsewhere = conflict(
        "kubeflow-system/kubeflow-trainer-webhook-cert", field=".metadata.labels"
    ) + conflict("team-a/x", "/v1, Kind=ConfigMap", ".data.y")
    assert not plan.is_recoverable_failure(elsewhere, "failed")  # the .data is another object's


def test_recovery_gate_names_every_blocker() -> None:
    assert plan.recovery_blockers(TrainerInventory()) == []
    blockers = plan.recovery_blockers(
        TrainerInventory(
            trainjobs=["team-a/train"],
            jobsets=["team-a/js"],
            foreign_runtimes=["ClusterTrainingRuntime custom"],
            forbidden=["list trainjobs"],
            protected=["ConfigMap keep-me"],
        )
    )
    assert blockers == [
        "TrainJob team-a/train exists",
        "JobSet team-a/js exists",
        "ClusterTrainingRuntime custom is not managed by Helm",
        "permission missing: list trainjobs",
        "ConfigMap keep-me in namespace kubeflow-system was not created by the Trainer release",
    ]


def test_the_trainer_namespace_keeps_what_the_release_controllers_and_kubernetes_made() -> None:
    def obj(kind: str, name: str, **meta: object) -> dict[str, object]:
        return {"kind": kind, "metadata": {"name": name, **meta}}

    helm = {"annotations": {"meta.helm.sh/release-name": "kubeflow-trainer"}}
    assert plan.foreign_objects(
        [
            obj("Deployment", "kubeflow-trainer-controller-manager", **helm),
            obj("Secret", "kubeflow-trainer-webhook-cert", **helm),
            obj("Secret", "sh.helm.release.v1.kubeflow-trainer.v1"),  # helm's own record
            obj(
                "Pod",
                "kubeflow-trainer-controller-manager-7c9f-abcde",
                ownerReferences=[{"kind": "ReplicaSet"}],
            ),
            obj("ConfigMap", "kube-root-ca.crt"),
            obj("ServiceAccount", "default"),
            obj("ConfigMap", "team-notes"),
            obj("Secret", "sh.helm.release.v1.other-release.v1"),
            obj("Deployment", "x", annotations={"meta.helm.sh/release-name": "another-release"}),
        ]
    ) == ["ConfigMap team-notes", "Deployment x", "Secret sh.helm.release.v1.other-release.v1"]


def test_helm_phase_skips_only_the_same_chart_and_values() -> None:
    values = plan.helm_values(None, "0.1.0", pull_secret=False)
    same = Release("nvcre", "nvcre", "deployed", "0.1.0", plan.nested(values))
    assert plan.helm_step(same, "0.1.0", values) == "skip"
    assert plan.helm_step(same, "0.2.0", values) == "install"
    assert plan.helm_step(same, "0.1.0", plan.helm_values(f"x/m@{DIGEST}", "0.1.0", False)) == "install"
    assert (
        plan.helm_step(Release("nvcre", "nvcre", "failed", "0.1.0", plan.nested(values)), "0.1.0", values)
        == "install"
    )


def test_apply_verb() -> None:
    live = {"metadata": {"generation": 3, "labels": {"a": "b"}}}
    assert plan.apply_verb(None, None) == "create"
    assert plan.apply_verb(live, {"metadata": {"generation": 3, "labels": {"a": "b"}}}) == "unchanged"
    assert plan.apply_verb(live, {"metadata": {"generation": 4, "labels": {"a": "b"}}}) == "update"
    assert plan.apply_verb(live, {"metadata": {"generation": 3, "labels": {"a": "c"}}}) == "update"


def _ready(**changes: object) -> Observed:
    base: dict[str, object] = {
        "nvcre_crds": ["certifications.nvcre.nvidia.com"],
        "controller_available": True,
        "trainer_crd": True,
        "trainer_version": "2.3.0",
        "trainer_version_source": "helm",
        "log_profiles": 5,
        "gpu_nodes": 4,
        "dcgm": "found",
        "releases": [
            Release("nvcre", "nvcre", "deployed"),
            Release("kubeflow-trainer", "kubeflow-system", "deployed"),
        ],
    }
    base.update(changes)
    return Observed(**base)  # type: ignore[arg-type]


def test_status_ready() -> None:
    result = plan.status(_ready(), "2.3.0")
    assert result.installed
    table = plan.status_table(result, dcgm_not_found=False)
    assert "Status: ready" in table
    assert "Helm release kubeflow-trainer   ✓ deployed" in table
    assert plan.status_json(result)["components"] == {
        "nvcreCRDs": True,
        "nvcreController": True,
        "kubeflowTrainer": True,
        "logProfiles": True,
        "gpuOperator": True,
        "dcgm": True,
    }


def test_status_missing_components_say_what_to_do() -> None:
    result = plan.status(_ready(controller_available=False, gpu_nodes=0, dcgm="not-found"), "2.3.0")
    assert not result.installed
    table = plan.status_table(result, dcgm_not_found=True)
    assert "Status: not ready — run 'nvcrectl setup init' to install missing components" in table
    assert "GPU Operator must be installed by your cluster administrator" in table
    assert "kubectl -n nvcre describe deployment nvcre-manager" in table
    assert "Note: service gpu-operator/nvidia-dcgm is missing." in table


def test_dcgm_is_optional() -> None:
    assert plan.status(_ready(dcgm="forbidden"), "2.3.0").installed


def test_a_failed_release_blocks_readiness_and_says_how_to_repair_it() -> None:
    failed = [
        Release("nvcre", "nvcre", "failed"),
        Release("kubeflow-trainer", "kubeflow-system", plan.UNKNOWN),
    ]
    result = plan.status(_ready(releases=failed), "2.3.0")
    assert not result.installed
    table = plan.status_table(result, dcgm_not_found=False)
    assert "Status: not ready — a managed Helm release is unhealthy" in table
    assert "Helm release nvcre (namespace: nvcre) is failed — run 'nvcrectl setup init' to repair it" in table
    assert "Helm release kubeflow-trainer   - unknown" in table


def test_another_trainer_version_fails_and_an_unknown_one_warns() -> None:
    other = plan.status(_ready(trainer_version="2.2.1", trainer_version_source="image"), "2.3.0")
    assert not other.installed
    assert "Kubeflow Trainer 2.2.1 (from image) is installed; nvcre supports 2.3.0" in plan.status_table(
        other, False
    )
    unknown = plan.status(_ready(trainer_version="", trainer_version_source=""), "2.3.0")
    assert unknown.installed
    assert "warning: the installed Kubeflow Trainer version could not be determined" in plan.status_table(
        unknown, False
    )


def test_reset_refuses_while_anything_would_be_orphaned() -> None:
    objects = [
        plan.NvcreObject("LogProfile", "nccl-bandwidth", builtin=True),
        plan.NvcreObject("Certification", "c1", "team-a"),
        plan.NvcreObject("LogProfile", "my-profile"),
    ]
    assert plan.reset_blockers(objects, None, frozenset()) == [
        "Certification/c1 (namespace: team-a) exists",
        "LogProfile/my-profile exists",
    ]
    assert plan.reset_blockers(objects, None, frozenset({"helm"})) == []
    trainer = TrainerInventory(trainjobs=["team-a/t"])
    assert plan.reset_blockers(objects[:1], trainer, frozenset()) == ["TrainJob team-a/t exists"]
    assert plan.reset_blockers(objects[:1], trainer, frozenset({"deps"})) == []


def _manager(label: str, image: str) -> plan.ManagerDeployment:
    return plan.ManagerDeployment("nvcre", "nvcre-manager", label, image, 1, 2)


@pytest.mark.parametrize(
    ("label", "image", "version"),
    [
        ("0.1.0", "reg/nvcre-manager:custom", "0.1.0"),  # a Helm install: the chart's appVersion
        ("", "reg/nvcre-manager:0.2.0", "0.2.0"),  # config/ applied with kubectl: the image's tag
        ("", f"reg/nvcre-manager@{DIGEST}", "unknown"),
    ],
)
def test_manager_version(label: str, image: str, version: str) -> None:
    assert plan.manager_version(_manager(label, image)) == version


def test_a_manager_of_another_version_is_a_warning() -> None:
    lines = plan.manager_version_lines("0.1.0", [_manager("", "reg/nvcre-manager:0.2.0")])
    assert lines == [
        "Manager: 0.2.0 (Deployment nvcre/nvcre-manager, image reg/nvcre-manager:0.2.0, 1/2 ready)",
        "Warning: the manager runs 0.2.0, this client is 0.1.0; install the matching nvcre package, "
        "or run 'nvcrectl setup init' to upgrade the manager.",
    ]
