"""kwok against a :class:`~nvcre.testing.controlplane.ControlPlane`: fake nodes and pod lifecycles.

kwok manages only nodes annotated ``kwok.x-k8s.io/node=fake`` (see :mod:`nvcre.testing.nodes`)
and the pods bound to them (``spec.nodeName``; there is no scheduler). Our stage files
(``kwok_stages/*.yaml``) make such nodes Ready and such pods Running; a test drives a pod to an end
state with an annotation:

* ``nvcre.test/phase: Succeeded`` — containers terminate with exit code 0;
* ``nvcre.test/phase: Failed`` — exit code ``nvcre.test/exit-code`` (default 1), reason
  ``nvcre.test/reason`` (default ``Error``);
* ``nvcre.test/phase: Pending`` (set at creation) — the pod is left Pending.

kwok also serves the kubelet API on a loopback port, so ``kubectl logs`` works for pods whose
log files were registered with :meth:`Kwok.write_pod_logs` (CRI log format, kwok ``Logs`` object).
"""

from __future__ import annotations

import datetime
import math
import ssl
import tempfile
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import yaml
from lightkube import Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta

from nvcre import yamlio
from nvcre.testing import binaries as bins
from nvcre.testing.controlplane import FIELD_MANAGER, ControlPlane
from nvcre.testing.processes import Process, RunsAsProcess, Service, free_port, http_ok, wait_until

NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_ANNOTATION_VALUE = "fake"
PHASE_ANNOTATION = "nvcre.test/phase"
EXIT_CODE_ANNOTATION = "nvcre.test/exit-code"
REASON_ANNOTATION = "nvcre.test/reason"
POD_CIDR = "10.244.0.0/16"

#: The kubelet's node lease, renewed every quarter of it; kwok does the same for every node.
KUBELET_LEASE_SECONDS = 40
#: How often the ``nvcre-node-heartbeat`` stage rewrites a Ready node's conditions (its shipped
#: delay; the jitter stretches each wait by up to a quarter more).
STATUS_HEARTBEAT_SECONDS = 20
HEARTBEAT_STAGE = "nvcre-node-heartbeat"
#: The most writes a second each of kwok's two heartbeats is asked for: at 4,096 nodes the
#: kubelet's lease and the stage's delay mean ~590 node writes a second (and as many watch events
#: to every node informer), which a 2-core control plane does not keep up with: the leases lapse
#: and the node lifecycle controller marks those nodes ``Ready=Unknown``.
HEARTBEATS_PER_SECOND = 20


def node_lease_seconds(nodes: int) -> int:
    """How long kwok's node leases last for a fleet of ``nodes``: the kubelet's 40 s, longer where
    renewing each lease every quarter of it would exceed :data:`HEARTBEATS_PER_SECOND`."""
    return max(KUBELET_LEASE_SECONDS, math.ceil(4 * nodes / HEARTBEATS_PER_SECOND))


def node_status_heartbeat_seconds(nodes: int) -> int:
    """The ``nvcre-node-heartbeat`` stage's delay for such a fleet: its own 20 s, longer where
    that would exceed :data:`HEARTBEATS_PER_SECOND`."""
    return max(STATUS_HEARTBEAT_SECONDS, math.ceil(nodes / HEARTBEATS_PER_SECOND))


def node_monitor_grace_seconds(nodes: int) -> int:
    """kube-controller-manager's ``--node-monitor-grace-period`` for such a fleet: its default
    (50 s) at the kubelet's lease, as much longer as the lease is."""
    return node_lease_seconds(nodes) + 10


#: kwok's per-pod log configuration (namespaced, same name as the pod).
KwokLogs = create_namespaced_resource("kwok.x-k8s.io", "v1alpha1", "Logs", "logs")


