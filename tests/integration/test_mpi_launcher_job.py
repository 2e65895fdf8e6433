"""The MPI launcher's Job, as rendered under a gang scheduler, is one the real API server takes.

A ``podFailurePolicy`` is refused unless the pod is ``restartPolicy: Never`` and every
``containerName`` it names is a container of the pod; JobSet creates the launcher's batch Job
from this template (with the SSH and hostfile volumes Trainer adds), so a template the API
server refuses would fail every group.
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.batch_v1 import Job

from tests.unit.test_mpi_launcher_retries import FAIL_ON_MPIRUN, GANG, RENDERS, _launcher


@pytest.mark.parametrize("render", RENDERS)
def test_the_gang_launcher_job_is_accepted_with_its_retries(
    kube: Client, namespace: str, render: Any
) -> None:
    spec = _launcher(render(GANG))
    # The volumes Kubeflow Trainer adds to the launcher before JobSet makes its Job.
    spec["template"]["spec"]["volumes"] += [
        {"name": "mpi-ssh-auth", "secret": {"secretName": "ssh-keys"}},
        {"name": "mpi-hostfile", "configMap": {"name": "hostfile"}},
    ]
    created = kube.create(
        Job.from_dict(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "launcher"}, "spec": spec}
        ),
        namespace=namespace,
    )
    job = kube.get(Job, created.metadata.name, namespace=namespace).to_dict()
    assert job["spec"]["backoffLimit"] == 6
    assert job["spec"]["podFailurePolicy"] == FAIL_ON_MPIRUN
