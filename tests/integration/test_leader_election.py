"""Two nvcre-manager replicas with leader election: one leads and writes, the other stands by.

This module does not use the shared ``manager`` fixture (it is module-scoped, so none runs here):
the only managers are the replicas each test starts. Their Lease (default id) lives in the
test's namespace, so tests cannot see each other's Lease. TrainJobs are ended by hand: a
leader's crash must land between two exact writes.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.coordination_v1 import Lease

from nvcre import resources
from nvcre.manager.main import LEADER_ELECTION_ID
from nvcre.testing.builders import pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import finish_trainjob, pool_name, workflow

Replicas = Callable[..., ManagerProcess]
LEADER_METRIC = "leader_election_master_status"
RECONCILES = "controller_runtime_reconcile_total"
CACHED = "nvcre_informer_cached_objects"


def timing(lease: float, renew: float, retry: float) -> tuple[str, ...]:
    return (f"--lease-duration={lease:g}", f"--renew-deadline={renew:g}", f"--retry-period={retry:g}")


@pytest.fixture
def replicas(control_plane: ControlPlane, kwok: Kwok, namespace: str, tmp_path: Path) -> Iterator[Replicas]:
    """``replicas(name, *flags)`` starts a leader-elected manager whose Lease is in ``namespace``."""
    started: list[ManagerProcess] = []

    def start(name: str, *flags: str) -> ManagerProcess:
        replica = ManagerProcess(
            control_plane,
            tmp_path,
            name=f"{name}-{secrets.token_hex(2)}",
            leader_elect=True,
            lease_namespace=namespace,
            extra_args=flags,
        )
        started.append(replica)
        return replica.start()

    yield start
    for replica in started:
        replica.stop()


def lease(kube: Client, namespace: str) -> Lease:
    return kube.get(Lease, LEADER_ELECTION_ID, namespace=namespace)


def holder(kube: Client, namespace: str) -> str | None:
    try:
        spec = lease(kube, namespace).spec
    except Exception:
        return None
    return spec.holderIdentity if spec else None


def wait_holder(kube: Client, namespace: str, identity: str, timeout: float) -> Lease:
    wait_for(lambda: holder(kube, namespace) == identity, timeout, what=f"{identity} to hold the Lease")
    return lease(kube, namespace)


def reconciles(replica: ManagerProcess) -> float:
    """Reconciles of every controller and result, as the replica's /metrics counts them."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        sample.value
        for family in text_string_to_metric_families(replica.metrics())
        for sample in family.samples
        if sample.name == RECONCILES
    )


def trio(kube: Client, namespace: str, name: str) -> str | None:
    obj = kube.get(resources.Workflow, name, namespace=namespace).to_dict()
    true = [
        c["type"]
        for c in (obj.get("status") or {}).get("conditions") or ()
        if c["type"] in ("InProgress", "Succeeded", "Failed") and c["status"] == "True"
    ]
    return true[0] if true else None


def trainjobs(kube: Client, namespace: str) -> list[str]:
    return sorted(t.metadata.name for t in kube.list(resources.TrainJob, namespace=namespace))


def seconds_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds()


def test_one_leader_writes_and_the_standby_finishes_after_a_crash(
    kube: Client, namespace: str, gpu_nodes: Any, replicas: Replicas
) -> None:
    lease_duration, retry = 6.0, 0.5
    flags = timing(lease_duration, 4.5, retry)
    leader = replicas("replica-a", *flags)
    first = wait_holder(kube, namespace, leader.name, 30)
    assert first.spec.leaseDurationSeconds == int(lease_duration)
    standby = replicas("replica-b", *flags)  # ready: it caches nothing until it leads, it only waits

    pool = pool_name()
    gpu_nodes(4, pool_spec(pool))
    kube.create(resources.Workflow.from_dict(workflow("wf", namespace, pool, 2)))
    names = ["wf-group-0-iter-1-workload", "wf-group-1-iter-1-workload"]
    wait_for(lambda: trainjobs(kube, namespace) == names, 60, what="both TrainJobs")

    assert holder(kube, namespace) == leader.name, "the Lease stays with the first replica"
    assert leader.metric(LEADER_METRIC, name=LEADER_ELECTION_ID) == 1
    assert not standby.metric(LEADER_METRIC, name=LEADER_ELECTION_ID), "the standby does not lead"
    assert reconciles(leader) > 0
    assert reconciles(standby) == 0, "the standby never reconciles, so it never writes"
    assert trio(kube, namespace, "wf") == "InProgress"

    leader.kill()  # SIGKILL: no release, the Lease must expire
    last = lease(kube, namespace)
    assert last.spec.holderIdentity == leader.name
    for name in names:
        finish_trainjob(kube, namespace, name, succeeded=True)

    taken = wait_holder(kube, namespace, standby.name, lease_duration + 30)
    assert taken.spec.leaseTransitions == (last.spec.leaseTransitions or 0) + 1
    gap = seconds_between(last.spec.renewTime, taken.spec.acquireTime)
    # Never before the lease ran out on the standby's clock (how soon after: benchmarks/leader_failover.py).
    assert lease_duration <= gap, gap
    wait_for(lambda: trio(kube, namespace, "wf") == "Succeeded", 60, what="the standby to finish wf")
    assert standby.metric(LEADER_METRIC, name=LEADER_ELECTION_ID) == 1
    assert reconciles(standby) > 0
    assert standby.running()


