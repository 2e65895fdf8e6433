#!/usr/bin/env bash
# The project's whole check, exactly what CI runs (.ci/run calls this):
#   1. a virtual environment in .venv with `pip install -e '.[dev]'` (skipped while pyproject.toml
#      is unchanged since the last install);
#   2. the test control plane's binaries (built once with Go, then reused from the cache),
#      including the workload chain (kube-scheduler, kube-controller-manager, JobSet, Trainer)
#      that tests/sandbox runs; NVCRE_CHAIN=0 skips both the chain's build and tests/sandbox;
#   3. the generated CRDs, RBAC and LogProfiles are current, charts/nvcre and config/ agree (helm
#      template), helm lint passes, the vendored Trainer chart is current; ruff, mypy, import-linter and pytest over tests/
#      (tests/sandbox in a pytest of its own on two workers, beside the rest: it mostly waits on
#      simulated workloads);
#   4. each unit and golden test file run alone, each integration test file collected alone
#      (skipped when arguments are given).
# Any failure exits non-zero; pytest collecting no tests (exit 5) is a failure too.
# Extra arguments are passed to pytest, e.g. `hack/test.sh -k controlplane`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

python="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  step "creating .venv"
  "$python" -m venv .venv
fi
stamp=.venv/.nvcre-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]]; then
  step "pip install -e '.[dev]'"
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  echo "$want" >"$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"

build_args=()
pytest_args=()
if [[ "${NVCRE_CHAIN:-1}" == 0 ]]; then
  build_args+=(--no-chain)
  pytest_args+=(--ignore=tests/sandbox)
fi

step "control-plane binaries (hack/controlplane/build.sh ${build_args[*]})"
hack/controlplane/build.sh "${build_args[@]}" >/dev/null

step "generated CRDs are up to date (python -m nvcre.crd --check)"
python -m nvcre.crd --check

step "generated RBAC is up to date (python -m nvcre.manager.rbac --check)"
python -m nvcre.manager.rbac --check

step "generated LogProfiles are up to date (python -m nvcre.measure.builtin --check)"
python -m nvcre.measure.builtin --check

helm_bin="$(python -c 'from nvcre.testing import binaries as b; print(b.ensure([b.HELM]).path(b.HELM))')"
step "charts/nvcre and config/ are one source (python -m nvcre.setup.chart --check); helm lint; helm template"
python -m nvcre.setup.chart --check --helm "$helm_bin"
"$helm_bin" lint --strict charts/nvcre src/nvcre/setup/charts/kubeflow-trainer
"$helm_bin" template nvcre charts/nvcre --namespace nvcre --include-crds \
  --set metrics.serviceMonitor.enabled=true --set namespace.create=true >/dev/null

step "the vendored Kubeflow Trainer chart is current (python -m nvcre.setup.trainer_chart --check)"
python -m nvcre.setup.trainer_chart --check

step "ruff check . && ruff format --check ."
ruff check .
ruff format --check .

step "mypy"
mypy

step "lint-imports"
lint-imports

# pytest's status, with "collected no tests" (5) counted as a failure.
run_pytest() {
  local status=0
  pytest "$@" || status=$?
  if [[ $status -eq 5 ]]; then
    echo "pytest collected no tests: treating as failure" >&2
    return 1
  fi
  return $status
}

if [[ $# -gt 0 || "${NVCRE_CHAIN:-1}" == 0 ]]; then
  step "pytest tests ${pytest_args[*]} $*"
  status=0
  run_pytest tests "${pytest_args[@]}" "$@" || status=$?
  if [[ $status -ne 0 || $# -gt 0 ]]; then
    exit $status
  fi
  sandbox_pid=""
else
  # tests/sandbox spends most of its time waiting for simulated workloads, not on the CPU: it runs
  # beside the rest, in a pytest of its own (its output follows theirs) whose two workers take
  # a file at a time (each file's cluster is its own; files on one worker share a full_cluster).
  sandbox_dir="$(mktemp -d)"
  step "pytest tests/sandbox on two workers, beside the rest (its output comes at the end)"
  run_pytest tests/sandbox -n 2 --dist loadfile -p no:cacheprovider --basetemp="$sandbox_dir/tmp" \
    >"$sandbox_dir/log" 2>&1 &
  sandbox_pid=$!
  trap 'kill "$sandbox_pid" 2>/dev/null || true' EXIT  # a failing step below ends it too
  step "pytest tests --ignore=tests/sandbox"
  status=0
  run_pytest tests --ignore=tests/sandbox || status=$?
  if [[ $status -ne 0 ]]; then
    wait "$sandbox_pid" || true
    cat "$sandbox_dir/log"
    exit $status
  fi
fi

# Each test file on its own, so that none depends on what another file imported or did first.
# Unit and golden files run alone (each costs an interpreter and nvcre's imports, ~2.5 s of CPU);
# integration files are collected alone (a run alone would start a control plane per file).
alone() {
  local out
  if ! out="$(pytest -q -p no:cacheprovider "$@" 2>&1)"; then
    printf '%s\nFAILED alone: pytest %s\n' "$out" "$*" >&2
    return 1
  fi
}
export -f alone
step "each unit and golden test file alone"
find tests/unit tests/golden -name 'test_*.py' | sort | xargs -P2 -I{} bash -c 'alone "$1"' _ {}
step "each integration test file collected alone"
find tests/integration -name 'test_*.py' | sort | xargs -P2 -I{} bash -c 'alone --collect-only "$1"' _ {}

if [[ -n "$sandbox_pid" ]]; then
  step "pytest tests/sandbox (started beside the rest)"
  status=0
  wait "$sandbox_pid" || status=$?
  cat "$sandbox_dir/log"
  exit $status
fi
