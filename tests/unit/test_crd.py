"""The generated CRDs: up to date, structural, and carrying every validation rule with its message."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvcre.crd.__main__ import main as crd_main
from nvcre.crd.generate import generate_all
from nvcre.validation.manifests import _schema as check_schema

CRD_DIR = Path(__file__).parents[2] / "config" / "crd"
CRDS = {manifest["spec"]["names"]["kind"]: manifest for manifest in generate_all().values()}


def test_committed_crds_match_the_models() -> None:
    assert crd_main(["--check", str(CRD_DIR)]) == 0, (
        "run `python -m nvcre.crd` and commit config/crd and src/nvcre/validation/schemas"
    )


@pytest.mark.parametrize("stale", ["crds/nvcre.nvidia.com_jobs.yaml", "schemas/Job.json"])
def test_check_fails_on_a_stale_file(tmp_path: Path, stale: str) -> None:
    folders = [str(tmp_path / "crds"), "--schemas", str(tmp_path / "schemas")]
    assert crd_main(folders) == 0
    path = tmp_path / stale
    path.write_text(path.read_text().replace("workload is immutable", "workload is mutable"))
    assert crd_main(["--check", *folders]) == 1


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_the_shipped_schema_is_the_crds(kind: str) -> None:
    """What ``nvcrectl validate`` checks a manifest against is what the API server would."""
    assert check_schema(kind) == _schema(kind)


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every schema node with its path (``.properties`` dropped, ``[*]`` for items, ``{*}`` for maps)."""
    found = [(path, node)]
    for key, sub in node.get("properties", {}).items():
        found += _walk(sub, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        found += _walk(node["items"], f"{path}[*]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}{{*}}")
    return found


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _rules_at(kind: str, path: str) -> dict[str, str]:
    for where, node in _walk(_schema(kind)):
        if where == path:
            return {v["message"]: v["rule"] for v in node.get("x-kubernetes-validations", [])}
    raise AssertionError(f"{kind} has no schema node at {path}")


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_schema_is_structural(kind: str) -> None:
    for path, node in _walk(_schema(kind)):
        assert "$ref" not in node, path
        assert "title" not in node, path
        assert node.get("additionalProperties") is not False, path
        assert not ("properties" in node and isinstance(node.get("additionalProperties"), dict)), path
        typed = (
            "type" in node
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        )
        assert typed, f"{kind}{path} has no type"
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), f"{kind}{path}: anyOf outside int-or-string"


LABEL_RULES = [
    "labels must not set the controller-owned keys app.kubernetes.io/managed-by or any key under the nvcre.nvidia.com/ prefix",
    "each label key must be a valid Kubernetes label key: an optional DNS-subdomain prefix followed by '/', then a name of at most 63 characters beginning and ending with an alphanumeric character",
    "each label key prefix must be at most 253 characters",
]
QUEUE_KEY_RULES = [
    "queueLabelKey prefix must be at most 253 characters",
    "queueLabelKey must not use the controller-owned key app.kubernetes.io/managed-by or any key under the nvcre.nvidia.com/ prefix",
]
NIC_RULE = "nicResourceName must not use the reserved kubernetes.io or k8s.io domains"
JOB_RULES = {
    "": [
        "workloadMetadata cannot be added or removed after creation",
        "nodeHealthMonitor, goodputMeasurement, and bandwidthMeasurement cannot be added or removed after creation",
    ],
    ".workload": ["workload is immutable"],
    ".workloadMetadata": ["workloadMetadata is immutable"],
    ".nodeHealthMonitor": ["nodeHealthMonitor is immutable"],
    ".goodputMeasurement": ["goodputMeasurement is immutable"],
    ".bandwidthMeasurement": ["bandwidthMeasurement is immutable"],
    ".workloadMetadata.labels": LABEL_RULES,
}

EXPECTED: list[tuple[str, str, list[str]]] = [
    ("WorkloadRun", ".spec", ["spec is immutable after creation"]),
    ("Certification", ".spec", ["spec is immutable after creation"]),
    (
        "WorkloadRun",
        ".spec.framework.torch",
        ["script and module are mutually exclusive", "either script or module must be set"],
    ),
    ("WorkloadRun", ".spec.config", ["inline and configMapRef are mutually exclusive"]),
    ("WorkloadRun", ".spec.nicResourceName", [NIC_RULE]),
    ("Certification", ".spec.nicResourceName", [NIC_RULE]),
    ("Certification", ".spec.categories[*].options.nicResourceName", [NIC_RULE]),
    ("WorkloadRun", ".spec.gangScheduler.queueLabelKey", QUEUE_KEY_RULES),
    ("Certification", ".spec.gangScheduler.queueLabelKey", QUEUE_KEY_RULES),
    ("Workflow", ".spec.gangScheduler.queueLabelKey", QUEUE_KEY_RULES),
    ("WorkloadRun", ".spec.workloadMetadata.labels", LABEL_RULES),
    ("Certification", ".spec.workloadMetadata.labels", LABEL_RULES),
    ("Certification", ".spec.categories[*].options.workloadMetadata.labels", LABEL_RULES),
    ("Workflow", ".spec", ["gangScheduler cannot be added or removed after creation"]),
    ("Workflow", ".spec.gangScheduler", ["gangScheduler is immutable"]),
    (
        "Certification",
        ".spec.resources",
        ["requests.cpu must not exceed limits.cpu", "requests.memory must not exceed limits.memory"],
    ),
    ("Certification", ".spec.resources.limits.cpu", ["cpu must be a non-negative quantity"]),
    ("Certification", ".spec.resources.requests.memory", ["memory must be a non-negative quantity"]),
    *[("Job", f".spec{sub}", messages) for sub, messages in JOB_RULES.items()],
    *[("Workflow", f".spec.jobTemplate.spec{sub}", messages) for sub, messages in JOB_RULES.items()],
]