def stage_documents(nodes: int = 0) -> str:
    """All stage YAML shipped in ``nvcre.testing.kwok_stages``, as one multi-document string, the
    heartbeat paced for a fleet of ``nodes`` (:func:`node_status_heartbeat_seconds`)."""
    folder = resources.files("nvcre.testing").joinpath("kwok_stages")
    docs = [
        _paced(entry.read_text(), nodes)
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yaml")
    ]
    return "\n---\n".join(docs)


def _paced(stage: str, nodes: int) -> str:
    seconds = node_status_heartbeat_seconds(nodes)
    if seconds == STATUS_HEARTBEAT_SECONDS:
        return stage  # the shipped delay
    doc = yamlio.load(stage)
    if doc["metadata"]["name"] != HEARTBEAT_STAGE:
        return stage
    doc["spec"]["delay"] = {
        "durationMilliseconds": seconds * 1000,
        "jitterDurationMilliseconds": seconds * 1250,
    }
    return str(yaml.safe_dump(doc, sort_keys=False))


def after_last_entry(cri_text: str, *, step_ms: int = 1) -> datetime.datetime:
    """When an entry appended to ``cri_text`` is written: now, or just after its last entry's time
    if that is later (:func:`cri_log_lines` dates a batch's lines ``step_ms`` apart from its
    start, so a batch can end in the future). A container's log never goes back in time, and a
    reader that resumes after the last time it read relies on that."""
    now = datetime.datetime.now(datetime.UTC)
    for line in reversed(cri_text.splitlines()):
        stamp = line.split(" ", 1)[0]
        try:  # RFC 3339 with nanoseconds: keep the microseconds datetime can hold
            last = datetime.datetime.fromisoformat(stamp[:26] + "+00:00")
        except ValueError:
            continue
        return max(now, last + datetime.timedelta(milliseconds=step_ms))
    return now


def cri_log_lines(
    lines: Iterable[str], *, stream: str = "stdout", start: datetime.datetime | None = None, step_ms: int = 1
) -> str:
    """Format ``lines`` as CRI container log entries: ``<RFC3339Nano> <stream> F <line>``."""
    when = start or datetime.datetime.now(datetime.UTC)
    out = []
    for index, line in enumerate(lines):
        stamp = (when + datetime.timedelta(milliseconds=index * step_ms)).astimezone(datetime.UTC)
        out.append(f"{stamp.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {stream} F {line}\n")
    return "".join(out)


class Kwok(RunsAsProcess, Service):
    """A kwok process bound to one control plane. Use as a context manager or start()/stop()."""

    def __init__(
        self,
        control_plane: ControlPlane,
        *,
        workdir: Path | None = None,
        extra_args: Iterable[str] = (),
        start_timeout: float = 60.0,
        nodes: int = 0,
    ) -> None:
        """``nodes``: how many nodes the fleet will have (both heartbeats slow down at scale)."""
        self.control_plane = control_plane
        self.nodes = nodes
        self._requested_workdir = workdir
        self.workdir: Path | None = None
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self.process: Process | None = None
        self.port = 0

    @property
    def logs_dir(self) -> Path:
        assert self.workdir is not None, "kwok is not started"
        return self.workdir / "logs"

    def _start(self) -> None:
        cp = self.control_plane
        assert cp.certs is not None, "start the control plane first"
        base = self._requested_workdir or cp.workdir or Path(tempfile.mkdtemp(prefix="nvcre-kwok-"))
        self.workdir = base / "kwok" if base == cp.workdir else base
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "stages.yaml"
        config.write_text(stage_documents(self.nodes))
        self.port = free_port()
        self.process = Process(
            "kwok",
            [
                str(cp.binaries.path(bins.KWOK)),
                f"--config={config}",
                f"--kubeconfig={cp.kubeconfig_path}",
                f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}={NODE_ANNOTATION_VALUE}",
                "--manage-all-nodes=false",
                "--node-ip=127.0.0.1",
                f"--node-port={self.port}",
                f"--server-address=127.0.0.1:{self.port}",
                f"--tls-cert-file={cp.certs.serving_cert}",
                f"--tls-private-key-file={cp.certs.serving_key}",
                f"--cidr={POD_CIDR}",
                "--enable-crds=Logs,ClusterLogs",
                f"--node-lease-duration-seconds={node_lease_seconds(self.nodes)}",
                *self.extra_args,
            ],
            self.workdir / "kwok.log",
        ).start()
        context = ssl.create_default_context(cafile=str(cp.certs.ca_cert))
        url = f"https://127.0.0.1:{self.port}/healthz"
        wait_until(
            lambda: http_ok(url, context),
            timeout=self.start_timeout,
            what=f"kwok {url}",
            process=self.process,
        )

    def write_pod_logs(
        self,
        client: Client,
        namespace: str,
        pod: str,
        lines: Iterable[str],
        *,
        container: str = "node",
        stream: str = "stdout",
        append: bool = False,
    ) -> Path:
        """Write ``lines`` as the logs of ``pod``/``container`` in this kwok's log directory and point
        kwok at them (``append``: after what is there, dated after its last entry).

        After kwok has seen the ``Logs`` object (a moment later), ``kubectl logs`` and the pod
        ``log`` subresource return the lines (without the CRI prefix).
        """
        path = _log_path(self.logs_dir, namespace, pod, container)
        start = after_last_entry(path.read_text()) if append and path.exists() else None
        text = cri_log_lines(lines, stream=stream, start=start)
        return register_pod_log(
            client, self.logs_dir, namespace, pod, text, container=container, append=append
        )


