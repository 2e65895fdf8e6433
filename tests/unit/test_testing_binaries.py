"""Locating, fingerprinting and caching the control-plane binaries (no Go build runs here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nvcre.testing import binaries as bins

VERSIONS = bins.Versions(
    kubernetes="v1.37.2",
    etcd="v3.7.3",
    kwok="v0.8.0",
    trainer="v2.2.1",
    jobset="v0.12.0",
    toxiproxy="v2.5.0",
    helm="v3.22.0",
)


def _wrappers(tmp_path: Path) -> Path:
    root = tmp_path / "hack" / "controlplane"
    for module in ("kubernetes", "etcd", "kwok", "toxiproxy", "helm"):
        (root / module).mkdir(parents=True)
        (root / module / "go.mod").write_text(f"module example/{module}\n")
        (root / module / "go.sum").write_text("")
    return root


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_parse_env_file_ignores_comments_and_blank_lines() -> None:
    text = '# comment\n\nKUBERNETES_VERSION=v1.37.2\nETCD_VERSION = "v3.7.3"\n'
    assert bins.parse_env_file(text) == {"KUBERNETES_VERSION": "v1.37.2", "ETCD_VERSION": "v3.7.3"}


def test_parse_env_file_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="malformed"):
        bins.parse_env_file("KUBERNETES_VERSION v1\n")


def test_repository_versions_file_is_complete() -> None:
    versions = bins.load_versions()
    assert versions.kubernetes.startswith("v1.")
    assert versions.etcd.startswith("v3.")
    assert versions.key == f"k8s-{versions.kubernetes}_etcd-{versions.etcd}_kwok-{versions.kwok}"


def test_cache_dir_defaults_to_xdg_cache_keyed_by_versions(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert bins.cache_dir(VERSIONS, env) == tmp_path / "nvcre" / "bin" / VERSIONS.key


def test_cache_dir_override(tmp_path: Path) -> None:
    assert bins.cache_dir(VERSIONS, {"NVCRE_BIN_DIR": str(tmp_path / "b")}) == tmp_path / "b"


def test_kubernetes_ldflags_stamp_the_version() -> None:
    flags = bins.kubernetes_ldflags("v1.37.2")
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in flags
    assert "-X k8s.io/component-base/version.gitMinor=37" in flags
    assert flags.startswith("-s -w")


def test_fingerprint_changes_with_versions_and_wrapper_module(tmp_path: Path) -> None:
    wrappers = _wrappers(tmp_path)
    before = bins.fingerprint(bins.KUBE_APISERVER, VERSIONS, wrappers)
    assert before == bins.fingerprint(bins.KUBE_APISERVER, VERSIONS, wrappers)
    bumped = bins.Versions(**{**VERSIONS.__dict__, "kubernetes": "v1.37.3"})
    assert bins.fingerprint(bins.KUBE_APISERVER, bumped, wrappers) != before
    # etcd does not depend on the kubernetes wrapper
    etcd_before = bins.fingerprint(bins.ETCD, VERSIONS, wrappers)
    (wrappers / "kubernetes" / "go.sum").write_text("changed\n")
    assert bins.fingerprint(bins.KUBE_APISERVER, VERSIONS, wrappers) != before
    assert bins.fingerprint(bins.ETCD, VERSIONS, wrappers) == etcd_before


def test_toxiproxy_is_built_from_its_own_wrapper_with_its_version_stamped(tmp_path: Path) -> None:
    wrappers = _wrappers(tmp_path)
    assert "-X github.com/Shopify/toxiproxy/v2.Version=v2.5.0" in bins.ldflags_for(bins.TOXIPROXY, VERSIONS)
    before = bins.fingerprint(bins.TOXIPROXY, VERSIONS, wrappers)
    bumped = bins.Versions(**{**VERSIONS.__dict__, "toxiproxy": "v2.5.1"})
    assert bins.fingerprint(bins.TOXIPROXY, bumped, wrappers) != before
    assert bumped.key == VERSIONS.key, "a proxy bump must not rebuild the control plane"
    (wrappers / "toxiproxy" / "go.sum").write_text("changed\n")
    assert bins.fingerprint(bins.TOXIPROXY, VERSIONS, wrappers) != before
    proxy = _executable(tmp_path / "elsewhere" / "toxiproxy-server")
    assert bins.override_path(bins.TOXIPROXY, {"TEST_ASSET_TOXIPROXY_SERVER": str(proxy)}) == proxy


def test_cached_binary_is_reused_only_with_a_matching_stamp(tmp_path: Path) -> None:
    wrappers = _wrappers(tmp_path)
    directory = tmp_path / "cache"
    binary = _executable(directory / bins.ETCD)
    assert bins.cached_path(bins.ETCD, VERSIONS, directory, wrappers) is None  # no stamp yet
    stamp = {bins.ETCD: {"fingerprint": bins.fingerprint(bins.ETCD, VERSIONS, wrappers)}}
    (directory / bins.STAMP_NAME).write_text(json.dumps(stamp))
    assert bins.cached_path(bins.ETCD, VERSIONS, directory, wrappers) == binary
    (wrappers / "etcd" / "go.mod").write_text("module example/etcd\n\nrequire x v1\n")
    assert bins.cached_path(bins.ETCD, VERSIONS, directory, wrappers) is None


def test_corrupt_stamp_means_rebuild(tmp_path: Path) -> None:
    (tmp_path / bins.STAMP_NAME).write_text("{not json")
    assert bins.read_stamp(tmp_path) == {}


def test_test_asset_variables_win(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "elsewhere" / "etcd")
    assert bins.override_path(bins.ETCD, {"TEST_ASSET_ETCD": str(etcd)}) == etcd


def test_test_asset_variable_pointing_nowhere_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(bins.BinaryError, match="TEST_ASSET_KUBE_APISERVER"):
        bins.override_path(bins.KUBE_APISERVER, {"TEST_ASSET_KUBE_APISERVER": str(tmp_path / "nope")})


def test_kubebuilder_assets_directory_is_used_when_it_has_the_binary(tmp_path: Path) -> None:
    apiserver = _executable(tmp_path / "assets" / "kube-apiserver")
    env = {"KUBEBUILDER_ASSETS": str(tmp_path / "assets")}
    assert bins.override_path(bins.KUBE_APISERVER, env) == apiserver
    assert bins.override_path(bins.KWOK, env) is None  # envtest ships no kwok: build it


def test_missing_go_is_reported_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(bins.BinaryError, match=r"Go toolchain \('go'\) is not on PATH.*KUBEBUILDER_ASSETS"):
        bins.check_go()


def test_old_go_is_rejected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _executable(tmp_path / "go").write_text("#!/bin/sh\necho go1.21.0\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin:/bin")
    with pytest.raises(bins.BinaryError, match=r"go1\.21\.0 is too old"):
        bins.check_go()


def test_unreachable_proxy_is_explained() -> None:
    output = 'go: k8s.io/api@v0.37.2: Get "https://proxy.golang.org/...": dial tcp: lookup proxy.golang.org'
    message = bins._explain_go_failure("go build k8s.io/kubernetes/cmd/kube-apiserver", output)
    assert "module proxy is unreachable" in message
    assert "KUBEBUILDER_ASSETS" in message


def test_go_environment_bounds_parallelism_and_never_downloads_toolchains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOFLAGS", "-mod=readonly")
    env = bins.go_environment()
    assert env["GOTOOLCHAIN"] == "local"
    assert env["GOFLAGS"].startswith("-mod=readonly -p=")
    monkeypatch.setenv("GOFLAGS", "-p=1")
    assert bins.go_environment()["GOFLAGS"] == "-p=1"


def test_ensure_without_building_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NVCRE_BIN_DIR", str(tmp_path / "empty"))
    for var in (*bins.ENV_OVERRIDES.values(), "KUBEBUILDER_ASSETS"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(
        bins.BinaryError, match=r"missing control-plane binaries \['etcd', 'kube-apiserver', 'kwok'\]"
    ):
        bins.ensure(build_missing=False)


def test_unknown_binary_is_rejected() -> None:
    with pytest.raises(bins.BinaryError, match="unknown binaries"):
        bins.ensure(["kubelet"], build_missing=False)


def test_module_cache_path_escapes_capitals(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOMODCACHE", str(tmp_path))
    target = tmp_path / "github.com" / "!burnt!sushi" / "toml@v1.0.0"
    target.mkdir(parents=True)
    assert bins._module_cache_dir("github.com/BurntSushi/toml", "v1.0.0") == target
