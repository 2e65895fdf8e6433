"""GCP A3 Mega (H100) GPUDirect-TCPXO: the GKE networks of the GPU NICs and the TCPXO plugin release.

The TCPXO runtime patch attaches each pod to the node's eight GPU NIC networks through the
``networking.gke.io/interfaces`` annotation, and GKE admits the pod only when each name is a
``Network`` object. Whoever provisions the cluster names them (Google's samples ``vpc1``..``vpc8``,
other tools ``<prefix>-gpu-nic-0``..``7``), so they are read from the target nodes: GKE advertises
the extended resource ``networking.gke.io.networks/<network>`` on every node attached to one.
Detection never guesses: unless exactly eight networks are allocatable on every target node, the
default names render and a Warning ``GKENetworkDetection`` says what was found.

The TCPXO NCCL plugin comes from the node (GKE's ``nccl-tcpxo-installer`` DaemonSet) and loads
the CUDA runtime of the workload image, so the image's CUDA major must be the plugin's: releases
up to v1.0.16 are CUDA 12, v1.0.17 is CUDA 13. The release is the tag of the installer pods'
``nccl-plugin-gpudirecttcpx-dev`` image on the target nodes; anything but one known release on
every target node renders a safe row and a Warning ``TCPXOPluginDetection``.

Both run only for a GCP H100 target (:func:`is_tcpxo_target`): no other platform sees a detected
list or an event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre.api.v1alpha1.constants import EventReason
from nvcre.platform.detect import Platform, node_allocatable, node_name, node_platform
from nvcre.platform.events import Event, warning_if
from nvcre.platform.nic import parse_quantity

TCPXO_ARCHITECTURE: Final = "h100"
NICS_PER_NODE: Final = 8
"""GPU NIC networks of an a3-megagpu-8g node (eth1..eth8 in the pod)."""
DEFAULT_NETWORKS: Final = tuple(f"vpc{i}" for i in range(1, NICS_PER_NODE + 1))
"""Rendered when detection finds no eight networks (Google's A3 Mega samples' names)."""
NETWORK_RESOURCE_PREFIX: Final = "networking.gke.io.networks/"
_IP_SUFFIX: Final = ".IP"
_DEFAULT_NETWORK: Final = "default"
NORTH_INTERFACES_ANNOTATION: Final = "networking.gke.io/north-interfaces"
"""``[{"network": ..., "ipAddress": ...}]``: each additional network's IP on the node."""
NIC_INFO_ANNOTATION: Final = "networking.gke.io/nic-info"
"""``[{"birthIP": ..., "birthName": "eth1", ...}]``: each host NIC's IP and name."""

INSTALLER_NAMESPACE: Final = "kube-system"
PLUGIN_IMAGE_NAME: Final = "nccl-plugin-gpudirecttcpx-dev"
"""The last path segment of the plugin installer's image (a mirrored registry still matches)."""
PLUGIN_CUDA_MAJOR: Final[Mapping[tuple[int, int, int], int]] = {
    (1, 0, 15): 12,
    (1, 0, 16): 12,
    (1, 0, 17): 13,
}
"""The plugin releases whose CUDA major is known."""
FALLBACK_RELEASE: Final = (1, 0, 15)
"""Rendered when no single release is found: the oldest supported, CUDA 12."""
_RELEASE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.]+)?$")
_MESSAGE_NODES: Final = 5


def is_tcpxo_target(platform: str, architecture: str) -> bool:
    """The GCP H100 target the TCPXO override matches; detection runs for nothing else."""
    return platform == Platform.GCP and architecture == TCPXO_ARCHITECTURE


# --- networks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GKENetworks:
    """The networks the pod's eth1..eth8 attach to, and how they were chosen.

    ``detected`` are the names in interface order, empty when detection did not run or found no
    eight; ``shared`` the networks allocatable on every target node (sorted), which a refusal
    names; ``ran`` whether the target is GCP H100."""

    detected: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()
    host_ordered: bool = False
    ran: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """What renders: the detected names, else the defaults."""
        return self.detected or DEFAULT_NETWORKS

    @property
    def message(self) -> str:
        """The ``GKENetworkDetection`` text when detection ran and found no eight networks."""
        if not self.ran or self.detected:
            return ""
        fallback = (
            f"rendering the default networks {DEFAULT_NETWORKS[0]}..{DEFAULT_NETWORKS[-1]} instead; GKE "
            "rejects the pods unless Network objects with those names exist"
        )
        if not self.shared:
            found = f"found no {NETWORK_RESOURCE_PREFIX}* resource allocatable on every target node"
        else:
            found = (
                f"found {len(self.shared)} networks allocatable on every target node "
                f"({', '.join(self.shared)})"
            )
        return (
            f"GKE TCPXO network auto-detection {found}, but TCPXO needs exactly {NICS_PER_NODE} GPU NIC "
            f"networks per node (a3-megagpu-8g); {fallback}."
        )

    @property
    def events(self) -> tuple[Event, ...]:
        return warning_if(EventReason.GKE_NETWORK_DETECTION, self.message)


