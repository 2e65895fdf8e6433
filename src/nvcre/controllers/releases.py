"""Writing the ``ResourcesReleased`` condition (decided by :mod:`nvcre.decide.release`) on a
Workflow, WorkloadRun or Certification, with a Warning event when it turns ``ReleaseTimedOut``."""

from __future__ import annotations

from typing import Any

from nvcre.api.v1alpha1.constants import ConditionType, ReleaseReason
from nvcre.conditions import condition_of, set_in_status
from nvcre.controllers.context import Context
from nvcre.decide.release import Release
from nvcre.objects import Obj


async def write_release(ctx: Context, resource: Any, obj: Obj, release: Release) -> None:
    """Set the condition unless it already says the same; announce a new timeout."""
    before = condition_of(obj, ConditionType.RESOURCES_RELEASED) or {}
    if (before.get("status"), before.get("reason"), before.get("message")) == (
        release.status,
        release.reason,
        release.message,
    ):
        return

    def change(status: dict[str, Any]) -> None:
        set_in_status(
            status,
            ConditionType.RESOURCES_RELEASED,
            release.status,  # type: ignore[arg-type]
            release.reason,
            release.message,
            obj["metadata"].get("generation"),
            ctx.clock.now(),
        )

    written = await ctx.status.update(resource, obj, change)
    if written is not None and release.timed_out and before.get("reason") != ReleaseReason.RELEASE_TIMED_OUT:
        await ctx.recorder.warning(written, ReleaseReason.RELEASE_TIMED_OUT, release.message)
