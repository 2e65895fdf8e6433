#!/usr/bin/env bash
# Build (or reuse) the test control-plane binaries: etcd, kube-apiserver, kwok, toxiproxy-server
# (the reliability suite's proxy), kubectl (--no-kubectl skips it) and the workload chain: kube-scheduler, kube-controller-manager, the
# JobSet controller and Trainer's controller manager (--no-chain skips them); fetch the Trainer,
# kwok and JobSet CRDs and webhook manifests. Same as `python -m nvcre.testing build`.
# Binaries go to ${NVCRE_BIN_DIR:-~/.cache/nvcre/bin/<versions>}; a warm run takes well under a
# second. Set KUBEBUILDER_ASSETS or TEST_ASSET_<NAME> (TEST_ASSET_KUBE_APISERVER ...) to use
# prebuilt ones.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
# nvcre.testing.binaries needs only the standard library, so this works before the venv exists.
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m nvcre.testing build "$@"