def _node_networks(node: Mapping[str, Any]) -> set[str]:
    found = set()
    for resource, quantity in node_allocatable(node).items():
        name = str(resource).removeprefix(NETWORK_RESOURCE_PREFIX)
        if name == str(resource) or name == _DEFAULT_NETWORK or name.endswith(_IP_SUFFIX):
            continue
        amount = parse_quantity(quantity)
        if amount is not None and amount > 0:
            found.add(name)
    return found


def _json_list(text: Any) -> list[Mapping[str, Any]]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return []
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def host_order(node: Mapping[str, Any], networks: Iterable[str]) -> tuple[str, ...] | None:
    """``networks`` in the order of the host NIC each sits on (eth1 first), joining the node's
    north-interfaces and nic-info annotations on IP; None when an annotation is missing or
    malformed, or a network is on no ``ethN`` of its own."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    eth_of_ip: dict[str, int] = {}
    for nic in _json_list(annotations.get(NIC_INFO_ANNOTATION)):
        match = re.fullmatch(r"eth(\d+)", str(nic.get("birthName") or ""))
        if match:
            eth_of_ip[str(nic.get("birthIP"))] = int(match.group(1))
    eth_of_network = {
        str(north.get("network")): eth_of_ip[str(north.get("ipAddress"))]
        for north in _json_list(annotations.get(NORTH_INTERFACES_ANNOTATION))
        if str(north.get("ipAddress")) in eth_of_ip
    }
    wanted = list(networks)
    if any(name not in eth_of_network for name in wanted):
        return None
    if len({eth_of_network[name] for name in wanted}) != len(wanted):
        return None
    return tuple(sorted(wanted, key=lambda name: eth_of_network[name]))


def detect_gke_networks(nodes: Sequence[Mapping[str, Any]]) -> GKENetworks:
    """The GPU NIC networks of the target ``nodes`` (see the module doc): exactly eight
    allocatable on every node, in the hosts' NIC order when every node agrees, else sorted."""
    if not nodes:
        return GKENetworks(ran=True)
    per_node = [_node_networks(node) for node in nodes]
    shared = tuple(sorted(set.intersection(*per_node)))
    if len(shared) != NICS_PER_NODE:
        return GKENetworks(shared=shared, ran=True)
    orders = {host_order(node, shared) for node in nodes}
    if len(orders) == 1 and None not in orders:
        (order,) = orders
        assert order is not None
        return GKENetworks(order, shared, host_ordered=True, ran=True)
    return GKENetworks(shared, shared, ran=True)


def resolve_gke_networks(platform: str, architecture: str, nodes: Sequence[Mapping[str, Any]]) -> GKENetworks:
    """Detection for a GCP H100 target; nothing (the defaults, no event) for any other."""
    if not is_tcpxo_target(platform, architecture):
        return GKENetworks()
    return detect_gke_networks(nodes)


# --- plugin release ------------------------------------------------------------------------------


def plugin_release(image: str) -> str | None:
    """The tag of a ``.../nccl-plugin-gpudirecttcpx-dev:<tag>[@sha256:...]`` image; None for any
    other image or an untagged one."""
    reference = image.split("@", 1)[0]
    path, _, tag = reference.rpartition(":")
    if not path or "/" in tag:
        return None
    return tag if path.rsplit("/", 1)[-1] == PLUGIN_IMAGE_NAME else None


def parse_release(tag: str) -> tuple[int, int, int] | None:
    """``v1.0.17`` and the rebuild ``v1.0.17-1`` both give (1, 0, 17); None for a non-release tag."""
    match = _RELEASE.match(tag)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def _text(release: tuple[int, int, int]) -> str:
    return "v" + ".".join(map(str, release))


