"""Writing a Job's validation verdict (decided by :mod:`nvcre.measure.verdicts`): the
``ValidationFailed`` condition, then its count and event.

Shared by the Job controller (thresholds and data checks) and the Workflow controller (outliers
against the fleet), so a verdict reads the same whoever reached it; a WorkloadRun's condition,
mirrored from its Workflow's, is set the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType
from nvcre.conditions import set_in_status
from nvcre.controllers import metrics
from nvcre.controllers.context import Context
from nvcre.objects import Obj


def set_validation(
    status: dict[str, Any], job: Obj, failed: bool, reason: str, message: str, *, at: datetime
) -> None:
    """Set the ``ValidationFailed`` condition of ``job`` (or any object judged) in ``status`` (in place,
    inside a status change), as of ``at``."""
    set_in_status(
        status,
        ConditionType.VALIDATION_FAILED,
        ConditionStatus.TRUE if failed else ConditionStatus.FALSE,
        reason,
        message,
        job["metadata"].get("generation"),
        at,
    )


async def announce(ctx: Context, job: Obj, failed: bool, reason: str, message: str) -> None:
    """After the verdict's write: count it and emit its event (a warning when it fails the Job)."""
    metrics.count_verdict(reason, failed)
    if failed:
        await ctx.recorder.warning(job, reason, message)
    else:
        await ctx.recorder.normal(job, reason, message)
