"""Starting a Certification in integration tests and finding the Job its category's Workflow makes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube import Client

from nvcre import resources
from nvcre.naming import certification_workflow_name
from nvcre.testing.builders import Certification
from nvcre.testing.inspect import jobs_of
from nvcre.testing.waiting import wait_for


def start_category(kube: Client, namespace: str, name: str, pool: str, entry: Mapping[str, Any]) -> str:
    """Create the Certification ``name`` of the one category ``entry`` on ``pool`` (missing data
    allowed: no pod writes a log here) and return the one Job its category's Workflow makes."""
    cert = Certification(name).namespace(namespace).pool(pool).allow_missing_data().categories(entry)
    kube.create(resources.Certification.from_dict(cert.obj()))
    workflow = certification_workflow_name(name, entry["domain"], entry["variant"])
    (job,) = wait_for(
        lambda: sorted(jobs_of(kube, namespace, workflow)) or None, 60, what=f"{workflow}'s Job"
    )
    return str(job)
