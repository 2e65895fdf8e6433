"""Lease-based leader election (coordination.k8s.io/v1), with client-go's timing rules.

A replica holds the Lease by renewing ``spec.renewTime`` before ``leaseDurationSeconds`` run
out. Others take it over only when they have watched the record stay unchanged for a whole
lease duration on their OWN clock, so clock skew between replicas cannot steal a live lease.
Every write carries the resourceVersion read, so two candidates never both win a round.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from nvcre.runtime.metrics import LEADER

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderElectionConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def _now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    def __init__(self, client: AsyncClient, config: LeaderElectionConfig) -> None:
        self.client = client
        self.config = config
        self.is_leader = asyncio.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0

    def _loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now = _now()
        try:
            lease = await self.client.get(Lease, cfg.name, namespace=cfg.namespace)
        except ApiError as error:
            if error.status.code != 404:
                raise
            spec = LeaseSpec(
                holderIdentity=cfg.identity,
                leaseDurationSeconds=int(cfg.lease_duration),
                acquireTime=now,
                renewTime=now,
                leaseTransitions=0,
            )
            try:
                await self.client.create(
                    Lease(metadata=ObjectMeta(name=cfg.name, namespace=cfg.namespace), spec=spec)
                )
            except ApiError as create_error:
                if create_error.status.code == 409:
                    return False
                raise
            return True
        spec = lease.spec or LeaseSpec()
        record = (spec.holderIdentity, spec.renewTime, spec.leaseDurationSeconds, spec.leaseTransitions)
        if record != self._observed:
            self._observed, self._observed_at = record, self._loop_time()
        holder = spec.holderIdentity or ""
        duration = spec.leaseDurationSeconds or int(cfg.lease_duration)
        if holder and holder != cfg.identity and self._loop_time() < self._observed_at + duration:
            return False
        if holder != cfg.identity:
            spec.acquireTime = now
            spec.leaseTransitions = (spec.leaseTransitions or 0) + 1
        spec.holderIdentity = cfg.identity
        spec.leaseDurationSeconds = int(cfg.lease_duration)
        spec.renewTime = now
        lease.spec = spec
        try:
            await self.client.replace(lease)
        except ApiError as error:
            if error.status.code == 409:
                return False
            raise
        return True

    async def _attempt(self) -> bool:
        try:
            return await self._try_acquire_or_renew()
        except Exception as error:
            log.warning("leader election %s/%s: %s", self.config.namespace, self.config.name, error)
            return False

    async def acquire(self) -> None:
        """Return once this replica holds the lease."""
        while not await self._attempt():
            await asyncio.sleep(self.config.retry_period)
        self.is_leader.set()
        LEADER.labels(self.config.name).set(1)
        log.info("became leader %s/%s as %s", self.config.namespace, self.config.name, self.config.identity)

    async def hold(self) -> None:
        """Renew until a renewal misses the deadline; then return (leadership is lost)."""
        cfg = self.config
        last_renewal = self._loop_time()
        while True:
            await asyncio.sleep(cfg.retry_period)
            if await self._attempt():
                last_renewal = self._loop_time()
            elif self._loop_time() - last_renewal > cfg.renew_deadline:
                self.is_leader.clear()
                LEADER.labels(cfg.name).set(0)
                log.error("lost leadership of %s/%s", cfg.namespace, cfg.name)
                return

    async def release(self) -> None:
        """Give the lease up on a clean shutdown so a standby takes over at once."""
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        LEADER.labels(self.config.name).set(0)
        try:
            lease = await self.client.get(Lease, self.config.name, namespace=self.config.namespace)
            if lease.spec and lease.spec.holderIdentity == self.config.identity:
                lease.spec.holderIdentity = None
                lease.spec.leaseDurationSeconds = 1
                await self.client.replace(lease)
        except ApiError as error:
            log.warning("could not release lease: %s", error)
