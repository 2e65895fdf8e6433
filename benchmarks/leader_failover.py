"""How long a standby replica takes to lead after the leader is SIGKILLed; prints a table.

    .venv/bin/python benchmarks/leader_failover.py [--runs 3] [--lease 6] [--renew 4.5] [--retry 0.5]

Two leader-elected ``nvcre-manager`` replicas run against the test control plane. Each run kills
the leader (no release: the Lease must expire) and reads the Lease the standby writes. ``gap`` is
``acquireTime`` minus the dead leader's last ``renewTime``; ``after expiry`` is what the gap adds
to the lease duration (the standby's retry period and its own latency). The integration test
only checks the gap is never below the lease duration; this is where its size is measured.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace

from nvcre.manager.main import LEADER_ELECTION_ID
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.waiting import wait_for

NAMESPACE = "failover"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lease", type=float, default=6.0)
    parser.add_argument("--renew", type=float, default=4.5)
    parser.add_argument("--retry", type=float, default=0.5)
    args = parser.parse_args(argv)
    flags = (
        f"--lease-duration={args.lease:g}",
        f"--renew-deadline={args.renew:g}",
        f"--retry-period={args.retry:g}",
    )
    gaps: list[float] = []
    with ControlPlane() as cp, cp.client() as kube, tempfile.TemporaryDirectory() as tmp:
        kube.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))

        def holder() -> str | None:
            try:
                spec = kube.get(Lease, LEADER_ELECTION_ID, namespace=NAMESPACE).spec
            except Exception:
                return None
            return spec.holderIdentity if spec else None

        def replica(name: str) -> ManagerProcess:
            return ManagerProcess(
                cp, Path(tmp), name=name, leader_elect=True, lease_namespace=NAMESPACE, extra_args=flags
            ).start()

        leader = replica("replica-0")
        wait_for(lambda: holder() == leader.name, 60, what="the first leader")
        for run in range(1, args.runs + 1):
            standby = replica(f"replica-{run}")
            leader.kill()
            last = kube.get(Lease, LEADER_ELECTION_ID, namespace=NAMESPACE).spec
            wait_for(lambda: holder() == standby.name, args.lease + 60, what=f"{standby.name} to lead")  # noqa: B023
            taken = kube.get(Lease, LEADER_ELECTION_ID, namespace=NAMESPACE).spec
            gaps.append((taken.acquireTime - last.renewTime).total_seconds())
            leader.stop()
            leader = standby
        leader.stop()
    print(f"lease {args.lease:g}s, renew deadline {args.renew:g}s, retry {args.retry:g}s, {args.runs} runs")
    print(f"{'':14}{'median':>8}{'max':>8}")
    print(f"{'gap (s)':14}{statistics.median(gaps):8.2f}{max(gaps):8.2f}")
    after = [g - args.lease for g in gaps]
    print(f"{'after expiry':14}{statistics.median(after):8.2f}{max(after):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
