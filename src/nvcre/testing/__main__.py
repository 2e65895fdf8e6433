"""``python -m nvcre.testing build|up|paths``: build the binaries or run a local control plane.

``build``  go-build (or reuse) etcd, kube-apiserver, kwok, toxiproxy-server, kubectl and the workload chain
           (kube-scheduler, kube-controller-manager, JobSet, Trainer) and fetch the CRDs and
           webhook manifests; ``--no-kubectl`` / ``--no-chain`` skip those. Prints
           ``<name> <path>`` lines on stdout.
``paths``  like build but never builds: fails if something is missing.
``up``     start etcd + kube-apiserver (+ kwok with ``--kwok``, + fake GPU nodes with
           ``--gpu-nodes N``, + the workload chain with ``--full``), print the kubeconfig path
           on stdout, run until Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from nvcre.testing import binaries as bins


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nvcre.testing", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    build = sub.add_parser("build", help="build (or reuse) the control-plane binaries")
    build.add_argument("--no-kubectl", action="store_true", help="skip kubectl (tests do not need it)")
    build.add_argument(
        "--no-chain",
        action="store_true",
        help="skip kube-scheduler, kube-controller-manager, JobSet and Trainer (only full-chain tests need them)",
    )
    build.add_argument("--force", action="store_true", help="rebuild even if cached binaries match")

    paths = sub.add_parser("paths", help="print where the binaries are; never build")
    paths.add_argument("--kubectl", action="store_true", help="require kubectl too")
    paths.add_argument("--chain", action="store_true", help="require the workload chain's binaries too")

    up = sub.add_parser("up", help="run a control plane in the foreground until Ctrl-C")
    up.add_argument("--kwok", action="store_true", help="also run kwok (fake nodes and pods)")
    up.add_argument(
        "--full",
        action="store_true",
        help="also run kube-controller-manager, kube-scheduler, JobSet and Trainer (implies --kwok)",
    )
    up.add_argument(
        "--gpu-nodes", type=int, default=0, metavar="N", help="create N fake GPU nodes (implies --kwok)"
    )
    up.add_argument("--platform", default="aws", help="platform of the fake nodes' providerID (default aws)")
    up.add_argument("--product", default="NVIDIA-H100-80GB-HBM3", help="nvidia.com/gpu.product label")
    up.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node (default 8)")
    up.add_argument(
        "--clique-size", type=int, default=0, help="nodes per nvidia.com/gpu.clique (0: no label)"
    )
    up.add_argument("--rdma-ib", type=int, default=None, help="rdma/ib per node")
    up.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="NAME=QTY",
        help="another extended resource per node, e.g. vpc.amazonaws.com/efa=32 (repeatable)",
    )
    up.add_argument("--kubeconfig", type=Path, default=None, help="also copy the kubeconfig to this path")
    up.add_argument("--workdir", type=Path, default=None, help="keep state and logs in this directory")
    up.add_argument("--no-trainer-crds", action="store_true", help="skip the Kubeflow Trainer CRDs")
    up.add_argument(
        "--crds", type=Path, action="append", default=None, help="CRD file/dir (default config/crd)"
    )
    return parser


def _print_paths(binaries: bins.Binaries) -> None:
    for name, path in sorted(binaries.paths.items()):
        print(f"{name} {path}")
    print(f"trainer-crds {binaries.trainer_crds}")
    print(f"kwok-crds {binaries.kwok_crds}")
    print(f"jobset-crds {binaries.jobset_crds}")
    print(f"jobset-webhooks {binaries.jobset_webhooks}")
    print(f"trainer-webhooks {binaries.trainer_webhooks}")


def _build(args: argparse.Namespace) -> int:
    names = [
        n
        for n in bins.ALL
        if not (args.no_kubectl and n == bins.KUBECTL) and not (args.no_chain and n in bins.CHAIN)
    ]
    started = time.monotonic()
    binaries = bins.build(names, force=args.force)
    print(f"[nvcre.testing] binaries ready in {time.monotonic() - started:.1f}s", file=sys.stderr)
    _print_paths(binaries)
    return 0


def _paths(args: argparse.Namespace) -> int:
    names = [*bins.REQUIRED, *([bins.KUBECTL] if args.kubectl else []), *(bins.CHAIN if args.chain else ())]
    _print_paths(bins.ensure(names, build_missing=False))
    return 0


def _up(args: argparse.Namespace) -> int:
    from nvcre.testing.cluster import Cluster, describe_timings
    from nvcre.testing.controlplane import ControlPlane
    from nvcre.testing.nodes import GpuNodeSpec, create_gpu_nodes, gpu_node_names, node_ready
    from nvcre.testing.waiting import wait_for

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def log(message: str) -> None:
        print(f"[nvcre.testing] {message}", file=sys.stderr, flush=True)

    use_kwok = args.kwok or args.full or args.gpu_nodes > 0
    started = time.monotonic()
    cp = ControlPlane(
        binaries=bins.ensure((*bins.REQUIRED, *(bins.CHAIN if args.full else ()))),
        crd_paths=args.crds,
        install_trainer_crds=not args.no_trainer_crds,
        workdir=args.workdir,
    )
    cluster = Cluster(cp, chain=args.full) if use_kwok else None
    try:
        if cluster is None:
            cp.start()
        else:
            cluster.start()
        log(f"kube-apiserver {cp.version()} at {cp.server} (up in {time.monotonic() - started:.1f}s)")
        log(f"CRDs installed: {', '.join(cp.installed_crds) or '(none)'}")
        if cluster is not None:
            kwok = cluster.kwok
            log(f"kwok running (kubelet endpoint 127.0.0.1:{kwok.port}, logs in {kwok.logs_dir})")
        if cluster is not None and cluster.chain is not None:
            log(f"workload chain ready ({describe_timings(cluster.timings)}):")
            for line in cluster.chain.describe():
                log(f"  {line}")
        if args.gpu_nodes:
            spec = GpuNodeSpec(
                platform=args.platform,
                product=args.product,
                gpus=args.gpus,
                rdma_ib=args.rdma_ib,
                extra_resources=dict(r.split("=", 1) for r in args.resource),
            )
            with cp.client() as client:
                create_gpu_nodes(client, args.gpu_nodes, spec, clique_size=args.clique_size or None)
                from lightkube.resources.core_v1 import Node

                names = gpu_node_names(args.gpu_nodes)
                wait_for(
                    lambda: all(node_ready(client.get(Node, n)) for n in names),
                    timeout=60,
                    what=f"{len(names)} fake GPU nodes to become Ready",
                )
            log(f"{args.gpu_nodes} fake {args.product} nodes ({args.platform}) are Ready")
        kubeconfig = cp.kubeconfig_path
        if args.kubeconfig is not None:
            kubeconfig = cp.write_kubeconfig(args.kubeconfig.expanduser().resolve())
        log(f"logs: {cp.workdir}; stop with Ctrl-C")
        log(f"try: kubectl --kubeconfig {kubeconfig} get crd,nodes")
        print(kubeconfig, flush=True)
        while not stop.wait(1.0):
            if not (cp.running if cluster is None else cluster.running):
                log("a control-plane process exited unexpectedly; stopping")
                return 1
        log("stopping")
        return 0
    finally:
        if cluster is None:
            cp.stop()
        else:
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            return _build(args)
        if args.command == "paths":
            return _paths(args)
        return _up(args)
    except bins.BinaryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # StartupError and friends: a clear message, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
