"""pytest fixtures for tests that need the real control plane.

Import them into a ``conftest.py`` (``from nvcre.testing.fixtures import *``):

* ``control_plane`` (session) — a started :class:`ControlPlane`; missing binaries are built first
  (a failed build fails the session loudly, nothing is skipped); it keeps an audit log of the
  manager's requests (:mod:`nvcre.testing.audit`) for ``test_zz_rbac_used``;
* ``kube`` (session) — a lightkube ``Client`` with cluster-admin rights;
* ``namespace`` (function) — a fresh namespace per test, deleted afterwards;
* ``kwok`` (session) — kwok running against the control plane;
* ``gpu_nodes`` (function) — a factory creating fake GPU nodes unique to the test, deleted afterwards;
* ``async_kube`` (function) — a lightkube ``AsyncClient``;
* ``manager`` (module) — one ``nvcre-manager`` process against the control plane, shared by the
  tests of one module (they keep to their own namespaces and node pools);
* ``node_guard`` (session) — watches every Node from its start and records any write made by
  ``nvcre-manager`` (see :mod:`nvcre.testing.nodeguard`);
* ``full_cluster`` (session, opt-in) — a control plane of its own with kwok and the workload chain
  (kube-controller-manager, kube-scheduler, JobSet, Trainer; :mod:`nvcre.testing.cluster`). A test
  directory whose tests need the chain overrides ``control_plane`` and ``kwok`` with its parts
  (see ``tests/sandbox/conftest.py``), so the fixtures above work there unchanged. It is a control
  plane of its own because the chain acts on everything: on the shared one, Trainer would
  reconcile the TrainJobs other tests finish by hand and the garbage collector would delete the
  children they create with made-up owners.
* ``history`` (function) — ``history(resource, name, namespace)`` records every version of one
  object until the test ends (see :mod:`nvcre.testing.history`).

Why the manager is module-scoped, not session-scoped: a manager reconciles every namespace, so
while one runs, any other replica a test starts (leader election, RBAC, a kill/restart test)
would race it for the same objects. Scoping it to the module means a module that does not ask
for ``manager`` runs with no shared manager at all — pytest tears the previous module's one down
before the next module's first test — and can start exactly the replicas it wants. The price is
one manager start (~2-3 s) per module that uses it.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio
from lightkube import AsyncClient, Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node

from nvcre.testing.audit import MANAGER_USERS
from nvcre.testing.cluster import Cluster
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.history import History, Recorder
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess, running_manager
from nvcre.testing.nodeguard import NodeGuard
from nvcre.testing.nodes import GpuNodeSpec, create_gpu_nodes

GpuNodeFactory = Callable[..., list[Node]]


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    with ControlPlane(audit_users=MANAGER_USERS) as cp:
        yield cp


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Iterator[Client]:
    with control_plane.client() as client:
        yield client


def _slug(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "t"


@pytest.fixture
def namespace(kube: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"{_slug(request.node.name, 50)}-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=name, labels={"nvcre.test/namespace": "true"})))
    yield name
    # No namespace controller runs, so the namespace stays Terminating; its name is never reused.
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, name)


@pytest_asyncio.fixture
async def async_kube(control_plane: ControlPlane) -> AsyncIterator[AsyncClient]:
    client = control_plane.async_client()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session")
def kwok(control_plane: ControlPlane) -> Iterator[Kwok]:
    with Kwok(control_plane) as running:
        yield running


@pytest.fixture
def gpu_nodes(kube: Client, kwok: Kwok, request: pytest.FixtureRequest) -> Iterator[GpuNodeFactory]:
    """``gpu_nodes(count, spec=None, clique_size=None)`` creates nodes named after the test."""
    created: list[str] = []
    base = f"{_slug(request.node.name, 30)}-{secrets.token_hex(2)}"

    def make(count: int, spec: GpuNodeSpec | None = None, *, clique_size: int | None = None) -> list[Node]:
        prefix = f"{base}-{len(created)}" if created else base
        nodes = create_gpu_nodes(kube, count, spec, prefix=prefix, clique_size=clique_size)
        created.extend(n.metadata.name for n in nodes if n.metadata and n.metadata.name)
        return nodes

    yield make
    for name in created:
        with contextlib.suppress(ApiError):
            kube.delete(Node, name)


@pytest.fixture(scope="module")
def manager(
    control_plane: ControlPlane, kwok: Kwok, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagerProcess]:
    yield from running_manager(control_plane, tmp_path_factory.mktemp("manager"))


@pytest.fixture(scope="session")
def node_guard(control_plane: ControlPlane) -> Iterator[NodeGuard]:
    guard = NodeGuard(control_plane.client).start()
    yield guard
    guard.stop()


@pytest.fixture(scope="session")
def full_cluster() -> Iterator[Cluster]:
    with Cluster() as cluster:
        yield cluster


@pytest.fixture
def history(control_plane: ControlPlane) -> Iterator[Recorder]:
    """``history(resource, name, namespace)``: a started :class:`History`, stopped after the test."""
    started: list[History] = []

    def record(resource: object, name: str, namespace: str | None = None) -> History:
        started.append(History(control_plane.client, resource, name, namespace).start())
        return started[-1]

    yield record
    for recording in started:
        recording.stop()


__all__ = [
    "async_kube",
    "control_plane",
    "full_cluster",
    "gpu_nodes",
    "history",
    "kube",
    "kwok",
    "manager",
    "namespace",
    "node_guard",
]
