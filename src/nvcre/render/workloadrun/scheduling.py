"""Gang scheduling: the resolved intent and where it lands on the generated runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvcre.api.v1alpha1.common import GangSchedulerSpec
from nvcre.api.v1alpha1.constants import Default


@dataclass(frozen=True)
class GangIntent:
    """``gangScheduler`` with its defaults filled in, as persisted on ``Workflow.spec.gangScheduler``."""

    scheduler_name: str
    queue: str
    queue_label_key: str

    def to_dict(self) -> dict[str, str]:
        return {
            "schedulerName": self.scheduler_name,
            "queue": self.queue,
            "queueLabelKey": self.queue_label_key,
        }

    @property
    def label(self) -> dict[str, str]:
        return {self.queue_label_key: self.queue}


def resolve_gang(spec: GangSchedulerSpec | None) -> GangIntent | None:
    if spec is None:
        return None
    return GangIntent(
        scheduler_name=spec.scheduler_name,
        queue=spec.queue or Default.QUEUE,
        queue_label_key=spec.queue_label_key or Default.QUEUE_LABEL_KEY,
    )


def stamp_replicated_job(replicated_job: dict[str, Any], gang: GangIntent | None) -> None:
    """Queue label on the Job template and pod template metadata, scheduler name on the pod spec."""
    if gang is None:
        return
    job_template = replicated_job["template"]
    job_template.setdefault("metadata", {}).setdefault("labels", {}).update(gang.label)
    pod_template = job_template["spec"]["template"]
    pod_template.setdefault("metadata", {}).setdefault("labels", {}).update(gang.label)
    pod_template["spec"]["schedulerName"] = gang.scheduler_name
