"""What every controller shares: the client, the informers' caches, events, status writes, the
ownership chains of workload pods, the clock, and the usual requeues."""

from __future__ import annotations

from dataclasses import dataclass, field

from lightkube import AsyncClient

from nvcre.api.v1alpha1.constants import Default
from nvcre.controllers.events import Recorder
from nvcre.controllers.ownership import Ownership
from nvcre.controllers.status import StatusWriter
from nvcre.runtime.clock import Clock, SystemClock
from nvcre.runtime.controller import Result
from nvcre.runtime.manager import Manager

REQUEUE = Result(requeue_after=Default.REQUEUE_SECONDS)
"""Look again after the controllers' usual requeue interval."""
IMMEDIATE = Result(requeue_after=Default.REQUEUE_IMMEDIATE_SECONDS)
"""Look again at once (after a step whose outcome the next pass acts on)."""


@dataclass
class Context:
    client: AsyncClient
    manager: Manager
    recorder: Recorder
    status: StatusWriter
    ownership: Ownership
    clock: Clock = field(default_factory=SystemClock)
    """Every time a controller writes or measures a duration against (the status writer's too)."""

    @classmethod
    def for_manager(cls, manager: Manager, clock: Clock | None = None) -> Context:
        clock = clock or SystemClock()
        recorder = Recorder(manager.client)
        client = manager.client
        status = StatusWriter(client, recorder, clock)
        return cls(client, manager, recorder, status, Ownership(client), clock)
