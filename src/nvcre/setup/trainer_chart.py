"""``python -m nvcre.setup.trainer_chart [--check]``: vendor Kubeflow Trainer's Helm chart into nvcre.

``nvcrectl setup init`` installs Trainer from this copy, so it needs no registry (air-gapped
clusters). The chart is taken from the ``github.com/kubeflow/trainer/v2`` Go module at
``TRAINER_VERSION`` (``hack/controlplane/versions.env``), ``charts/kubeflow-trainer``; its JobSet
subchart from ``sigs.k8s.io/jobset`` at ``JOBSET_VERSION`` (``charts/jobset``), placed in
``charts/`` where ``helm`` looks for dependencies. Two changes to upstream, both required to
install offline: the ``lws`` dependency (only for ``dataCache.enabled``, which nvcre never sets) is
dropped from ``Chart.yaml``, and the chart's tests, READMEs and ``.helmignore`` are left out.
``--check`` fails when the copy differs from what the modules give (CI runs it).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from nvcre import yamlio
from nvcre.testing import binaries

DESTINATION = Path(__file__).parent / "charts" / "kubeflow-trainer"
COMMAND = "python -m nvcre.setup.trainer_chart"
LEFT_OUT = ("tests", "README.md", "README.md.gotmpl", ".helmignore")
DROPPED_DEPENDENCIES = ("lws",)


def _copy(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, ignore=lambda _d, names: [n for n in names if n in LEFT_OUT])
    for copied in dest.rglob("*"):  # the module cache is read-only; the copy must not be
        copied.chmod(0o755 if copied.is_dir() else 0o644)


def build(dest: Path) -> None:
    """Write the vendored chart to ``dest`` (which must not exist)."""
    versions = binaries.load_versions()
    trainer = binaries.module_dir(binaries.TRAINER_MODULE, versions.trainer) / "charts" / "kubeflow-trainer"
    jobset = binaries.module_dir(binaries.JOBSET_MODULE, versions.jobset) / "charts" / "jobset"
    _copy(trainer, dest)
    chart_file = dest / "Chart.yaml"
    chart = yamlio.load(chart_file.read_text())
    kept = [d for d in chart.get("dependencies", []) if d["name"] not in DROPPED_DEPENDENCIES]
    (jobset_dep,) = [d for d in kept if d["name"] == "jobset"]
    if f"v{jobset_dep['version']}" != versions.jobset:
        raise SystemExit(
            f"Trainer {versions.trainer} wants JobSet {jobset_dep['version']}, versions.env pins {versions.jobset}"
        )
    chart["dependencies"] = kept
    header = f"# Vendored by `{COMMAND}` from {binaries.TRAINER_MODULE}@{versions.trainer}; lws dependency dropped.\n"
    chart_file.write_text(header + yaml.safe_dump(chart, sort_keys=False))
    _copy(jobset, dest / "charts" / "jobset")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail when the vendored chart is not up to date")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / "kubeflow-trainer"
        build(fresh)
        wanted, present = _files(fresh), _files(DESTINATION) if DESTINATION.exists() else {}
        stale = sorted(n for n in wanted.keys() | present.keys() if wanted.get(n) != present.get(n))
        if args.check:
            for name in stale:
                print(f"{DESTINATION / name}: out of date; run `{COMMAND}`", file=sys.stderr)
            return 1 if stale else 0
        if stale:
            shutil.rmtree(DESTINATION, ignore_errors=True)
            shutil.copytree(fresh, DESTINATION)
        print(f"Trainer chart in {DESTINATION}: {len(stale)} files changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
