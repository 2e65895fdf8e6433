"""Tests on the full workload chain: pods made by Trainer, JobSet and the Job controller, bound by
kube-scheduler to kwok GPU nodes. A control plane of their own (``full_cluster``); see
docs/testing.md."""

import pytest

from nvcre.testing.cluster import Cluster
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.fixtures import *  # noqa: F403 - re-export the fixtures to pytest
from nvcre.testing.kwok import Kwok


@pytest.fixture(scope="session")
def control_plane(full_cluster: Cluster) -> ControlPlane:
    return full_cluster.control_plane


@pytest.fixture(scope="session")
def kwok(full_cluster: Cluster) -> Kwok:
    return full_cluster.kwok