def test_a_clean_shutdown_releases_the_lease_for_an_immediate_takeover(
    kube: Client, namespace: str, gpu_nodes: Any, replicas: Replicas
) -> None:
    lease_duration = 60.0  # long: only a released Lease can change hands within the test
    flags = timing(lease_duration, 40, 0.5)
    leader = replicas("replica-a", *flags)
    wait_holder(kube, namespace, leader.name, 30)
    standby = replicas("replica-b", *flags)
    assert holder(kube, namespace) == leader.name

    last = lease(kube, namespace)
    leader.stop()  # SIGTERM
    assert leader.process is not None and leader.process.returncode() == 0
    released = lease(kube, namespace).spec
    assert released.holderIdentity in (None, standby.name), "a clean shutdown gives the Lease up"
    taken = wait_holder(kube, namespace, standby.name, lease_duration + 30)
    assert seconds_between(last.spec.renewTime, taken.spec.acquireTime) < lease_duration, (
        "the standby took the Lease while the old holder's term still ran: it was released"
    )

    pool = pool_name()
    gpu_nodes(2, pool_spec(pool))
    kube.create(resources.Workflow.from_dict(workflow("after", namespace, pool, 0)))
    wait_for(
        lambda: trainjobs(kube, namespace) == ["after-job-workload"], 60, what="the new leader to launch"
    )
    assert reconciles(standby) > 0


def test_the_standby_caches_nothing_until_it_leads(
    kube: Client, namespace: str, gpu_nodes: Any, replicas: Replicas
) -> None:
    gpu_nodes(2)
    flags = timing(60, 40, 0.5)  # long: the Lease changes hands only when released
    leader = replicas("replica-a", *flags)
    wait_holder(kube, namespace, leader.name, 30)
    wait_for(lambda: (leader.metric(CACHED, kind="Node") or 0) >= 2, 30, what="the leader's node cache")
    standby = replicas("replica-b", *flags)  # Ready: under a warm-standby design, synced by now
    assert standby.metric(CACHED, kind="Node") == 0
    assert standby.metric(CACHED, kind="Pod") == 0

    leader.stop()  # SIGTERM releases the Lease: the standby leads, and only then lists
    wait_holder(kube, namespace, standby.name, 30)
    wait_for(lambda: (standby.metric(CACHED, kind="Node") or 0) >= 2, 30, what="the new leader's cache")


def test_a_leader_that_cannot_renew_exits_instead_of_writing_as_a_follower(
    kube: Client, namespace: str, replicas: Replicas
) -> None:
    renew_deadline = 2.0
    leader = replicas("replica-a", *timing(6, renew_deadline, 0.5))
    wait_holder(kube, namespace, leader.name, 30)

    def intrude() -> bool:
        """Someone else holds the Lease now (as after a partition): renewals fail until the
        deadline. False on a 409: the leader renewed between the read and this write."""
        held = lease(kube, namespace)
        held.spec.holderIdentity = "intruder"
        held.spec.renewTime = datetime.now(UTC)
        held.spec.leaseDurationSeconds = 300
        try:
            kube.replace(held)
        except ApiError as error:
            if error.status.code == 409:
                return False
            raise
        return True

    wait_for(intrude, 30, what="the Lease taken over by another holder")

    assert leader.process is not None
    wait_for(lambda: not leader.running(), 30 + renew_deadline, what=f"{leader.name} to exit")
    assert leader.process.returncode() == 1
    assert "leadership lost; exiting" in leader.log_tail(30)
    assert holder(kube, namespace) == "intruder", "a replica that lost the Lease never writes it again"
