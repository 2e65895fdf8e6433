"""Which CRD documents the control plane installs from config/crd and friends."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvcre.testing.controlplane import crd_files, load_crds

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {name}
"""


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_missing_or_empty_directories_yield_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert crd_files([tmp_path / "absent", tmp_path / "empty"]) == []
    assert load_crds([]) == []


def test_crd_documents_are_collected_in_order_and_other_kinds_skipped(tmp_path: Path) -> None:
    crds = tmp_path / "crd"
    (crds / "sub").mkdir(parents=True)
    (crds / "b.yaml").write_text(CRD.format(name="bs.example.com") + "---\nkind: ConfigMap\n---\n")
    (crds / "a.yml").write_text(CRD.format(name="as.example.com"))
    (crds / "sub" / "c.yaml").write_text(CRD.format(name="cs.example.com"))
    (crds / "kustomization.yaml").write_text("resources: [a.yml]\n")
    (crds / "notes.txt").write_text("not yaml")
    files = crd_files([crds])
    assert [f.name for f in files] == ["a.yml", "b.yaml", "c.yaml"]
    names = [d["metadata"]["name"] for d in load_crds(files)]
    assert names == ["as.example.com", "bs.example.com", "cs.example.com"]
    # second load comes from the JSON memo and is identical
    assert [d["metadata"]["name"] for d in load_crds(files)] == names


def test_memo_follows_file_content(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(CRD.format(name="one.example.com"))
    assert load_crds([path])[0]["metadata"]["name"] == "one.example.com"
    path.write_text(CRD.format(name="two.example.com"))
    assert load_crds([path])[0]["metadata"]["name"] == "two.example.com"
