#!/usr/bin/env bash
# Build (or reuse) the test control-plane binaries: etcd, kube-apiserver, kwok, toxiproxy-server
# (the reliability suite's proxy) and kubectl (--no-kubectl skips it), and fetch the Kubeflow
# Trainer / kwok CRDs. Same as `python -m nvcre.testing build`.
# Binaries go to ${NVCRE_BIN_DIR:-~/.cache/nvcre/bin/<versions>}; a warm run takes well under a
# second. Set KUBEBUILDER_ASSETS or TEST_ASSET_{ETCD,KUBE_APISERVER,KWOK,TOXIPROXY_SERVER} to use
# prebuilt ones.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
# nvcre.testing.binaries needs only the standard library, so this works before the venv exists.
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m nvcre.testing build "$@"
