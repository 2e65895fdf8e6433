#!/usr/bin/env bash
# The whole test suite, as CI runs it: install into .venv, check generated files, lint, type-check,
# check the import layers, run every test. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'

echo "== generated CRDs are up to date"
.venv/bin/python -m nvcre.crd --check
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== import layers"
.venv/bin/lint-imports
echo "== pytest"
set +e
.venv/bin/pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
