"""GKE's TCPXO installer pods, read live before a GCP category renders (see ``nvcre.platform.gke``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Pod

from nvcre.platform.gke import INSTALLER_NAMESPACE, may_run_tcpxo

log = logging.getLogger(__name__)


async def installer_pods(
    client: AsyncClient, nodes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]] | None:
    """The Running pods of ``kube-system`` when some target node is on GCP (None otherwise: no
    TCPXO detection). A refused list reads as no pod, so the fallback renders with its warning."""
    if not may_run_tcpxo(nodes):
        return None
    try:
        pods = client.list(Pod, namespace=INSTALLER_NAMESPACE, fields={"status.phase": "Running"})
        return [pod.to_dict() async for pod in pods]
    except ApiError as error:
        log.warning("cannot list %s pods for the TCPXO plugin release (%s)", INSTALLER_NAMESPACE, error)
        return []
