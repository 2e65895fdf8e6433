"""Vendor the upstream schemas nvcre's CRDs embed.

Reads the Kubernetes OpenAPI v3 document shipped in the ``k8s.io/kubernetes`` Go module and the
Kubeflow Trainer CRDs shipped in ``github.com/kubeflow/trainer/v2``, both fetched through the Go
module proxy, and writes the definitions nvcre needs (with everything they reference) to
``src/nvcre/crd/vendored/``. Run it only to move to newer upstream versions:

    python hack/crd/vendor_upstream_schemas.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

KUBERNETES = "k8s.io/kubernetes@v1.36.3"
TRAINER = "github.com/kubeflow/trainer/v2@v2.3.0"
ROOTS = [
    "io.k8s.api.core.v1.Container",
    "io.k8s.api.core.v1.EnvVar",
    "io.k8s.api.core.v1.NodeSelectorRequirement",
    "io.k8s.api.core.v1.ResourceRequirements",
    "io.k8s.api.core.v1.Toleration",
    "io.k8s.api.core.v1.Volume",
    "io.k8s.api.core.v1.VolumeMount",
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
]
OUT = Path(__file__).resolve().parents[2] / "src" / "nvcre" / "crd" / "vendored"


def module_dir(module: str) -> Path:
    out = subprocess.run(
        ["go", "mod", "download", "-json", module], check=True, capture_output=True, text=True
    ).stdout
    return Path(json.loads(out)["Dir"])


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if "$ref" in node else set()
        for value in node.values():
            found |= refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(refs(item) for item in node)) if node else set()
    return set()


def closure(schemas: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    todo, seen = list(roots), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = schemas[name]
        todo.extend(refs(schemas[name]) - seen.keys())
    return dict(sorted(seen.items()))


def main() -> int:
    k8s = module_dir(KUBERNETES) / "api" / "openapi-spec" / "v3"
    schemas: dict[str, Any] = {}
    for doc in ("api__v1_openapi.json",):
        schemas.update(json.loads((k8s / doc).read_text())["components"]["schemas"])
    core = closure(schemas, ROOTS)
    (OUT / "kubernetes.json").write_text(json.dumps({"source": KUBERNETES, "schemas": core}, indent=1) + "\n")

    crd = yaml.safe_load(
        (module_dir(TRAINER) / "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml").read_text()
    )
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    trainer = {"source": TRAINER, "schemas": {"io.kubeflow.trainer.v1alpha1.TrainJobSpec": spec}}
    (OUT / "trainer.json").write_text(json.dumps(trainer, indent=1) + "\n")
    print(f"wrote {len(core)} Kubernetes definitions and the TrainJobSpec schema to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