def _log_path(logs_dir: Path, namespace: str, pod: str, container: str) -> Path:
    return logs_dir / f"{namespace}_{pod}_{container}.log"


def register_pod_log(
    client: Client,
    logs_dir: Path,
    namespace: str,
    pod: str,
    cri_text: str,
    *,
    container: str = "node",
    append: bool = False,
) -> Path:
    """Write ``cri_text`` (CRI log lines) as ``pod``/``container``'s log file and apply the kwok
    ``Logs`` object naming every log file of the pod."""
    path = _log_path(logs_dir, namespace, pod, container)
    with open(path, "a" if append else "w") as out:
        out.write(cri_text)
    prefix = f"{namespace}_{pod}_"
    entries = [
        {"containers": [p.name[len(prefix) : -len(".log")]], "logsFile": str(p), "follow": False}
        for p in sorted(logs_dir.glob(f"{prefix}*.log"))
    ]
    obj = KwokLogs(metadata=ObjectMeta(name=pod, namespace=namespace), spec={"logs": entries})
    client.apply(obj, field_manager=FIELD_MANAGER, force=True)
    return path


def pod_log(
    client: Client, namespace: str, pod: str, container: str = "node", *, timestamps: bool = False
) -> list[str]:
    """The log kwok serves for ``pod``'s ``container``, as ``kubectl logs`` gives it (each line
    ending in a newline; with ``timestamps`` the time first), read from the file its ``Logs``
    object names: it outlives the pod, which an ended run deletes."""
    logs = client.get(KwokLogs, pod, namespace=namespace)
    (path,) = [e["logsFile"] for e in logs.spec["logs"] if container in e["containers"]]
    out: list[str] = []
    partial = ""
    for line in Path(path).read_text().splitlines():
        stamp, _stream, tag, text = [*line.split(" ", 3), ""][:4]  # <RFC3339Nano> <stream> <P|F> <text>
        partial += text
        if tag == "F":
            out.append(f"{stamp} {partial}\n" if timestamps else f"{partial}\n")
            partial = ""
    return out


__all__ = [
    "EXIT_CODE_ANNOTATION",
    "NODE_ANNOTATION",
    "NODE_ANNOTATION_VALUE",
    "PHASE_ANNOTATION",
    "REASON_ANNOTATION",
    "Kwok",
    "KwokLogs",
    "after_last_entry",
    "cri_log_lines",
    "pod_log",
    "register_pod_log",
    "stage_documents",
]
