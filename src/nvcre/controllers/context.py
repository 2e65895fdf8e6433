"""What every controller shares: the client, the informers' caches, events and status writes."""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import AsyncClient

from nvcre.controllers.events import Recorder
from nvcre.controllers.status import StatusWriter
from nvcre.runtime.manager import Manager


@dataclass
class Context:
    client: AsyncClient
    manager: Manager
    recorder: Recorder
    status: StatusWriter

    @classmethod
    def for_manager(cls, manager: Manager) -> Context:
        recorder = Recorder(manager.client)
        return cls(manager.client, manager, recorder, StatusWriter(manager.client, recorder))
