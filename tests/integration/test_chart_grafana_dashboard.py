"""The chart's Grafana dashboard ConfigMap (``grafanaDashboard.*``), rendered with the real helm:
off by default, and when on, the dashboard file itself under the sidecar's label (no control
plane needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvcre.setup import chart
from nvcre.setup.helm import Helm
from nvcre.testing import binaries

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "nvcre"


@pytest.fixture(scope="module")
def helm() -> Helm:
    return Helm(str(binaries.ensure([binaries.HELM]).path(binaries.HELM)))


def dashboards(helm: Helm, values: list[str]) -> list[dict[str, Any]]:
    return [
        d
        for d in chart.render_chart(helm, CHART, values)
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-grafana-dashboard")
    ]


def test_no_dashboard_by_default(helm: Helm) -> None:
    assert dashboards(helm, []) == []


def test_the_dashboard_configmap_carries_the_file_under_the_sidecars_label(helm: Helm) -> None:
    [config_map] = dashboards(helm, ["grafanaDashboard.enabled=true"])
    meta = config_map["metadata"]
    assert meta["name"] == "nvcre-grafana-dashboard"
    assert meta["namespace"] == "nvcre"
    assert meta["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in meta
    [(name, text)] = config_map["data"].items()
    assert name == "nvcre-fleet.json"
    assert json.loads(text) == json.loads((CHART / "files" / "dashboards" / "nvcre-fleet.json").read_text())


def test_the_label_namespace_and_annotations_are_values(helm: Helm) -> None:
    [config_map] = dashboards(
        helm,
        [
            "grafanaDashboard.enabled=true",
            "grafanaDashboard.label=grafana_dashboard_nvcre",
            "grafanaDashboard.labelValue=yes",
            "grafanaDashboard.namespace=monitoring",
            "grafanaDashboard.annotations.grafana_folder=GPU fleet",
        ],
    )
    meta = config_map["metadata"]
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["grafana_dashboard_nvcre"] == "yes"
    assert "grafana_dashboard" not in meta["labels"]
    assert meta["annotations"] == {"grafana_folder": "GPU fleet"}
