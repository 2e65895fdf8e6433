"""Locate or build the control-plane binaries (etcd, kube-apiserver, kwok, kubectl,
toxiproxy-server, and the
controllers of the full workload chain: kube-scheduler, kube-controller-manager, the JobSet
controller and Kubeflow Trainer's controller manager).

Resolution order for each binary:

1. ``TEST_ASSET_<NAME>`` with the binary's name upper-cased and ``-`` as ``_``
   (``TEST_ASSET_KUBE_APISERVER``, ``TEST_ASSET_JOBSET_CONTROLLER`` ...; an explicit path, as
   envtest understands them);
2. ``$KUBEBUILDER_ASSETS/<name>`` (a directory of envtest binaries);
3. the build cache: ``$NVCRE_BIN_DIR`` if set, else
   ``${XDG_CACHE_HOME:-~/.cache}/nvcre/bin/<versions>/``, filled by ``go build`` through the
   wrapper modules in ``hack/controlplane/`` (see :func:`build`).

The cache holds a stamp file recording what the binaries were built from (versions, wrapper
``go.mod``/``go.sum`` digests, build flags). A binary is reused only when the stamp matches, so a
version bump rebuilds and a warm lookup costs a few file reads.

This module uses only the standard library so ``hack/controlplane/build.sh`` works before any
virtual environment exists.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ETCD = "etcd"
KUBE_APISERVER = "kube-apiserver"
KWOK = "kwok"
KUBECTL = "kubectl"
#: The fault-injecting TCP proxy of the reliability suite (Toxiproxy's server command).
TOXIPROXY = "toxiproxy-server"
#: The Helm CLI ``nvcrectl setup`` drives (setup tests and the chart checks run it).
HELM = "helm"
KUBE_SCHEDULER = "kube-scheduler"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
JOBSET = "jobset-controller"
TRAINER = "trainer-controller-manager"

#: Binaries every control plane needs; kubectl is optional (handy for humans, unused by tests).
REQUIRED = (ETCD, KUBE_APISERVER, KWOK)
#: The controllers that turn a TrainJob into bound, running pods (see nvcre.testing.cluster).
CHAIN = (KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER, JOBSET, TRAINER)
ALL = (ETCD, KUBE_APISERVER, KWOK, KUBECTL, TOXIPROXY, HELM, *CHAIN)

ENV_OVERRIDES = {name: "TEST_ASSET_" + name.upper().replace("-", "_") for name in ALL}

#: Which wrapper module (directory under hack/controlplane) builds which package.
_BUILD_TARGETS = {
    ETCD: ("etcd", "go.etcd.io/etcd/server/v3"),
    KUBE_APISERVER: ("kubernetes", "k8s.io/kubernetes/cmd/kube-apiserver"),
    KWOK: ("kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    KUBECTL: ("kubernetes", "k8s.io/kubernetes/cmd/kubectl"),
    KUBE_SCHEDULER: ("kubernetes-controllers", "k8s.io/kubernetes/cmd/kube-scheduler"),
    KUBE_CONTROLLER_MANAGER: ("kubernetes-controllers", "k8s.io/kubernetes/cmd/kube-controller-manager"),
    JOBSET: ("jobset", "sigs.k8s.io/jobset"),
    TRAINER: ("trainer", "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"),
    TOXIPROXY: ("toxiproxy", "github.com/Shopify/toxiproxy/v2/cmd/server"),
    HELM: ("helm", "helm.sh/helm/v3/cmd/helm"),
}

#: Measured cold builds on 2 cores (empty Go build cache; the longer figure includes downloading
#: the modules), for progress text.
COLD_BUILD_HINT = {
    ETCD: "20 s to 2 min",
    KUBE_APISERVER: "4 to 9 min",
    KWOK: "1 to 2 min",
    KUBECTL: "~30 s after kube-apiserver",
    KUBE_SCHEDULER: "1 to 3 min after kube-apiserver",
    KUBE_CONTROLLER_MANAGER: "2 to 4 min after kube-apiserver",
    JOBSET: "3 to 6 min",
    TRAINER: "3 to 6 min",
    TOXIPROXY: "~1 min",
    HELM: "2 to 5 min",
}

TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
TRAINER_CRD_PATH = "manifests/base/crds"
KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK_CRD_PATH = "kustomize/crd/bases"
#: kwok CRDs the control plane installs (kwok then reads per-pod log locations from them).
KWOK_CRDS = ("kwok.x-k8s.io_logs.yaml", "kwok.x-k8s.io_clusterlogs.yaml")
JOBSET_MODULE = "sigs.k8s.io/jobset"
JOBSET_CRD_PATH = "config/components/crd/bases"
#: Kustomizations of the JobSet and Trainer admission webhook configurations (copied whole:
#: their patches add the object selectors, see nvcre.testing.cluster.kustomized_webhooks).
JOBSET_WEBHOOKS = "config/components/webhook"
TRAINER_WEBHOOKS = "manifests/base/webhook"

STAMP_NAME = "stamp.json"
GO_MIN_VERSION = (1, 26)


class BinaryError(RuntimeError):
    """A binary could not be found or built; the message says what is missing and what to do."""


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str
    kwok: str
    trainer: str
    jobset: str
    toxiproxy: str
    helm: str

    @property
    def key(self) -> str:
        """Directory name of the cache for these versions (toxiproxy's and helm's are in its stamp only)."""
        return f"k8s-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}"

    def binary_version(self, name: str) -> str:
        by_binary = {
            ETCD: self.etcd,
            KUBE_APISERVER: self.kubernetes,
            KWOK: self.kwok,
            KUBECTL: self.kubernetes,
            KUBE_SCHEDULER: self.kubernetes,
            KUBE_CONTROLLER_MANAGER: self.kubernetes,
            JOBSET: self.jobset,
            TRAINER: self.trainer,
            TOXIPROXY: self.toxiproxy,
            HELM: self.helm,
        }
        return by_binary[name]


@dataclass(frozen=True)
class Binaries:
    """Paths of the control-plane binaries and the CRD directories that come with them."""

    paths: Mapping[str, Path]
    trainer_crds: Path
    kwok_crds: Path
    jobset_crds: Path
    #: The upstream webhook configuration kustomizations (nvcre.testing.cluster).
    jobset_webhooks: Path
    trainer_webhooks: Path
    versions: Versions

    def path(self, name: str) -> Path:
        try:
            return self.paths[name]
        except KeyError:
            raise BinaryError(
                f"{name} was not resolved; build it with 'python -m nvcre.testing build'"
            ) from None


# ---------------------------------------------------------------------------------------------
# locations


def repo_root() -> Path:
    """The repository checkout this package lives in (``hack/controlplane`` must exist there)."""
    env = os.environ.get("NVCRE_REPO_ROOT")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parents[3], Path.cwd(), *Path.cwd().parents]
    for candidate in candidates:
        if (candidate / "hack" / "controlplane" / "versions.env").is_file():
            return candidate
    raise BinaryError(
        "cannot find hack/controlplane/versions.env: run from the nvcre repository checkout "
        "or set NVCRE_REPO_ROOT"
    )


def wrapper_dir() -> Path:
    return repo_root() / "hack" / "controlplane"


def parse_env_file(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"malformed line in versions.env: {raw!r}")
        values[key.strip()] = value.strip().strip('"')
    return values


def load_versions(path: Path | None = None) -> Versions:
    env = parse_env_file((path or wrapper_dir() / "versions.env").read_text())
    try:
        return Versions(
            kubernetes=env["KUBERNETES_VERSION"],
            etcd=env["ETCD_VERSION"],
            kwok=env["KWOK_VERSION"],
            trainer=env["TRAINER_VERSION"],
            jobset=env["JOBSET_VERSION"],
            toxiproxy=env["TOXIPROXY_VERSION"],
            helm=env["HELM_VERSION"],
        )
    except KeyError as missing:
        raise BinaryError(f"versions.env lacks {missing.args[0]}") from None


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/nvcre``."""
    env = os.environ if environ is None else environ
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "nvcre"


