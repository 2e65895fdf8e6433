"""A Certification waits for matching nodes, then fails once the wait is over (§2.3, §13.8).

The wait is five minutes by default; this module runs its own manager with
``--node-discovery-timeout=4`` (the shared ``manager`` fixture is not requested here, so no
other manager runs while this module does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client

from nvcre import resources
from nvcre.testing.builders import Certification, category
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.history import Recorder
from nvcre.testing.inspect import true_condition, wait_true
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess, running_manager
from nvcre.testing.workloads import POOL_LABEL, pool_name


@pytest.fixture(scope="module")
def impatient_manager(
    control_plane: ControlPlane, kwok: Kwok, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagerProcess]:
    yield from running_manager(
        control_plane, tmp_path_factory.mktemp("impatient"), "--node-discovery-timeout=4", name="impatient"
    )


def test_no_node_within_the_wait_fails_the_certification(
    kube: Client, namespace: str, impatient_manager: Any, history: Recorder
) -> None:
    pool = pool_name()
    cert = Certification("nobody").namespace(namespace).pool(pool).categories(category()).obj()
    recording = history(resources.Certification, "nobody", namespace)
    kube.create(resources.Certification.from_dict(cert))
    failed = wait_true(kube, resources.Certification, "nobody", namespace, "Failed", timeout=30)
    # The wait is only 4 s: a loaded machine may see it end before a poll sees it, so every
    # version written on the way is read back.
    seen = [true_condition(version) for version in recording.versions]
    waiting = next((c for c in seen if c is not None and c[0] == "InProgress"), None)
    assert waiting is not None and waiting[1] == "WaitingForNodes", seen
    assert re.fullmatch(
        rf"No schedulable nodes match {POOL_LABEL}={pool}; retrying for up to [0-4]s more\. "
        r"Nodes that are cordoned or unschedulable do not count\.",
        waiting[2],
    ), waiting[2]
    assert true_condition(failed) == (
        "Failed",
        "WorkflowValidationFailed",
        "communication/nccl-all-reduce: no nodes match target",
    )
    assert [s["status"] for s in failed["status"]["categoryStatuses"]] == ["Pending"]
    assert not list(kube.list(resources.Workflow, namespace=namespace))
