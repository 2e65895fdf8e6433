"""Gang scheduling on the generated runtime: where the resolved intent lands.

The intent itself (``GangIntent``), the workload-label merge and the post-override contract
check live in ``nvcre.render.gang``; this module only stamps the runtime the build generates.
"""

from __future__ import annotations

from typing import Any

from nvcre.render.gang import GangIntent


def stamp_replicated_job(replicated_job: dict[str, Any], gang: GangIntent | None) -> None:
    """Queue label on the Job template and pod template metadata, scheduler name on the pod spec."""
    if gang is None:
        return
    label = {gang.queue_label_key: gang.queue}
    job_template = replicated_job["template"]
    job_template.setdefault("metadata", {}).setdefault("labels", {}).update(label)
    pod_template = job_template["spec"]["template"]
    pod_template.setdefault("metadata", {}).setdefault("labels", {}).update(label)
    pod_template["spec"]["schedulerName"] = gang.scheduler_name