def cache_dir(versions: Versions, environ: Mapping[str, str] | None = None) -> Path:
    """Where built binaries for ``versions`` live: ``$NVCRE_BIN_DIR`` or ``<cache_root>/bin/<key>``."""
    env = os.environ if environ is None else environ
    if env.get("NVCRE_BIN_DIR"):
        return Path(env["NVCRE_BIN_DIR"]).expanduser()
    return cache_root(env) / "bin" / versions.key


def kubernetes_ldflags(version: str) -> str:
    """-ldflags that make ``kube-apiserver --version`` / ``kubectl version`` report ``version``."""
    major, minor = version.removeprefix("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def ldflags_for(name: str, versions: Versions) -> str:
    if name in (KUBE_APISERVER, KUBECTL, KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER):
        return kubernetes_ldflags(versions.kubernetes)
    if name == TOXIPROXY:
        return f"-s -w -X github.com/Shopify/toxiproxy/v2.Version={versions.toxiproxy}"
    if name == HELM:
        return f"-s -w -X helm.sh/helm/v3/internal/version.version={versions.helm}"
    return "-s -w"


def fingerprint(name: str, versions: Versions, wrappers: Path) -> str:
    """Digest of everything that determines binary ``name``: versions, wrapper module, flags."""
    wrapper_module, package = _BUILD_TARGETS[name]
    digest = hashlib.sha256()
    for part in (name, package, versions.binary_version(name), ldflags_for(name, versions), "-trimpath"):
        digest.update(part.encode() + b"\0")
    for file in ("go.mod", "go.sum"):
        path = wrappers / wrapper_module / file
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
    return digest.hexdigest()


def read_stamp(directory: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads((directory / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_stamp(directory: Path, stamp: Mapping[str, Mapping[str, str]]) -> None:
    tmp = directory / f".{STAMP_NAME}.tmp"
    tmp.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    tmp.replace(directory / STAMP_NAME)


def override_path(name: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """An envtest-style override for ``name``, if one is configured (and exists)."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_OVERRIDES[name])
    if explicit:
        path = Path(explicit).expanduser()
        if not _is_executable(path):
            raise BinaryError(f"{ENV_OVERRIDES[name]}={explicit} is not an executable file")
        return path
    assets = env.get("KUBEBUILDER_ASSETS")
    if assets:
        path = Path(assets).expanduser() / name
        if _is_executable(path):
            return path
    return None


def cached_path(name: str, versions: Versions, directory: Path, wrappers: Path) -> Path | None:
    """The cached binary if it exists and its stamp matches the current wrapper modules."""
    path = directory / name
    entry = read_stamp(directory).get(name, {})
    if _is_executable(path) and entry.get("fingerprint") == fingerprint(name, versions, wrappers):
        return path
    return None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


# ---------------------------------------------------------------------------------------------
# building


def _log(message: str) -> None:
    print(f"[nvcre.testing] {message}", file=sys.stderr, flush=True)


def go_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"  # never download a toolchain behind the user's back
    goflags = env.get("GOFLAGS", "")
    if "-p=" not in goflags:  # bound parallelism: the kube-apiserver link alone needs GBs of memory
        env["GOFLAGS"] = f"{goflags} -p={min(os.cpu_count() or 2, 4)}".strip()
    env.setdefault("CGO_ENABLED", "0")
    return env


def check_go() -> str:
    """Return ``go version`` output or raise a clear error if Go is missing or too old."""
    go = shutil.which("go")
    if go is None:
        raise BinaryError(
            "the Go toolchain ('go') is not on PATH; it is needed to build etcd, kube-apiserver and kwok "
            f"(install Go >= {GO_MIN_VERSION[0]}.{GO_MIN_VERSION[1]}), or point KUBEBUILDER_ASSETS / "
            "TEST_ASSET_ETCD / TEST_ASSET_KUBE_APISERVER / TEST_ASSET_KWOK at prebuilt binaries"
        )
    done = subprocess.run(
        [go, "env", "GOVERSION"], env=go_environment(), capture_output=True, text=True, check=False
    )
    version = done.stdout.strip()
    parsed = _parse_go_version(version)
    if done.returncode != 0 or parsed is None:
        raise BinaryError(f"'go env GOVERSION' failed: {done.stderr.strip() or version}")
    if parsed < GO_MIN_VERSION:
        raise BinaryError(
            f"{version} is too old to build the control plane; Go >= "
            f"{GO_MIN_VERSION[0]}.{GO_MIN_VERSION[1]} is required"
        )
    return version


def _parse_go_version(text: str) -> tuple[int, int] | None:
    digits = text.removeprefix("go").split(".")
    try:
        return int(digits[0]), int(digits[1])
    except (IndexError, ValueError):
        return None


def _explain_go_failure(what: str, output: str) -> str:
    tail = "\n".join(output.strip().splitlines()[-25:])
    hints = []
    lowered = output.lower()
    unreachable = ("dial tcp", "no such host", "proxyconnect", "i/o timeout", "refused", "lookup disabled")
    if any(s in lowered for s in unreachable):
        proxy = os.environ.get("GOPROXY", "https://proxy.golang.org,direct")
        hints.append(
            f"the Go module proxy is unreachable (GOPROXY={proxy}); the first build must download "
            "modules from it. Use KUBEBUILDER_ASSETS / TEST_ASSET_* to supply binaries offline."
        )
    if "missing go.sum entry" in lowered or "updates to go.mod needed" in lowered:
        hints.append("the wrapper modules are out of date: run hack/controlplane/update.py")
    hint = ("\nhint: " + "\nhint: ".join(hints)) if hints else ""
    return f"{what} failed:\n{tail}{hint}"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Serialise builds into one directory across processes."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_binary(name: str, versions: Versions, directory: Path, wrappers: Path) -> Path:
    """``go build`` one binary into ``directory`` (atomically) and record it in the stamp."""
    wrapper_module, package = _BUILD_TARGETS[name]
    target = directory / name
    tmp = directory / f".{name}.tmp"
    cmd = [
        "go",
        "build",
        "-trimpath",
        "-buildvcs=false",
        "-ldflags",
        ldflags_for(name, versions),
        "-o",
        str(tmp),
        package,
    ]
    _log(
        f"building {name} {versions.binary_version(name)} from {package} "
        f"(a cold build takes {COLD_BUILD_HINT[name]} on 2 cores; later builds reuse the Go build cache)"
    )
    started = time.monotonic()
    returncode, output = _run_with_heartbeat(cmd, wrappers / wrapper_module, f"building {name}")
    if returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BinaryError(_explain_go_failure(f"go build {package}", output))
    tmp.replace(target)
    elapsed = time.monotonic() - started
    stamp = read_stamp(directory)
    stamp[name] = {
        "fingerprint": fingerprint(name, versions, wrappers),
        "version": versions.binary_version(name),
        "package": package,
        "built_seconds": f"{elapsed:.0f}",
    }
    _write_stamp(directory, stamp)
    _log(f"built {target} in {elapsed:.0f}s")
    return target


def _run_with_heartbeat(cmd: list[str], cwd: Path, what: str, every: float = 60.0) -> tuple[int, str]:
    """Run ``cmd`` capturing its output, logging "still <what>" every ``every`` seconds."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(
            cmd, cwd=cwd, env=go_environment(), stdout=output, stderr=subprocess.STDOUT
        )
        while True:
            try:
                returncode = process.wait(timeout=every)
                break
            except subprocess.TimeoutExpired:
                _log(f"still {what} ({time.monotonic() - started:.0f}s)")
            except BaseException:
                process.kill()
                process.wait()
                raise
        output.seek(0)
        return returncode, output.read()


def module_dir(module: str, version: str) -> Path:
    """Download ``module@version`` into the Go module cache (if needed) and return its directory."""
    cached = _module_cache_dir(module, version)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory() as scratch:  # outside any module: no go.mod is touched
        env = go_environment()
        env["GOFLAGS"] = ""
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise BinaryError(
            _explain_go_failure(f"go mod download {module}@{version}", done.stdout + done.stderr)
        )
    return Path(json.loads(done.stdout)["Dir"])


def _module_cache_dir(module: str, version: str) -> Path | None:
    gomodcache = os.environ.get("GOMODCACHE") or str(
        Path(os.environ.get("GOPATH", str(Path.home() / "go")).split(os.pathsep)[0]) / "pkg" / "mod"
    )
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)
    path = Path(gomodcache) / f"{escaped}@{version}"
    return path if path.is_dir() else None


@dataclass(frozen=True)
class _ModuleFiles:
    """Files copied out of a Go module into ``<cache>/crds/<directory>``."""

    directory: str
    module: str
    version: str
    subdir: str
    names: tuple[str, ...] | None  # None: every *.yaml in subdir but kustomization.yaml
    tree: bool = False  # copy the whole directory tree (a kustomization with its patches)


def _module_files(versions: Versions) -> tuple[_ModuleFiles, ...]:
    """Trainer CRDs, kwok CRDs, JobSet CRDs, then the JobSet and Trainer webhook kustomizations."""
    return (
        _ModuleFiles(f"trainer-{versions.trainer}", TRAINER_MODULE, versions.trainer, TRAINER_CRD_PATH, None),
        _ModuleFiles(f"kwok-{versions.kwok}", KWOK_MODULE, versions.kwok, KWOK_CRD_PATH, KWOK_CRDS),
        _ModuleFiles(f"jobset-{versions.jobset}", JOBSET_MODULE, versions.jobset, JOBSET_CRD_PATH, None),
        _ModuleFiles(
            f"jobset-webhooks-{versions.jobset}", JOBSET_MODULE, versions.jobset, JOBSET_WEBHOOKS, None, True
        ),
        _ModuleFiles(
            f"trainer-webhooks-{versions.trainer}",
            TRAINER_MODULE,
            versions.trainer,
            TRAINER_WEBHOOKS,
            None,
            True,
        ),
    )


def ensure_crds(versions: Versions, directory: Path) -> tuple[Path, ...]:
    """Copy the CRDs and webhook manifests out of their Go modules into the cache.

    Returns the directories in the order of :func:`_module_files`.
    """
    found = []
    for spec in _module_files(versions):
        dest = directory / "crds" / spec.directory
        found.append(dest)
        if (dest / ".complete").exists():
            continue
        _log(f"fetching manifests from {spec.module}@{spec.version}/{spec.subdir}")
        source = module_dir(spec.module, spec.version) / spec.subdir
        if spec.tree:
            shutil.copytree(source, dest, dirs_exist_ok=True)
            for copied in dest.rglob("*"):  # the module cache is read-only; the copy must not be
                copied.chmod(0o755 if copied.is_dir() else 0o644)
            (dest / ".complete").write_text(spec.version + "\n")
            continue
        names = spec.names
        files = sorted(source.glob("*.yaml")) if names is None else [source / n for n in names]
        files = [f for f in files if f.name != "kustomization.yaml"]
        if not files:
            raise BinaryError(f"no manifests found in {spec.module}@{spec.version}/{spec.subdir}")
        dest.mkdir(parents=True, exist_ok=True)
        for file in files:
            shutil.copyfile(file, dest / file.name)
        (dest / ".complete").write_text(spec.version + "\n")
    return tuple(found)


def build(names: Iterable[str] = REQUIRED, *, force: bool = False) -> Binaries:
    """Build (or reuse) the binaries ``names`` and fetch the CRDs; return every location."""
    return ensure(names, build_missing=True, force=force)


def ensure(names: Iterable[str] = REQUIRED, *, build_missing: bool = True, force: bool = False) -> Binaries:
    """Resolve every binary in ``names`` (overrides, then cache), building what is missing.

    Binaries not asked for are still reported when an override or the cache has them.
    """
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in ALL]
    if unknown:
        raise BinaryError(f"unknown binaries {unknown}; known: {list(ALL)}")
    versions = load_versions()
    wrappers = wrapper_dir()
    directory = cache_dir(versions)

    def resolve(name: str) -> Path | None:
        if force and name in wanted:
            return None
        return override_path(name) or cached_path(name, versions, directory, wrappers)

    found = {name: path for name in ALL if (path := resolve(name)) is not None}
    missing = [n for n in wanted if n not in found]
    crd_dirs = tuple(directory / "crds" / spec.directory for spec in _module_files(versions))
    if missing or not all((d / ".complete").exists() for d in crd_dirs):
        if missing and not build_missing:
            raise BinaryError(
                f"missing control-plane binaries {missing} in {directory}; build them with "
                "'python -m nvcre.testing build' (or hack/controlplane/build.sh), or set KUBEBUILDER_ASSETS"
            )
        with _locked(directory):
            for name in missing:
                # another process may have built it while this one waited for the lock
                path = None if force else cached_path(name, versions, directory, wrappers)
                if path is None:
                    check_go()
                    path = build_binary(name, versions, directory, wrappers)
                found[name] = path
            crd_dirs = ensure_crds(versions, directory)
    trainer, kwok, jobset, jobset_webhooks, trainer_webhooks = crd_dirs
    return Binaries(
        paths=found,
        trainer_crds=trainer,
        kwok_crds=kwok,
        jobset_crds=jobset,
        jobset_webhooks=jobset_webhooks,
        trainer_webhooks=trainer_webhooks,
        versions=versions,
    )
