"""The local Kubernetes control plane used by nvcre's tests and sandbox.

A REAL etcd and kube-apiserver (built from source with ``go build``, see
:mod:`nvcre.testing.binaries`) run on loopback ports with generated certificates; the CRDs under
``config/crd`` and the Kubeflow Trainer CRDs are installed; optionally kwok simulates GPU nodes
and pod lifecycles. Nothing here mocks the API server for the integration tests; unit tests of
reconcile paths use :mod:`~nvcre.testing.fakeclient`, a client stand-in that can fail any call.

* :class:`~nvcre.testing.controlplane.ControlPlane` — etcd + kube-apiserver, kubeconfig, CRDs,
  lightkube clients (``cp.client()`` / ``cp.async_client()``).
* :class:`~nvcre.testing.kwok.Kwok` — fake nodes become Ready, pods on them Running; annotation
  ``nvcre.test/phase: Succeeded|Failed`` ends a pod; ``write_pod_logs`` feeds ``kubectl logs``.
* :mod:`~nvcre.testing.nodes` — fake GPU nodes (labels, providerIDs, GPU/NIC resources).
* :mod:`~nvcre.testing.builders` — chained builders of what tests seed: nvcre's CRs, Trainer
  runtimes and overlays, GPU nodes (``WorkloadRun("x").nodes(4).obj()``).
* :func:`~nvcre.testing.waiting.wait_for` — polling with a message naming what was awaited.
* ``python -m nvcre.testing build`` builds the binaries; ``python -m nvcre.testing up`` runs a
  control plane in the foreground. See ``docs/testing.md``.

Submodules are imported lazily so that ``binaries`` (standard library only) can build the
binaries before any third-party dependency is installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nvcre.testing.controlplane import ControlPlane
    from nvcre.testing.kwok import Kwok
    from nvcre.testing.waiting import WaitTimeout, wait_for

_EXPORTS = {
    "ControlPlane": "nvcre.testing.controlplane",
    "Kwok": "nvcre.testing.kwok",
    "WaitTimeout": "nvcre.testing.waiting",
    "wait_for": "nvcre.testing.waiting",
}

__all__ = ["ControlPlane", "Kwok", "WaitTimeout", "wait_for"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'nvcre.testing' has no attribute {name!r}")