@pytest.mark.parametrize(("kind", "path", "messages"), EXPECTED, ids=[f"{k}{p}" for k, p, _ in EXPECTED])
def test_cel_rule_present_with_exact_message(kind: str, path: str, messages: list[str]) -> None:
    rules = _rules_at(kind, path)
    for message in messages:
        assert message in rules, f"{kind}{path} lacks {message!r}; has {sorted(rules)}"


def test_spec_immutability_rule_is_a_transition_rule() -> None:
    assert _rules_at("WorkloadRun", ".spec")["spec is immutable after creation"] == "self == oldSelf"


def test_framework_is_exactly_one_of_three() -> None:
    framework = dict(_walk(_schema("WorkloadRun")))[".spec.framework"]
    assert (framework["minProperties"], framework["maxProperties"]) == (1, 1)
    assert set(framework["properties"]) == {"torch", "mpi", "exec"}


def test_embedded_core_types_are_real_schemas() -> None:
    nodes = dict(_walk(_schema("WorkloadRun")))
    assert nodes[".spec.env[*]"]["required"] == ["name"]
    assert "valueFrom" in nodes[".spec.env[*]"]["properties"]
    assert "mountPath" in nodes[".spec.volumeMounts[*]"]["required"]
    assert "persistentVolumeClaim" in nodes[".spec.volumes[*]"]["properties"]
    assert "securityContext" in nodes[".spec.initContainers[*]"]["properties"]
    assert nodes[".spec.resources.limits{*}"]["x-kubernetes-int-or-string"] is True


def test_dependencies_are_embedded_resources() -> None:
    deps = dict(_walk(_schema("Workflow")))[".spec.dependencies[*]"]
    assert deps["x-kubernetes-embedded-resource"] is True
    assert deps["x-kubernetes-preserve-unknown-fields"] is True


def test_crd_defaults_only_where_the_api_has_them() -> None:
    defaults = {
        f"{kind}{path}": node["default"]
        for kind in CRDS
        for path, node in _walk(_schema(kind))
        if "default" in node
        and not path.startswith(".spec.jobTemplate.spec.workload")
        and not path.startswith(".spec.workload.trainJob")
        # Upstream core types keep their own +default markers (ContainerPort.protocol: TCP, ...).
        and ".volumes[*]." not in path
        and ".ports[*]." not in path
    }
    assert defaults == {
        "WorkloadRun.spec.framework.mpi.mpiImplementation": "OpenMPI",
        "Workflow.spec.orchestration.diagnose.minGroupSize": 2,
        "Workflow.spec.orchestration.execution.maxConcurrent": 0,
        "Workflow.spec.orchestration.execution.retryFailedGroups": 0,
        "Workflow.spec.orchestration.iterations": 1,
        "Workflow.spec.validation.performance.enabled": False,
        "Workflow.spec.validation.performance.tracking.perNode": False,
        "Workflow.spec.validation.performance.tracking.perDomain": False,
        "LogProfile.spec.workerStrategy.lifecyclePod": "first",
        "LogProfile.spec.workerStrategy.trainingStepPod": "first",
        "LogProfile.spec.workerStrategy.replicatedJobName": "trainer",
        # An override's execution block is the same type, so the API server defaults it too.
        "Workflow.spec.overrides[*].orchestration.execution.maxConcurrent": 0,
        "Workflow.spec.overrides[*].orchestration.execution.retryFailedGroups": 0,
        "WorkloadRun.spec.overrides[*].orchestration.execution.maxConcurrent": 0,
        "WorkloadRun.spec.overrides[*].orchestration.execution.retryFailedGroups": 0,
        # The report exports' delivery settings (spec api.md section 8), on the policy and
        # frozen on each export.
        **{
            f"{kind}.spec.{path}": value
            for kind in ("ReportExportPolicy", "ReportExport")
            for path, value in {
                "retry": {},
                "retry.initialBackoff": "10s",
                "retry.maxBackoff": "15m",
                "retry.maxAttempts": 100,
                "retry.maxElapsedTime": "24h",
                "retention": {},
                "retention.succeeded": "168h",
                "retention.failed": "720h",
                "webhook.timeout": "10s",
            }.items()
        },
        "ReportExportPolicy.spec.source.kind": "Certification",
        "ReportExport.spec.sourceRef.kind": "Certification",
    }


