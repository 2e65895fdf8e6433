"""The ResourcesReleased decision (nvcre.decide.release) on plain data."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from typing import Any

from nvcre.conditions import set_in_status
from nvcre.decide.release import (
    Candidates,
    Leftover,
    Release,
    combine,
    decide,
    leftovers_of,
    proven,
    summary,
    to_delete,
)
from nvcre.report.html import render_html
from nvcre.report.jsonreport import to_json
from nvcre.report.junit import render_junit
from nvcre.report.model import Release as ReportRelease
from nvcre.report.model import Report
from nvcre.report.text import render_text
from nvcre.testing.builders import Job
from nvcre.testing.workloads import create_chain, training_runtime
from nvcre.workload import trainjob

ENDED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def pods(*names: str, **more: Any) -> list[Leftover]:
    return [Leftover("Pod", "team", n, **more) for n in names]


def test_nothing_left_is_released() -> None:
    assert decide(ENDED, [], ENDED + timedelta(hours=2)) == Release(
        "True", "Released", "No pod, JobSet, TrainJob or Job-scoped TrainingRuntime copy of the run remains"
    )


def test_releasing_counts_by_kind_and_names_the_first_few() -> None:
    left = [
        *pods("w-3", "w-1", "w-0", "w-2", "w-4"),
        Leftover("TrainJob", "team", "run-job-workload"),
        Leftover("JobSet", "team", "run-job-workload"),
    ]
    decided = decide(ENDED, left, ENDED + timedelta(seconds=30), timeout=600)
    assert (decided.status, decided.reason) == ("False", "Releasing")
    assert decided.message == (
        "7 of the run's objects remain: 5 Pods (w-0, w-1, w-2 and 2 more), 1 JobSet (run-job-workload), "
        "1 TrainJob (run-job-workload)"
    )
    assert decided.recheck_after == 5.0
    assert not decided.timed_out


def test_a_release_looks_again_at_its_timeout() -> None:
    assert decide(ENDED, pods("w-0"), ENDED + timedelta(seconds=598), timeout=600).recheck_after == 2.0


def test_timeout_names_what_is_stuck_and_its_finalizer() -> None:
    left = [*pods("a-0"), *pods("b-0", finalizers=("example.com/hold",), deleting=True)]
    decided = decide(ENDED, left, ENDED + timedelta(minutes=10), timeout=600)
    assert (decided.status, decided.reason, decided.timed_out) == ("False", "ReleaseTimedOut", True)
    assert decided.message == (
        "Pod team/b-0 still exists 10m0s after the run ended; it has finalizer example.com/hold; "
        "2 of the run's objects remain: 2 Pods (a-0, b-0)"
    )


def test_timeout_without_finalizer_names_the_first_in_order() -> None:
    left = [Leftover("TrainJob", "team", "t"), Leftover("JobSet", "team", "t")]
    decided = decide(ENDED, left, ENDED + timedelta(minutes=11), timeout=60)
    assert decided.message.startswith("JobSet team/t still exists 1m0s after the run ended; 2 of")


def test_only_workloads_and_copies_not_yet_going_are_deleted() -> None:
    left = [
        *pods("p"),
        Leftover("JobSet", "team", "j"),
        Leftover("TrainJob", "team", "t"),
        Leftover("TrainJob", "team", "going", deleting=True),
        Leftover("TrainingRuntime", "team", "copy"),
    ]
    assert [x.name for x in to_delete(left)] == ["t", "copy"]


def workflow(status: str | None = None, reason: str = "", message: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": "w"}, "status": {}}
    if status is not None:
        set_in_status(out["status"], "ResourcesReleased", status, reason, message, 1, ENDED)  # type: ignore[arg-type]
    return out


def test_one_workflow_is_mirrored() -> None:
    assert combine(
        {"w": workflow("False", "Releasing", "1 of the run's objects remain: 1 Pod (p)")}
    ) == Release("False", "Releasing", "1 of the run's objects remain: 1 Pod (p)")


def test_owners_wait_for_every_workflow_to_decide() -> None:
    assert combine({"a": workflow("True", "Released", "none"), "b": workflow()}) is None
    assert combine({"a": None, "b": workflow()}) is None


def test_a_run_that_said_released_stays_released() -> None:
    assert proven(workflow("True", "Released", "none"))
    assert not proven(workflow("False", "Releasing", "1 of the run's objects remain: 1 Pod (p)"))
    assert not proven(workflow())


def test_a_run_that_made_no_workflow_holds_nothing() -> None:
    assert combine({}) == Release("True", "Released", "No Workflow was created: the run holds nothing")


def test_a_workflow_deleted_before_it_decided_leaves_the_release_unproven() -> None:
    assert combine({"a": None}) == Release(
        "Unknown",
        "WorkflowDeleted",
        "Workflow a was deleted before it proved the run's pods gone (a Workflow goes once its Jobs "
        "have; a Job once its pods stopped or 5m0s passed); pods of the run, labelled "
        "nvcre.nvidia.com/job, may remain",
    )
    decided = combine({"a": workflow("True", "Released", "x"), "b": None, "c": None})
    assert decided is not None and (decided.status, decided.reason) == ("Unknown", "WorkflowDeleted")
    assert decided.message.startswith("Workflows b, c were deleted before they proved")


def test_a_timeout_wins_and_names_its_workflow() -> None:
    decided = combine(
        {
            "a": workflow("True", "Released", "none"),
            "b": workflow("False", "Releasing", "1 of the run's objects remain: 1 Pod (p)"),
            "c": workflow("False", "ReleaseTimedOut", "Pod team/q still exists"),
            "gone": None,
        }
    )
    assert decided == Release("False", "ReleaseTimedOut", "Workflow c: Pod team/q still exists")


def test_all_released() -> None:
    decided = combine({"a": workflow("True", "Released", "x"), "b": workflow("True", "Released", "x")})
    assert decided is not None and (decided.status, decided.reason) == ("True", "Released")


def test_summary_pluralises() -> None:
    assert summary([Leftover("TrainingRuntime", "n", "c"), Leftover("TrainingRuntime", "n", "d")]) == (
        "2 TrainingRuntimes (c, d)"
    )


STUCK = "Pod team/w-0 still exists 10m0s after the run ended; it has finalizer example.com/hold; 1 of the run's objects remain: 1 Pod (w-0)"


def report(release: ReportRelease | None) -> Report:
    return Report(kind="WorkloadRun", name="r", namespace="team", result="PASSED", release=release)


def test_the_report_says_whether_the_run_released_its_resources() -> None:
    stuck = report(ReportRelease(False, "ReleaseTimedOut", STUCK))
    text = render_text(stuck)
    summary = [line.strip("│ ") for line in text[text.index("Summary") :].splitlines()]
    assert summary[summary.index("Released:     no (ReleaseTimedOut)") + 1 :][:3] == [
        "Pod team/w-0 still exists 10m0s after the run",
        "ended; it has finalizer example.com/hold; 1 of",
        "the run's objects remain: 1 Pod (w-0)",
    ]
    assert to_json(stuck)["resourcesReleased"] == {
        "released": False,
        "reason": "ReleaseTimedOut",
        "message": STUCK,
    }
    junit = ET.fromstring(render_junit([stuck]))
    properties = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert properties["resourcesReleased"] == f"no (ReleaseTimedOut): {STUCK}"
    assert f"Resources released: no (ReleaseTimedOut): {STUCK}" in render_html([stuck]).replace("&#39;", "'")

    done = report(ReportRelease(True, "Released", "none remains"))
    assert "│  Released:     yes" in render_text(done)
    assert to_json(done)["resourcesReleased"]["released"] is True
    assert "Released" not in render_text(report(None)), "a run that has not said has no line"


def test_the_run_is_what_nvcre_labels_and_its_trainjob_controls() -> None:
    """A Job's pods and TrainJob by the nvcre.nvidia.com/job label, its JobSet by the name and
    controller Trainer gives it; another Job's pods and a JobSet of that name its TrainJob does not
    control (someone else's) are not the run's."""
    made: list[dict[str, Any]] = []

    def create(obj: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(obj)
        stored["metadata"]["uid"] = f"uid-{len(made)}"
        made.append(stored)
        return stored

    def chain(name: str) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        job = Job(name).namespace("team").obj()
        job["metadata"]["uid"] = f"{name}-uid"
        workload = create(trainjob.build(job))
        pods = create_chain(create, workload, training_runtime("rt"))
        return job, workload, pods

    job, workload, pods = chain("a")
    _, _, others = chain("b")
    jobset = next(o for o in made if o["kind"] == "JobSet" and o["metadata"]["name"] == "a-workload")
    found = Candidates(pods=[*pods, *others], trainjob=workload, jobset=jobset)
    assert sorted((x.kind, x.name) for x in leftovers_of(job, found)) == [
        ("JobSet", "a-workload"),
        ("Pod", "a-workload-node-0-0"),
        ("TrainJob", "a-workload"),
    ]
    foreign = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "a-workload"}}
    assert leftovers_of(job, Candidates(jobset=foreign)) == []
