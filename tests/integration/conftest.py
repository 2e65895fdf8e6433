"""Integration tests run against a real etcd + kube-apiserver (+ kwok); see docs/testing.md."""

from collections.abc import Iterator

import pytest

from nvcre.testing.fixtures import *  # noqa: F403 - re-export the fixtures to pytest
from nvcre.testing.nodeguard import NodeGuard


@pytest.fixture(scope="session", autouse=True)
def _watch_nodes(node_guard: NodeGuard) -> Iterator[None]:
    """Every Node is watched from the first integration test on; test_zz_nodes_untouched checks it."""
    yield