def test_scopes_and_status_subresources() -> None:
    assert CRDS["LogProfile"]["spec"]["scope"] == "Cluster"
    assert "subresources" not in CRDS["LogProfile"]["spec"]["versions"][0]
    for kind in (
        "WorkloadRun",
        "Workflow",
        "Job",
        "Certification",
        "BandwidthMeasurement",
        "GoodputMeasurement",
    ):
        assert CRDS[kind]["spec"]["scope"] == "Namespaced"
        assert CRDS[kind]["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_crd_files_parse_as_single_documents() -> None:
    for path in CRD_DIR.glob("*.yaml"):
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        documents = [d for d in yaml.load_all(path.read_text(), Loader=loader) if d]
        assert len(documents) == 1, path


# --- kubectl get: printer columns, short names, categories -------------------------------------

_SEGMENT = re.compile(r'\.((?:\\\.|[^.\[\\])+)(?:\[\?\(@\.(\w+)=="[^"]*"\)\])?')
_COLUMN_TYPES = {
    "string": "string",
    "integer": "integer",
    "boolean": "boolean",
    "number": "number",
    "date": "string",  # a date column of a status field reads its RFC 3339 text
}
# Short names of other APIs a GPU cluster runs beside nvcre (Kubernetes, JobSet, Kubeflow, Argo,
# cert-manager, Volcano, Kueue): none of nvcre's may shadow one.
_TAKEN_SHORT_NAMES = {
    "cj", "cm", "cs", "csr", "ds", "deploy", "ep", "ev", "hpa", "ing", "js", "netpol", "no", "ns",
    "pc", "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa", "sts", "svc", "limits", "crd", "crds",
    "job", "jobs", "wf", "wfs", "cwf", "wftmpl", "cert", "certs", "cr", "vcjob", "pg", "wl", "cq", "lq",
    "tj", "trainjob", "tr", "ctr",
}  # fmt: skip


def _columns(kind: str) -> list[dict[str, Any]]:
    columns: list[dict[str, Any]] = CRDS[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
    return columns


def _schema_at(kind: str, json_path: str) -> dict[str, Any] | None:
    """The schema a column's JSONPath reads (None under metadata, which the CRD leaves open)."""
    segments = list(_SEGMENT.finditer(json_path))
    assert "".join(m.group(0) for m in segments) == json_path, f"{kind}: cannot read {json_path}"
    node: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for match in segments:
        name, filtered = match.group(1), match.group(2)
        if name == "metadata":
            return None
        assert name in node.get("properties", {}), f"{kind}: {json_path} names no field {name!r}"
        node = node["properties"][name]
        if filtered:
            assert node["type"] == "array", f"{kind}: {json_path} filters {name}, not a list"
            node = node["items"]
            assert filtered in node["properties"], f"{kind}: {json_path} filters on no field {filtered!r}"
    return node


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_printer_column_reads_a_field_of_the_kind(kind: str) -> None:
    columns = _columns(kind)
    assert columns[-1]["name"] != "Age" or columns[-1]["jsonPath"] == ".metadata.creationTimestamp"
    assert [c for c in columns if c["name"] == "Age"] == [
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": "Time since the object was created.",
        }
    ]
    for column in columns:
        assert column["description"]
        schema = _schema_at(kind, column["jsonPath"])
        if schema is not None:
            assert _COLUMN_TYPES[column["type"]] == schema["type"], column


def test_the_label_columns_read_the_labels_the_workflow_puts_on_its_jobs() -> None:
    paths = {c["name"]: c["jsonPath"] for c in _columns("Job")}
    assert paths["Group"] == r".metadata.labels.nvcre\.nvidia\.com/group"
    assert paths["Workflow"] == r".metadata.labels.nvcre\.nvidia\.com/workflow"


def test_short_names_are_nvcre_own_and_every_kind_is_in_the_nvcre_category() -> None:
    short = [name for crd in CRDS.values() for name in crd["spec"]["names"]["shortNames"]]
    assert len(short) == len(set(short)) == len(CRDS)
    assert not set(short) & _TAKEN_SHORT_NAMES
    # nv-prefixed, but for the two the reference declares (users' scripts use them).
    assert all(name.startswith("nv") or name in ("rep", "rex") for name in short)
    assert {tuple(crd["spec"]["names"]["categories"]) for crd in CRDS.values()} == {("nvcre",)}


def test_docs_api_lists_each_kinds_short_name_and_columns() -> None:
    doc = (CRD_DIR.parents[1] / "docs" / "api.md").read_text().splitlines()
    for kind, crd in CRDS.items():
        (row,) = (line for line in doc if line.startswith(f"| `{kind}` | `"))
        columns = ", ".join(
            f"*{c['name'].upper()}*" if c.get("priority") else c["name"].upper() for c in _columns(kind)
        )
        assert row == f"| `{kind}` | `{crd['spec']['names']['shortNames'][0]}` | {columns} |"
