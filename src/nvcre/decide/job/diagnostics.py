"""A Job whose workload runs ``dcgmi diag`` is judged by the report it prints, not by dcgmi's
exit status alone (pure).

``dcgmi diag`` exits 0 for a failed test that carries no error entry (a CPU entity's, for one:
:mod:`nvcre.measure.dcgm` cites DCGM's code), and no exit status names the test or the GPU. So
such a Job succeeds only when its pod's log holds a whole report in which no test failed; when
its workload failed, the failure says which tests failed on which GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from nvcre.decide.job.next_step import Fail, Succeed
from nvcre.measure.dcgm import read_diag, summary

DEFAULT_LEVEL: Final = 1
"""dcgmi diag's run level when ``--run`` is not given."""

UNREAD: Final = "nothing shows that its GPUs passed"


def diag_level(job_spec: Mapping[str, Any]) -> int | None:
    """The run level of the ``dcgmi diag`` the Job's workload runs (its trainer's command and
    args, as the catalog's diagnostics render them); None when it runs something else."""
    trainer = ((job_spec.get("workload") or {}).get("trainJob") or {}).get("trainer") or {}
    argv = [str(word) for word in (*(trainer.get("command") or ()), *(trainer.get("args") or ()))]
    if len(argv) < 2 or argv[0].rsplit("/", 1)[-1] != "dcgmi" or argv[1] != "diag":
        return None
    return _run_level(argv[2:])


def _run_level(flags: Sequence[str]) -> int:
    for i, flag in enumerate(flags):
        value = flags[i + 1] if flag in ("-r", "--run") and i + 1 < len(flags) else None
        if flag.startswith("--run="):
            value = flag.removeprefix("--run=")
        if value is not None and value.isdecimal():
            return int(value)
    return DEFAULT_LEVEL


def succeeded(decision: Succeed, log: str, level: int, *, unreadable: str = "") -> Succeed | Fail:
    """The Job's end once its workload completed: Succeeded with the report's summary when the
    whole report passed; else Failed, naming the failed tests, or saying that no whole report
    was read (``unreadable``: why the pod's log could not be read)."""
    diagnosis = read_diag(log, level=level)
    if diagnosis is not None and diagnosis.passed:
        return Succeed(f"{decision.message}; {summary(diagnosis)}")
    if diagnosis is not None and diagnosis.failed:
        return Fail(f"{summary(diagnosis)} (dcgmi diag exited 0)")
    if unreadable:
        return Fail(f"{decision.message}, but its pod's log could not be read ({unreadable}): {UNREAD}")
    if diagnosis is None:
        return Fail(f"{decision.message}, but its pod's log holds no dcgmi diag report: {UNREAD}")
    return Fail(f"{decision.message}, but {summary(diagnosis)}: {UNREAD}")


def failed(decision: Fail, tail: str, level: int) -> Fail:
    """A failed workload's failure, with the tests its log tail shows failed, if it shows any."""
    diagnosis = read_diag(tail, level=level)
    if diagnosis is None or not diagnosis.failed:
        return decision
    return replace(decision, message=f"{decision.message}: {summary(diagnosis)}")
