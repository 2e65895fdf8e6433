"""A Job whose workload runs ``dcgmi diag`` is judged by the report it prints, not by dcgmi's
exit status alone (pure).

``dcgmi diag`` exits 0 for a failed test that carries no error entry (a CPU entity's, for one:
:mod:`nvcre.measure.dcgm` cites DCGM's code), and no exit status names the test or the GPU. So
such a Job succeeds only when its pod's log holds a whole report in which no test failed; when
its workload failed, the failure says which tests failed on which GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from nvcre.api.v1alpha1.constants import JobReason
from nvcre.decide.job.next_step import Fail, Succeed
from nvcre.measure.dcgm import SKIP, Diagnosis, read_diag, run_level, summary
from nvcre.measure.thresholds import Verdict

DEFAULT_LEVEL: Final = 1
"""dcgmi diag's run level when ``--run`` is not given."""

UNREAD: Final = "nothing shows that its GPUs passed"
NO_REPORT: Final = "no dcgmi diag output (no JSON report, result table or dcgmi error) in the log"
ONLY_SOFTWARE: Final = "no test beyond the software checks ran"
SOFTWARE: Final = "software"


def diag_level(job_spec: Mapping[str, Any]) -> int | None:
    """The run level of the ``dcgmi diag`` the Job's workload runs (its trainer's command and
    args, as the catalog's diagnostics render them); None when it runs something else."""
    trainer = ((job_spec.get("workload") or {}).get("trainJob") or {}).get("trainer") or {}
    argv = [str(word) for word in (*(trainer.get("command") or ()), *(trainer.get("args") or ()))]
    if len(argv) < 2 or argv[0].rsplit("/", 1)[-1] != "dcgmi" or argv[1] != "diag":
        return None
    level = run_level(argv[2:])
    return DEFAULT_LEVEL if level is None else level


def verdict(diagnosis: Diagnosis | None) -> Verdict:
    """The one rule for a ``dcgmi diag`` report, the Job's and ``nvcrectl analyze dcgm``'s: it
    passes only when it was read whole, has results, no test failed and, when it lists tests
    beyond the software checks, at least one of those did not skip (a level that skipped every
    test it stands for verified nothing). Failed tests: ``WorkloadFailed``; anything else short of
    a pass: ``MeasurementUnavailable`` (no data is not a pass)."""
    if diagnosis is None:
        return Verdict(True, JobReason.MEASUREMENT_UNAVAILABLE, NO_REPORT)
    text = summary(diagnosis)
    if diagnosis.failed:
        return Verdict(True, JobReason.WORKLOAD_FAILED, text)
    if not diagnosis.passed:
        return Verdict(True, JobReason.MEASUREMENT_UNAVAILABLE, text)
    beyond = [r for r in diagnosis.results if r.test.casefold() != SOFTWARE]
    if beyond and all(r.status == SKIP for r in beyond):
        return Verdict(True, JobReason.MEASUREMENT_UNAVAILABLE, f"{text}: {ONLY_SOFTWARE}")
    return Verdict(False, JobReason.WORKLOAD_COMPLETED, text)


def succeeded(decision: Succeed, log: str, level: int, *, unreadable: str = "") -> Succeed | Fail:
    """The Job's end once its workload completed (:func:`verdict` of its pod's log): Succeeded
    with the report's summary, else Failed naming the failed tests, or saying that the report
    shows no pass (``unreadable``: why the pod's log could not be read)."""
    if unreadable:
        return Fail(f"{decision.message}, but its pod's log could not be read ({unreadable}): {UNREAD}")
    judged = verdict(read_diag(log, level=level))
    if not judged.failed:
        return Succeed(f"{decision.message}; {judged.message}")
    if judged.reason == JobReason.WORKLOAD_FAILED:
        return Fail(f"{judged.message} (dcgmi diag exited 0)")
    return Fail(f"{decision.message}, but {judged.message}: {UNREAD}", cause=judged.reason)


def failed(decision: Fail, tail: str, level: int) -> Fail:
    """A failed workload's failure, with the tests its log tail shows failed, if it shows any."""
    diagnosis = read_diag(tail, level=level)
    if diagnosis is None or not diagnosis.failed:
        return decision
    return replace(decision, message=f"{decision.message}: {summary(diagnosis)}")
