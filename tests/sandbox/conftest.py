"""Tests on the full workload chain: pods made by Trainer, JobSet and the Job controller, bound by
kube-scheduler to kwok GPU nodes. A control plane of their own (``full_cluster``); see
docs/testing.md."""

import os
from collections.abc import Iterator

import pytest

from nvcre.testing import binaries as bins
from nvcre.testing.cluster import Cluster, EmptyCluster
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.fixtures import *  # noqa: F403 - re-export the fixtures to pytest
from nvcre.testing.kwok import Kwok


@pytest.fixture(scope="session")
def control_plane(full_cluster: Cluster) -> ControlPlane:
    return full_cluster.control_plane


@pytest.fixture(scope="session")
def kwok(full_cluster: Cluster) -> Kwok:
    return full_cluster.kwok


@pytest.fixture(scope="module")
def empty_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmptyCluster]:
    binaries = bins.ensure((*bins.REQUIRED, *bins.CHAIN, bins.HELM))
    work = tmp_path_factory.mktemp("helm")
    with Cluster(ControlPlane(binaries=binaries, crd_paths=[])) as cluster:
        env = {
            **os.environ,
            "KUBECONFIG": str(cluster.control_plane.kubeconfig_path),
            "NVCRE_HELM": str(binaries.path(bins.HELM)),
            "HELM_CACHE_HOME": str(work / "cache"),
            "HELM_CONFIG_HOME": str(work / "config"),
            "HELM_DATA_HOME": str(work / "data"),
        }
        yield EmptyCluster(cluster, env, work)