@dataclass(frozen=True)
class TCPXOPlugin:
    """The plugin release the target runs and the CUDA major its images need.

    ``found`` is what the nodes run (node -> tag, only nodes with a Running installer);
    ``rendered`` the release whose row renders; ``exact`` whether every target node runs that
    mapped release (a build suffix aside)."""

    rendered: tuple[int, int, int] = FALLBACK_RELEASE
    exact: bool = False
    ran: bool = False
    found: Mapping[str, str] | None = None
    missing: tuple[str, ...] = ()

    @property
    def cuda_major(self) -> int:
        return PLUGIN_CUDA_MAJOR[self.rendered]

    @property
    def message(self) -> str:
        """The ``TCPXOPluginDetection`` text when detection ran and found no one mapped release."""
        if not self.ran or self.exact:
            return ""
        found = dict(self.found or {})
        tags = sorted(set(found.values()))
        if not found:
            what = f"found no Running {PLUGIN_IMAGE_NAME} installer pod in {INSTALLER_NAMESPACE} on the target nodes"
        elif self.missing:
            shown = ", ".join(self.missing[:_MESSAGE_NODES])
            more = (
                f" and {len(self.missing) - _MESSAGE_NODES} more"
                if len(self.missing) > _MESSAGE_NODES
                else ""
            )
            what = f"found no Running installer on {len(self.missing)} target node(s) ({shown}{more})"
        elif len({parse_release(tag) for tag in tags}) > 1:
            what = f"found the target nodes on different releases ({', '.join(tags)})"
        elif parse_release(tags[0]) is None:
            what = f"found the tag {tags[0]}, which names no release"
        else:
            what = f"found release {tags[0]}, which has no image row of its own"
        cuda = PLUGIN_CUDA_MAJOR[self.rendered]
        return (
            f"TCPXO plugin version detection {what}; rendering the {_text(self.rendered)} images "
            f"(CUDA {cuda}). Set the category's options.image if the cluster's plugin needs another "
            "CUDA major."
        )

    @property
    def events(self) -> tuple[Event, ...]:
        return warning_if(EventReason.TCPXO_PLUGIN_DETECTION, self.message)


def _running(pod: Mapping[str, Any]) -> bool:
    metadata = pod.get("metadata") or {}
    return (pod.get("status") or {}).get("phase") == "Running" and not metadata.get("deletionTimestamp")


def _pod_release(pod: Mapping[str, Any]) -> str | None:
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        tag = plugin_release(str(container.get("image") or ""))
        if tag is not None:
            return tag
    return None


def detect_tcpxo_plugin(
    nodes: Sequence[Mapping[str, Any]], installer_pods: Iterable[Mapping[str, Any]]
) -> TCPXOPlugin:
    """The release every target node's Running installer pod names (``kube-system`` pods).

    One mapped release on every node (a build suffix aside) is exact; a newer release renders the
    newest mapped row (a newer plugin keeps the newest CUDA major), anything else the fallback."""
    targets = {node_name(node) for node in nodes}
    found: dict[str, str] = {}
    for pod in installer_pods:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        tag = _pod_release(pod) if node in targets and _running(pod) else None
        if tag is not None:
            found.setdefault(node, tag)
    missing = tuple(sorted(targets - set(found)))
    releases = {parse_release(tag) for tag in found.values()}
    fallback = TCPXOPlugin(ran=True, found=found, missing=missing)
    if not found or missing or len(releases) != 1 or None in releases:
        return fallback
    (release,) = releases
    assert release is not None
    if release in PLUGIN_CUDA_MAJOR:
        return TCPXOPlugin(release, exact=True, ran=True, found=found)
    newest = max(PLUGIN_CUDA_MAJOR)
    return TCPXOPlugin(newest if release > newest else FALLBACK_RELEASE, ran=True, found=found)


def resolve_tcpxo_plugin(
    platform: str,
    architecture: str,
    nodes: Sequence[Mapping[str, Any]],
    installer_pods: Iterable[Mapping[str, Any]] | None,
) -> TCPXOPlugin:
    """Detection for a GCP H100 target whose installer pods were read; the fallback row and no
    event otherwise (``installer_pods`` None: an offline render, nothing to read)."""
    if installer_pods is None or not is_tcpxo_target(platform, architecture):
        return TCPXOPlugin()
    return detect_tcpxo_plugin(nodes, installer_pods)


def may_run_tcpxo(nodes: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the installer pods are worth reading before a render: some node is on GCP."""
    return any(node_platform(node) == Platform.GCP for node in nodes)
