"""``nvcre-manager``: run nvcre's controllers against a cluster."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import ssl
import sys
import uuid
from datetime import timedelta

import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ConfigError

from nvcre import __version__, resources
from nvcre.api.v1alpha1.constants import Default
from nvcre.controllers import fleet_metrics, run_metrics
from nvcre.controllers.certification import CertificationController
from nvcre.controllers.context import Context
from nvcre.controllers.job import JobController
from nvcre.controllers.measurement.registry import KINDS as MEASUREMENT_KINDS
from nvcre.controllers.measurement.shell import MeasurementController
from nvcre.controllers.noderecord_retention import NodeRecordRetention, describe
from nvcre.controllers.noderecords import NodeRecordController
from nvcre.controllers.reportexport import ReportExportControllers
from nvcre.controllers.workflow import WorkflowController
from nvcre.controllers.workloadrun import WorkloadRunController
from nvcre.fleet.retention import DEFAULT_RETENTION_TEXT, parse_retention
from nvcre.manager import logs
from nvcre.runtime.leader import LeaderElectionConfig
from nvcre.runtime.manager import LostLeadership, Manager
from nvcre.runtime.secure_metrics import ServingCert

log = logging.getLogger("nvcre.manager")

LEADER_ELECTION_ID = "240fe9c6.nvidia.com"
USER_AGENT = f"nvcre-manager/{__version__}"
"""What the API server's audit log and metrics show as this manager's client."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nvcre-manager", description="Run the nvcre controllers.")
    parser.add_argument("--kubeconfig", help="path to a kubeconfig (default: in-cluster, then $KUBECONFIG)")
    parser.add_argument("--context", help="kubeconfig context to use")
    parser.add_argument("--leader-elect", action="store_true", help="elect one leader among replicas")
    parser.add_argument("--leader-election-id", default=LEADER_ELECTION_ID)
    parser.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", Default.NAMESPACE),
        help="namespace of the Lease",
    )
    parser.add_argument(
        "--leader-election-identity", default=None, help="this replica's name (default: host + uuid)"
    )
    parser.add_argument("--lease-duration", type=float, default=15.0, help="seconds (default 15)")
    parser.add_argument("--renew-deadline", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("--retry-period", type=float, default=2.0, help="seconds (default 2)")
    parser.add_argument(
        "--metrics-bind-address", default=":8080", help='host:port for /metrics ("0" disables)'
    )
    parser.add_argument(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="serve /metrics over HTTPS, only to scrapes whose bearer token the API server "
        "authenticates (TokenReview) and authorises for get /metrics (SubjectAccessReview); "
        "the chart turns it on (default off)",
    )
    parser.add_argument(
        "--metrics-cert-path",
        default="",
        help="directory of the metrics serving certificate (default: a self-signed one made at start)",
    )
    parser.add_argument(
        "--metrics-cert-name", default="tls.crt", help="certificate file in --metrics-cert-path"
    )
    parser.add_argument("--metrics-cert-key", default="tls.key", help="key file in --metrics-cert-path")
    parser.add_argument(
        "--health-probe-bind-address",
        default=":8081",
        help='host:port for /healthz and /readyz ("0" disables)',
    )
    parser.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=Default.MAX_CONCURRENT_RECONCILES,
        help="workers of each controller but the measurement ones (default 10)",
    )
    parser.add_argument(
        "--measurement-max-concurrent-reconciles",
        type=int,
        default=Default.MEASUREMENT_MAX_CONCURRENT_RECONCILES,
        help="workers of the BandwidthMeasurement and GoodputMeasurement controllers (default 5)",
    )
    parser.add_argument(
        "--node-discovery-timeout",
        type=float,
        default=Default.NODE_DISCOVERY_TIMEOUT_SECONDS,
        help="seconds a Certification waits for a matching node before it fails (default 300)",
    )
    parser.add_argument(
        "--max-nodes-per-run",
        type=int,
        default=Default.MAX_NODES_PER_RUN,
        metavar="N",
        help="the most nodes a Certification or WorkloadRun that sets no spec.maxNodes may take; "
        "0: no limit (default 0)",
    )
    parser.add_argument(
        "--release-timeout",
        type=float,
        default=Default.RELEASE_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="how long after a run ended its pods, JobSets, TrainJobs and Job-scoped TrainingRuntime "
        "copies may take to go before ResourcesReleased says ReleaseTimedOut (default 600)",
    )
    parser.add_argument(
        "--node-record-retention",
        type=_retention,
        default=DEFAULT_RETENTION_TEXT,
        metavar="DURATION",
        help="how long after its newest result the NodeRecord of a deleted Node is kept: days (90d) "
        f"or a Go duration (2160h); 0 keeps records forever (default {DEFAULT_RETENTION_TEXT})",
    )
    parser.add_argument(
        "--cluster-id",
        metavar="ID",
        help="this cluster's name for report webhooks: frozen on each ReportExport (spec.clusterID) "
        "and sent as X-Nvcre-Cluster-ID; at most 253 characters (default: none)",
    )
    parser.add_argument("--log-format", choices=("json", "text"), default="json")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    parser.add_argument("--version", action="version", version=f"nvcre-manager {__version__}")
    args = parser.parse_args(argv)
    if args.node_discovery_timeout < 0:
        parser.error("--node-discovery-timeout must not be negative")
    if not args.release_timeout > 0:
        parser.error(f"--release-timeout must be positive, got {args.release_timeout:g}")
    if (
        args.metrics_secure
        and _address(args.metrics_bind_address)
        and args.metrics_bind_address == args.health_probe_bind_address
    ):
        parser.error("--metrics-secure needs --metrics-bind-address apart from --health-probe-bind-address")
    if args.cluster_id is not None and not 1 <= len(args.cluster_id) <= 253:
        parser.error(f"--cluster-id must have 1 to 253 characters, got {len(args.cluster_id)}")
    if args.max_nodes_per_run < 0:
        parser.error(f"--max-nodes-per-run must not be negative, got {args.max_nodes_per_run}")
    for flag in ("--max-concurrent-reconciles", "--measurement-max-concurrent-reconciles"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value < 1:
            parser.error(f"{flag} must be greater than 0, got {value}")
    if not args.lease_duration > args.renew_deadline > args.retry_period > 0:
        parser.error(
            "leader election needs --lease-duration > --renew-deadline > --retry-period > 0, got "
            f"{args.lease_duration:g} > {args.renew_deadline:g} > {args.retry_period:g}"
        )
    return args


def _retention(value: str) -> timedelta:
    try:
        return parse_retention(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _address(value: str) -> str | None:
    return None if value in ("", "0") else value


def _metrics_cert(args: argparse.Namespace) -> ServingCert | None:
    if not args.metrics_secure:
        return None
    try:
        return ServingCert(args.metrics_cert_path, args.metrics_cert_name, args.metrics_cert_key)
    except (OSError, ssl.SSLError) as error:
        raise UsageError(f"--metrics-cert-path {args.metrics_cert_path}: {error}") from error


class UsageError(Exception):
    """A mistake in how the manager was started (flags, kubeconfig); reported in one line."""


def client_for(args: argparse.Namespace) -> AsyncClient:
    """The API client named by --kubeconfig/--context (else in-cluster, then $KUBECONFIG).

    Raises :class:`UsageError` for a kubeconfig that is missing, unreadable or malformed, or a
    context it does not define.
    """
    source = args.kubeconfig or "the in-cluster config or $KUBECONFIG"
    try:
        config = KubeConfig.from_file(args.kubeconfig) if args.kubeconfig else KubeConfig.from_env()
        client = AsyncClient(config=config.get(context_name=args.context), field_manager="nvcre-manager")
    except ConfigError as error:
        raise UsageError(f"kubeconfig {source}: {error}") from error
    except yaml.YAMLError as error:
        raise UsageError(f"kubeconfig {source} is not valid YAML: {str(error).splitlines()[0]}") from error
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(f"kubeconfig {source} is not usable: {type(error).__name__}: {error}") from error
    client._client._client.headers["User-Agent"] = USER_AGENT  # lightkube has no parameter for it
    return client


def build(args: argparse.Namespace, client: AsyncClient) -> Manager:
    election = None
    if args.leader_elect:
        identity = args.leader_election_identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        election = LeaderElectionConfig(
            args.leader_election_id,
            args.leader_election_namespace,
            identity,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
        )
    manager = Manager(
        client,
        leader_election=election,
        metrics_address=_address(args.metrics_bind_address),
        probe_address=_address(args.health_probe_bind_address),
        metrics_cert=_metrics_cert(args),
    )
    ctx = Context.for_manager(manager)
    WorkflowController(ctx, workers=args.max_concurrent_reconciles, release_timeout=args.release_timeout)
    JobController(ctx, workers=args.max_concurrent_reconciles)
    for kind in MEASUREMENT_KINDS:
        MeasurementController(ctx, kind(), workers=args.measurement_max_concurrent_reconciles)
    WorkloadRunController(
        ctx, workers=args.max_concurrent_reconciles, max_nodes_per_run=args.max_nodes_per_run
    )
    CertificationController(
        ctx,
        workers=args.max_concurrent_reconciles,
        node_discovery_timeout=args.node_discovery_timeout,
        max_nodes_per_run=args.max_nodes_per_run,
    )
    NodeRecordController(ctx, workers=args.max_concurrent_reconciles)
    NodeRecordRetention(ctx, args.node_record_retention)
    ReportExportControllers(ctx, workers=args.max_concurrent_reconciles, cluster_id=args.cluster_id)
    fleet_metrics.watch(manager.informer(resources.NodeRecord), ctx.clock)
    run_metrics.watch(manager.informer(resources.Job), manager.informer(resources.Workflow))
    return manager


async def run(args: argparse.Namespace) -> int:
    client = client_for(args)
    manager = build(args, client)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("nvcre-manager %s starting; %s", __version__, describe(args.node_record_retention))
    try:
        await manager.run(stop)
    except LostLeadership:
        log.error("leadership lost; exiting so that a follower never writes")
        return 1
    return 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logs.configure(args.log_format, args.log_level)
    try:
        code = asyncio.run(run(args))
    except UsageError as error:
        print(f"nvcre-manager: error: {error}", file=sys.stderr)
        code = 1
    sys.exit(code)
