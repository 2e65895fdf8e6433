"""Seeded fault schedules for the reliability suite, and the driver that injects them.

:func:`schedule` is a pure function of (kind, seed): the same seed always gives the same faults,
in the same order, with the same gaps, durations and parameters, so a failing run is replayed by
running it again with that seed. :class:`FaultDriver` plays a schedule against a live control
plane from a test's polling loop (:meth:`FaultDriver.tick`): each fault begins after its gap,
lasts its hold and is then undone, one at a time, until :meth:`FaultDriver.stop`.

Fault kinds:

* ``latency`` — every byte kube-apiserver sends is delayed (toxiproxy ``latency`` with jitter);
* ``reset_peer`` — every connection through the proxy is reset (TCP RST) after a few ms;
* ``watch_drop`` — the long-lived watch streams die: the proxy is disabled (every connection
  closed, new ones refused), or ``limit_data`` closes each connection after some bytes, or
  ``timeout`` stalls each connection and closes it;
* ``throttle`` — API Priority and Fairness puts the manager's own user in a priority level of one
  seat that rejects instead of queueing: kube-apiserver answers 429 to whatever exceeds it;
* ``apiserver_restart`` / ``etcd_restart`` — the process is stopped (SIGTERM, or SIGKILL: a
  crash) and started again on the same ports, certificates and data;
* ``none`` — nothing: the undisturbed reference run.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.resources.flowcontrol_apiserver_v1 import FlowSchema, PriorityLevelConfiguration

from nvcre.testing.controlplane import FIELD_MANAGER, ControlPlane
from nvcre.testing.toxiproxy import FaultProxy

KINDS = ("none", "latency", "reset_peer", "watch_drop", "throttle", "apiserver_restart", "etcd_restart")
THROTTLE = "nvcre-chaos-throttle"


@dataclass(frozen=True)
class Fault:
    kind: str
    gap: float  # seconds after the previous fault ended (or the schedule started)
    hold: float  # seconds it lasts; a restart is over when the process is ready again
    variant: str = ""
    params: Mapping[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        detail = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return " ".join(p for p in (self.kind, self.variant, detail, f"hold={self.hold:.1f}s") if p)


def _one(kind: str, rng: random.Random) -> Fault:
    if kind == "latency":
        params = {"latency": rng.randint(50, 400), "jitter": rng.randint(0, 100)}
        return Fault(kind, rng.uniform(0.5, 2.0), rng.uniform(2.0, 6.0), params=params)
    if kind == "reset_peer":
        return Fault(
            kind, rng.uniform(0.5, 3.0), rng.uniform(0.3, 2.0), params={"timeout": rng.randint(0, 200)}
        )
    if kind == "watch_drop":
        variant = rng.choice(("disable", "limit_data", "timeout"))
        params = {
            "disable": {},
            "limit_data": {"bytes": rng.randint(2_000, 64_000)},
            "timeout": {"timeout": rng.randint(100, 1_500)},
        }[variant]
        return Fault(kind, rng.uniform(0.5, 3.0), rng.uniform(0.3, 2.5), variant, params)
    if kind == "throttle":
        return Fault(kind, rng.uniform(0.5, 2.0), rng.uniform(2.0, 6.0))
    if kind in ("apiserver_restart", "etcd_restart"):
        # soon enough to land while the runs progress (they converge within a few seconds)
        return Fault(kind, rng.uniform(1.0, 3.0), 0.0, rng.choice(("term", "kill")))
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")


#: Restarts are slow (seconds each, and every one sets the manager's backoff climbing): a
#: schedule holds this many; the other kinds go on until the runs end.
MAX_RESTARTS = 3


def schedule(kind: str, seed: int) -> Iterator[Fault]:
    """The fault sequence of ``kind`` for ``seed``: endless, :data:`MAX_RESTARTS` restarts, or
    nothing for ``none``."""
    if kind not in KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
    rng = random.Random(f"{seed}:{kind}")
    count = 0
    while kind != "none" and not (kind.endswith("_restart") and count == MAX_RESTARTS):
        count += 1
        yield _one(kind, rng)


def throttle_documents(username: str) -> list[dict[str, Any]]:
    """A priority level of one seat that rejects (429) what exceeds it, and a FlowSchema that
    puts every request of ``username`` there (ahead of the built-in service-accounts schema)."""
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": THROTTLE},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    everything = {
        "verbs": ["*"],
        "apiGroups": ["*"],
        "resources": ["*"],
        "namespaces": ["*"],
        "clusterScope": True,
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": THROTTLE},
        "spec": {
            "priorityLevelConfiguration": {"name": THROTTLE},
            "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": username}}],
                    "resourceRules": [everything],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    return [level, schema]


class FaultDriver:
    """Injects a schedule's faults one at a time, from the caller's loop. See module docs.

    ``admin`` talks to kube-apiserver directly (never through the proxy) and must be exempt from
    flow control (``system:masters``); ``throttled_user`` is the user the throttle targets.
    """

    def __init__(
        self,
        faults: Iterable[Fault],
        *,
        control_plane: ControlPlane,
        proxy: FaultProxy,
        admin: Client,
        throttled_user: str,
    ) -> None:
        self._faults = iter(faults)
        self.control_plane = control_plane
        self.proxy = proxy
        self.admin = admin
        self.throttled_user = throttled_user
        self.injected: Counter[str] = Counter()
        self.log: list[str] = []
        self._started = time.monotonic()
        self._active: Fault | None = None
        self._toxic = ""
        self._next: Fault | None = next(self._faults, None)
        self._due = self._started + (self._next.gap if self._next else 0.0)

    def tick(self) -> None:
        """Begin the next fault when its gap has passed, end the active one when its hold has."""
        now = time.monotonic()
        if now < self._due:
            return
        if self._active is not None:
            self._end(self._active)
            self._active = None
            self._next = next(self._faults, None)
            self._due = time.monotonic() + (self._next.gap if self._next else 0.0)
        elif self._next is not None:
            fault = self._next
            self.log.append(f"{now - self._started:7.2f}s {fault.describe()}")
            self._begin(fault)
            self.injected[fault.kind] += 1
            self._active = fault
            self._due = time.monotonic() + fault.hold

    def stop(self) -> None:
        """End the active fault, if any; inject no more."""
        if self._active is not None:
            self._end(self._active)
            self._active = None
        self._next = None

    def _begin(self, fault: Fault) -> None:
        if fault.kind in ("latency", "reset_peer"):
            self._toxic = self.proxy.add_toxic(fault.kind, fault.params)
        elif fault.kind == "watch_drop" and fault.variant == "disable":
            self.proxy.set_enabled(False)
        elif fault.kind == "watch_drop":
            self._toxic = self.proxy.add_toxic(fault.variant, fault.params)
        elif fault.kind == "throttle":
            for document in throttle_documents(self.throttled_user):
                self.admin.apply(from_dict(document), field_manager=FIELD_MANAGER, force=True)
        elif fault.kind == "apiserver_restart":
            self.control_plane.restart_apiserver(kill=fault.variant == "kill")
        elif fault.kind == "etcd_restart":
            self.control_plane.restart_etcd(kill=fault.variant == "kill")

    def _end(self, fault: Fault) -> None:
        if self._toxic:
            self.proxy.remove_toxic(self._toxic)
            self._toxic = ""
        if fault.kind == "watch_drop" and fault.variant == "disable":
            self.proxy.set_enabled(True)
        if fault.kind == "throttle":
            for resource in (FlowSchema, PriorityLevelConfiguration):
                try:
                    self.admin.delete(resource, THROTTLE)
                except ApiError as error:
                    if error.status.code != 404:
                        raise


__all__ = ["KINDS", "MAX_RESTARTS", "THROTTLE", "Fault", "FaultDriver", "schedule", "throttle_documents"]
