"""The manager: shared informers, controllers, leader election, probes and graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lightkube import AsyncClient
from lightkube.core import resource as lkr
from lightkube.core.selector import build_selector

from nvcre.objects import Obj
from nvcre.runtime import looplag, probes, secure_metrics
from nvcre.runtime.controller import Controller
from nvcre.runtime.informer import Informer, Transform
from nvcre.runtime.leader import LeaderElectionConfig, LeaderElector
from nvcre.runtime.objects import without_managed_fields

log = logging.getLogger(__name__)


class LostLeadership(Exception):
    """This replica stopped leading; it must exit so that it never writes as a follower."""


def _stripping(transform: Transform | None) -> Transform:
    if transform is None:
        return without_managed_fields

    def both(obj: Obj) -> Obj:
        return transform(without_managed_fields(obj))

    return both


class Manager:
    def __init__(
        self,
        client: AsyncClient,
        *,
        leader_election: LeaderElectionConfig | None = None,
        metrics_address: str | None = None,
        probe_address: str | None = None,
        metrics_cert: secure_metrics.ServingCert | None = None,
    ) -> None:
        """With ``metrics_cert``, ``/metrics`` is served only on ``metrics_address``, over TLS, to
        scrapes the API server authenticates and authorises (:mod:`nvcre.runtime.secure_metrics`);
        else on both addresses over plain HTTP."""
        self.client = client
        self.leader_election = leader_election
        self.metrics_address = metrics_address
        self.probe_address = probe_address
        self.metrics_cert = metrics_cert
        self.controllers: list[Controller] = []
        self._informers: dict[tuple[Any, ...], Informer] = {}
        self._transforms: dict[tuple[Any, ...], Transform | None] = {}
        self.elector: LeaderElector | None = None
        self.servers: list[asyncio.Server] = []
        self._leading = False

    def informer(
        self,
        resource: type[lkr.Resource],
        *,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
        transform: Transform | None = None,
    ) -> Informer:
        """The shared informer of a resource type, namespace and label selector (one watch each,
        however many controllers read it).

        Every cached object is stripped of ``metadata.managedFields``; ``transform`` trims it
        further. All callers of one informer must pass the same ``transform``: a cache trimmed
        for one reader and not for another would depend on which asked first.
        """
        selector = build_selector(labels) if labels else None
        key = (resource, namespace, selector)
        if key not in self._informers:
            self._informers[key] = Informer(
                self.client,
                resource,
                namespace=namespace,
                labels=labels,
                transform=_stripping(transform),
            )
            self._transforms[key] = transform
        elif self._transforms[key] is not transform:
            raise ValueError(
                f"the {resource.__name__} informer (selector {selector!r}) was created with another transform"
            )
        return self._informers[key]

    def add(self, controller: Controller) -> None:
        self.controllers.append(controller)

    def ready(self) -> bool:
        """Ready once every cache has synced. A standby caches nothing until it leads (see
        ``run``), so while it waits for the Lease it is ready: ready to take over."""
        if self.leader_election is not None and not self._leading:
            return True
        return all(informer.synced.is_set() for informer in self._informers.values())

    async def _serve(self) -> None:
        if self.metrics_cert is None:
            for address in {a for a in (self.metrics_address, self.probe_address) if a}:
                self.servers.append(await probes.serve(address, self.ready))
            return
        if self.probe_address:
            self.servers.append(await probes.serve(self.probe_address, self.ready, metrics=False))
        if self.metrics_address:
            reviewer = secure_metrics.Reviewer(self.client)
            self.servers.append(
                await probes.serve(
                    self.metrics_address,
                    self.ready,
                    probes=False,
                    authorize=reviewer,
                    tls=self.metrics_cert.context,
                )
            )

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set (clean exit) or leadership is lost (raises LostLeadership).

        With leader election the informers start only once this replica leads, as
        controller-runtime's leader-gated runnables do: a standby holds no cache and no watch
        (half the memory and API watches of a pair), and a new leader lists everything afresh
        before its first reconcile, which costs about as long as a fresh start.
        """
        stop = stop or asyncio.Event()
        await self._serve()
        tasks: list[asyncio.Task[Any]] = [asyncio.create_task(looplag.sample(), name="event-loop-lag")]
        if self.metrics_cert is not None and self.metrics_cert.files is not None:
            tasks.append(asyncio.create_task(self.metrics_cert.watch(), name="metrics-cert"))
        stopping = asyncio.create_task(stop.wait(), name="stop")
        try:
            if self.leader_election is not None:
                self.elector = LeaderElector(self.client, self.leader_election)
                acquiring = asyncio.create_task(self.elector.acquire(), name="acquire")
                await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if stop.is_set():
                    acquiring.cancel()
                    return
                tasks.append(asyncio.create_task(self.elector.hold(), name="hold-lease"))
            self._leading = True
            tasks += [
                asyncio.create_task(i.run(), name=f"informer-{i.kind}") for i in self._informers.values()
            ]
            await asyncio.gather(*(i.synced.wait() for i in self._informers.values()))
            for controller in self.controllers:
                controller.start_watching()
                tasks.append(asyncio.create_task(controller.run(), name=f"controller-{controller.name}"))
            done, _ = await asyncio.wait({stopping, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            if stopping not in done:
                for task in done:
                    if task.get_name() == "hold-lease":
                        raise LostLeadership(self.leader_election.name if self.leader_election else "")
                    task.result()
        finally:
            stopping.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.elector is not None:
                await self.elector.release()
            for server in self.servers:
                server.close()
            log.info("manager stopped")
