"""What every controller shares: the client, the informers' caches, events, status writes and the
ownership chains of workload pods."""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import AsyncClient

from nvcre.controllers.events import Recorder
from nvcre.controllers.ownership import Ownership
from nvcre.controllers.status import StatusWriter
from nvcre.runtime.manager import Manager


@dataclass
class Context:
    client: AsyncClient
    manager: Manager
    recorder: Recorder
    status: StatusWriter
    ownership: Ownership

    @classmethod
    def for_manager(cls, manager: Manager) -> Context:
        recorder = Recorder(manager.client)
        client = manager.client
        return cls(client, manager, recorder, StatusWriter(client, recorder), Ownership(client))
