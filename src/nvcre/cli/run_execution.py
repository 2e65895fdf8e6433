"""The shell of ``workloadrun run`` and ``certification run`` (cli.md 4.2, 5.1).

Create the namespace, the workload pull Secret and the run; with ``--wait`` follow it (a poll
every second of the run, its Workflows and their Jobs, each selected by the label nvcre puts on
it, turned into a :class:`~nvcre.orchestration.progress.Snapshot` and shown live, or as
``[watch]`` lines), then print the report (built from the poll that saw the run end, plus its
measurements and node-result ConfigMaps), write the results files, clean up what the run
created when asked.

The registry password lives in one :class:`Registry` (not in its repr), goes to the API server
only inside the Secret's data, and is scrubbed from any error message.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType, Label, ReleaseReason
from nvcre.cli import connection
from nvcre.cli.common import UserError
from nvcre.conditions import condition_of
from nvcre.durations import format_duration, parse_duration
from nvcre.orchestration import progress

if TYPE_CHECKING:
    from lightkube import Client

    from nvcre.orchestration.progress import Snapshot

POLL_SECONDS: Final = 1.0
HEARTBEAT_SECONDS: Final = 15.0
CLEANUP_WAIT_SECONDS: Final = 300.0
RELEASE_WAIT_SECONDS: Final = 660.0
"""How long ``--cleanup`` waits for an ended run's ``ResourcesReleased``: the manager's default
``--release-timeout`` (after which the run says ``ReleaseTimedOut``) and a minute more."""
SECRET_TYPE: Final = "kubernetes.io/dockerconfigjson"
MANAGED_BY_NVCRECTL: Final = {Label.MANAGED_BY: "nvcrectl"}
REGISTRY_FLAGS_MESSAGE: Final = (
    "--workload-registry, --workload-registry-username, and --workload-registry-password "
    "must all be set together and non-empty"
)


@dataclass(frozen=True)
class Registry:
    """A workload registry's credentials (``--workload-registry*``)."""

    server: str
    username: str
    password: str = field(repr=False)

    def docker_config(self) -> bytes:
        """The ``.dockerconfigjson`` of a docker-registry Secret."""
        auth = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        entry = {"username": self.username, "password": self.password, "auth": auth}
        return json.dumps({"auths": {self.server: entry}}).encode()

    def scrub(self, text: str) -> str:
        return text.replace(self.password, "***") if self.password else text


def registry_from_flags(
    server: str, username: str, password: str, password_stdin: bool, read_stdin: Callable[[], str]
) -> Registry | None:
    """The registry flags, all or none; ``--workload-registry-password-stdin`` reads the password."""
    if password_stdin:
        if password:
            raise UserError(
                "--workload-registry-password and --workload-registry-password-stdin are mutually exclusive"
            )
        password = read_stdin().rstrip("\r\n")
        if not password:
            raise UserError("--workload-registry-password-stdin: no password on stdin")
    given = [bool(server), bool(username), bool(password)]
    if not any(given):
        return None
    if not all(given):
        raise UserError(REGISTRY_FLAGS_MESSAGE)
    return Registry(server, username, password)


def parse_timeout(text: str | None, wait: bool) -> float | None:
    """``--timeout`` in seconds: only with ``--wait``, and at least a second (a shorter wait
    cannot see a run start, let alone end)."""
    if text is None:
        return None
    if not wait:
        raise UserError("--timeout is only valid with --wait")
    try:
        ns = parse_duration(text)
    except ValueError as error:
        raise UserError(f'invalid --timeout "{text}": a duration such as 30m, 1h30m or 90s') from error
    if ns < 1_000_000_000:
        raise UserError(f'invalid --timeout "{text}": must be at least 1s')
    return ns / 1e9


def duration_text(seconds: float) -> str:
    """Go's form of a duration (``30m0s``, ``1s``)."""
    return format_duration(round(seconds * 1e9))


def generated_name() -> str:
    """``nvcrectl-<timestamp>``: the name and namespace of a run that names neither."""
    return "nvcrectl-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def note(message: str = "") -> None:
    click.echo(message, err=True)


@dataclass(frozen=True)
class RunKind:
    """What differs between following a WorkloadRun and a Certification."""

    name: str
    """``WorkloadRun`` or ``Certification``."""
    resource: Any
    label: str
    """The label naming the run on its Workflows."""
    snapshot: Callable[[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]], Snapshot]


def workloadrun_kind() -> RunKind:
    from nvcre import resources

    return RunKind("WorkloadRun", resources.WorkloadRun, Label.WORKLOAD_RUN, progress.workloadrun_snapshot)


def certification_kind() -> RunKind:
    from nvcre import resources

    return RunKind(
        "Certification", resources.Certification, Label.CERTIFICATION, progress.certification_snapshot
    )


@dataclass
class Created:
    """What this invocation created (and so what ``--cleanup`` deletes)."""

    namespace: bool = False
    run: bool = False


def ensure_namespace(kube: Client, namespace: str) -> bool:
    """Create ``namespace`` if missing (labelled managed-by nvcrectl); whether it was created."""
    from lightkube.core.exceptions import ApiError
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Namespace

    try:
        if connection.get_or_none(kube, Namespace, namespace) is not None:
            return False
    except ApiError as error:
        raise UserError(f"get namespace {namespace}: {connection.api_error(error)}") from error
    except Exception as error:
        raise UserError(f"cannot reach the cluster: {connection.api_error(error)}") from error
    note(f"[namespace] Creating namespace {namespace}...")
    try:
        kube.create(Namespace(metadata=ObjectMeta(name=namespace, labels=dict(MANAGED_BY_NVCRECTL))))
    except ApiError as error:
        if error.status.code == 409:
            return False
        raise UserError(f"create namespace {namespace}: {connection.api_error(error)}") from error
    return True


def create_pull_secret(kube: Client, name: str, namespace: str, registry: Registry) -> bool:
    """Create (or refresh) the docker-registry Secret ``name``; whether this call created it."""
    from lightkube.core.exceptions import ApiError
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Secret

    data = {".dockerconfigjson": base64.b64encode(registry.docker_config()).decode()}
    secret = Secret(
        metadata=ObjectMeta(name=name, namespace=namespace, labels=dict(MANAGED_BY_NVCRECTL)),
        type=SECRET_TYPE,
        data=data,
    )
    try:
        kube.create(secret)
        created = True
    except ApiError as error:
        if error.status.code != 409:
            raise UserError(registry.scrub(f"create secret {name}: {connection.api_error(error)}")) from None
        try:
            existing = kube.get(Secret, name, namespace=namespace)
            if existing.type != SECRET_TYPE:
                raise UserError(
                    f'secret "{name}" already exists with type "{existing.type}" '
                    f'(want "{SECRET_TYPE}"): delete it manually and retry'
                )
            kube.patch(Secret, name, {"data": data}, namespace=namespace)
        except ApiError as again:
            raise UserError(registry.scrub(f"update secret {name}: {connection.api_error(again)}")) from None
        created = False
    except Exception as error:  # transport errors: never let the request body into the message
        raise UserError(registry.scrub(f"create secret {name}: {type(error).__name__}")) from None
    note(f'Created image pull secret "{name}" in namespace {namespace}.')
    return created


def add_pull_secret(document: dict[str, Any], secret: str) -> None:
    """Append ``secret`` to the run's ``spec.imagePullSecrets`` (once)."""
    secrets: list[dict[str, str]] = document["spec"].setdefault("imagePullSecrets", [])
    if all(s.get("name") != secret for s in secrets):
        secrets.append({"name": secret})


def own_secret(kube: Client, secret: str, namespace: str, run: Any) -> None:
    """Make the run the Secret's owner, so that deleting the run collects it (a warning on failure)."""
    from lightkube.resources.core_v1 import Secret

    meta = run.metadata
    reference = {
        "apiVersion": run.apiVersion,
        "kind": run.kind,
        "name": meta.name,
        "uid": meta.uid,
    }
    try:
        kube.patch(Secret, secret, {"metadata": {"ownerReferences": [reference]}}, namespace=namespace)
    except Exception as error:
        note(f"Warning: could not set the owner of secret {secret}: {connection.api_error(error)}")


def create_run(kube: Client, kind: RunKind, document: dict[str, Any]) -> Any:
    from lightkube.core.exceptions import ApiError

    name = document["metadata"]["name"]
    try:
        return kube.create(kind.resource.from_dict(document))
    except ApiError as error:
        if error.status.code == 409:
            raise UserError(
                f'{kind.name.lower()} "{name}" already exists in namespace '
                f'"{document["metadata"]["namespace"]}"'
            ) from None
        raise UserError(f"create {kind.name.lower()}: {connection.api_error(error)}") from None


@dataclass(frozen=True)
class Poll:
    """One read of the run, its Workflows (by the run's label) and their Jobs (by the Workflow
    label), and the progress they show."""

    run: dict[str, Any]
    workflows: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    snapshot: Snapshot


def read_poll(kube: Client, kind: RunKind, name: str, namespace: str) -> Poll:
    """One read of the run, its Workflows and their Jobs: three requests, none of them listing
    what else the namespace holds."""
    from nvcre import resources
    from nvcre.report.linking import label_values

    run = kube.get(kind.resource, name, namespace=namespace).to_dict()
    workflows = [
        w.to_dict() for w in kube.list(resources.Workflow, namespace=namespace, labels={kind.label: name})
    ]
    names = label_values(str(w["metadata"]["name"]) for w in workflows)
    jobs = (
        [j.to_dict() for j in kube.list(resources.Job, namespace=namespace, labels={Label.WORKFLOW: names})]
        if names
        else []
    )
    return Poll(run, workflows, jobs, kind.snapshot(run, workflows, jobs))


class View:
    """Shows snapshots: a rich live table on a terminal, else timestamped ``[watch]`` lines."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.last: Snapshot | None = None
        self.last_print = 0.0
        self._live: Any = None
        self._final = ""

    @contextmanager
    def active(self) -> Iterator[View]:
        if not self.live:
            yield self
            return
        from rich.console import Console
        from rich.live import Live

        with Live(console=Console(stderr=True), refresh_per_second=4, transient=False) as live:
            self._live = live
            try:
                yield self
            finally:
                self._live = None
        if self._final:  # below the table, once it stopped refreshing
            note(self._final)

    def _plain(self, lines: list[str]) -> None:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        for line in lines:
            note(f"{stamp} {line}")

    def show(self, snapshot: Snapshot, elapsed: float) -> None:
        if self._live is not None:
            self._live.update(self._table(snapshot, elapsed))
        else:
            lines = progress.change_lines(self.last, snapshot, elapsed)
            if not lines and elapsed - self.last_print >= HEARTBEAT_SECONDS:
                lines = progress.heartbeat_lines(snapshot, elapsed)
            if lines:
                self.last_print = elapsed
                self._plain(lines)
        self.last = snapshot

    def waiting(self, elapsed: float) -> None:
        """Nothing read yet (the run is not readable)."""
        if self._live is None and elapsed - self.last_print >= HEARTBEAT_SECONDS:
            self.last_print = elapsed
            self._plain([f"[watch] Waiting for status... ({progress.elapsed_text(elapsed)})"])

    def done(self, snapshot: Snapshot, elapsed: float) -> None:
        line = progress.final_line(snapshot, elapsed)
        if self._live is not None:
            self._live.update(self._table(snapshot, elapsed))
            self._final = line
        else:
            self.show(snapshot, elapsed)
            self._plain([line])

    @staticmethod
    def _table(snapshot: Snapshot, elapsed: float) -> Any:
        from rich.table import Table
        from rich.text import Text

        reason = f" {snapshot.reason}" if snapshot.reason else ""
        table = Table(
            title_style="bold",
            title=Text(
                f"{snapshot.kind} {snapshot.namespace}/{snapshot.name}: {snapshot.phase}{reason}"
                f"  ({progress.elapsed_text(elapsed)})"
            ),
            title_justify="left",
        )
        table.add_column("CATEGORY / GROUP")
        table.add_column("STATE")
        for column in ("RUNNING", "SUCCEEDED", "FAILED"):
            table.add_column(column, justify="right")
        table.add_column("REASON")
        for row in progress.rows(snapshot):
            table.add_row(
                row.name, row.state, str(row.running), str(row.succeeded), str(row.failed), row.reason
            )
        return table


@dataclass(frozen=True)
class Outcome:
    snapshot: Snapshot | None
    elapsed: float
    timed_out: bool = False
    ended: Poll | None = None
    """The read that saw the run end (the report is built from it)."""


def follow(kube: Client, kind: RunKind, name: str, namespace: str, timeout: float, live: bool) -> Outcome:
    """Poll the run until it is terminal or ``timeout`` seconds pass (KeyboardInterrupt propagates)."""
    start = time.monotonic()
    view = View(live)
    snapshot: Snapshot | None = None
    with view.active():
        while True:
            elapsed = time.monotonic() - start
            try:
                poll = read_poll(kube, kind, name, namespace)
            except Exception as error:  # a blip of the API server: keep waiting, say so once
                if view.last is None:
                    view.waiting(elapsed)
                else:
                    note(f"[watch] Warning: {connection.api_error(error)}")
            else:
                snapshot = poll.snapshot
                if snapshot.terminal:
                    view.done(snapshot, elapsed)
                    return Outcome(snapshot, elapsed, ended=poll)
                view.show(snapshot, elapsed)
            if elapsed >= timeout:
                return Outcome(snapshot, elapsed, timed_out=True)
            time.sleep(min(POLL_SECONDS, max(0.0, timeout - elapsed)))


def await_release(
    kube: Client, kind: RunKind, name: str, namespace: str, ended: Poll, wait: float = RELEASE_WAIT_SECONDS
) -> tuple[Poll, str | None]:
    """``--cleanup`` after the run ended: wait until its ``ResourcesReleased`` is True (its pods,
    JobSets, TrainJobs and runtime copies are gone), says ``ReleaseTimedOut`` or
    ``WorkflowDeleted`` (nothing can prove them gone), or ``wait``
    seconds pass. The read that saw it (the report is built from it) and, unless released, why
    not."""
    note("[cleanup] Waiting for the run's pods, JobSets, TrainJobs and runtime copies to go...")
    deadline = time.monotonic() + wait
    poll = ended
    while True:
        condition = condition_of(poll.run, ConditionType.RESOURCES_RELEASED) or {}
        if condition.get("status") == ConditionStatus.TRUE:
            note("[cleanup] Resources released.")
            return poll, None
        message = str(condition.get("message") or "")
        if condition.get("reason") == ReleaseReason.RELEASE_TIMED_OUT:
            return poll, f"{kind.name} {name}: resources not released: {message}"
        if condition.get("reason") == ReleaseReason.WORKFLOW_DELETED:
            return poll, f"{kind.name} {name}: resources not proven released: {message}"
        if time.monotonic() >= deadline:
            said = message or f"the {kind.name} never set ResourcesReleased"
            return poll, f"{kind.name} {name}: resources not released within {duration_text(wait)}: {said}"
        time.sleep(POLL_SECONDS)
        try:
            poll = read_poll(kube, kind, name, namespace)
        except Exception as error:  # a blip of the API server: keep waiting, say so
            note(f"[cleanup] Warning: {connection.api_error(error)}")


def follow_up(kind: RunKind, name: str, namespace: str) -> list[str]:
    """How to watch, re-report or stop a run this command leaves running."""
    lower = kind.name.lower()
    stop = (
        f"nvcrectl workloadrun cancel {name} -n {namespace}"
        if kind.name == "WorkloadRun"
        else f"kubectl delete certification {name} -n {namespace}"
    )
    return [
        f"The {kind.name} is still running in namespace {namespace}.",
        "Monitor its progress:",
        f"  kubectl get {lower} {name} -n {namespace} --watch",
        "Print an updated report (exits nonzero while still running):",
        f"  nvcrectl {lower} report {name} -n {namespace}",
        "Stop it:",
        f"  {stop}",
    ]


def _gone(kube: Client, resource: Any, name: str, namespace: str | None) -> bool:
    from lightkube.core.exceptions import ApiError

    try:
        return connection.get_or_none(kube, resource, name, namespace) is None
    except ApiError:
        return False


def _wait_gone(kube: Client, resource: Any, name: str, namespace: str | None) -> bool:
    deadline = time.monotonic() + CLEANUP_WAIT_SECONDS
    while not _gone(kube, resource, name, namespace):
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)
    return True


def cleanup(kube: Client, kind: RunKind, name: str, namespace: str, created: Created) -> None:
    """Delete what this invocation created: the run (waiting for its Workflows), then its namespace."""
    from lightkube.resources.core_v1 import Namespace

    from nvcre import resources

    warnings = False
    note("[cleanup] Cleaning up...")
    if created.run:
        note(f"[cleanup] Deleting {kind.name}...")
        try:
            kube.delete(kind.resource, name, namespace=namespace)
            workflows = [
                w.metadata.name
                for w in kube.list(resources.Workflow, namespace=namespace, labels={kind.label: name})
            ]
            gone = _wait_gone(kube, kind.resource, name, namespace)
            for workflow in workflows:
                gone = _wait_gone(kube, resources.Workflow, workflow, namespace) and gone
            if not gone:
                warnings = True
                note(f"  Warning: {kind.name} {name} still exists after {CLEANUP_WAIT_SECONDS:.0f}s")
        except Exception as error:
            warnings = True
            note(f"  Warning: delete {kind.name} {name}: {connection.api_error(error)}")
    if created.namespace:
        note(f"[cleanup] Deleting namespace {namespace}...")
        try:
            kube.delete(Namespace, namespace)
            note(f"  Waiting for namespace {namespace} to terminate...")
            if _wait_gone(kube, Namespace, namespace, None):
                note(f"  Namespace {namespace} deleted.")
            else:
                warnings = True
                note(f"  Warning: namespace {namespace} still terminating")
        except Exception as error:
            warnings = True
            note(f"  Warning: delete namespace {namespace}: {connection.api_error(error)}")
    note("[cleanup] Done (with warnings)." if warnings else "[cleanup] Done.")


@dataclass(frozen=True)
class RunRequest:
    """A run as the command line asks for it, validated, before any API call."""

    kind: RunKind
    document: dict[str, Any]
    wait: bool
    timeout: float
    cleanup: bool
    registry: Registry | None
    results_file: Path | None
    junit_file: Path | None
    created_line: Callable[[dict[str, Any]], list[str]]
    stays: bool = True
    """Whether the run outlives this command (not in a sandbox torn down after it)."""
    html_file: Path | None = None
    teardown: Callable[[], None] | None = None
    """What ``--cleanup`` does after deleting the run (``--setup``: reset the install)."""


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def execute(kube: Client, request: RunRequest, *, live: bool | None = None) -> str:
    """Create the run and, with ``--wait``, follow it to the end; the report's verdict.

    A failed, timed-out or interrupted run raises ``UserError`` (exit 1) after the report.
    """
    kind, document = request.kind, request.document
    name, namespace = document["metadata"]["name"], document["metadata"]["namespace"]
    created = Created(namespace=ensure_namespace(kube, namespace))
    try:
        secret_name = ""
        secret_created = False
        if request.registry is not None:
            secret_name = f"nvcrectl-pull-{name}"[:253]
            secret_created = create_pull_secret(kube, secret_name, namespace, request.registry)
            add_pull_secret(document, secret_name)
        try:
            run = create_run(kube, kind, document)
        except UserError:
            if secret_created:
                _delete_secret(kube, secret_name, namespace)
            raise
        created.run = True
        if secret_name:
            own_secret(kube, secret_name, namespace, run)
        for line in request.created_line(document):
            note(line)
        if not request.wait:
            note(f"\nTo check status:\n  kubectl get {kind.name.lower()} {name} -n {namespace}")
            return "CREATED"
        try:
            # Inside the try: a Ctrl-C that lands while this line is still being written (as
            # soon as a reader sees it) is the same detach as one during the wait.
            note(f"\nWaiting for completion (timeout: {duration_text(request.timeout)})...")
            outcome = follow(
                kube, kind, name, namespace, request.timeout, stderr_is_terminal() if live is None else live
            )
            unreleased = None
            if request.cleanup and outcome.ended is not None:
                ended, unreleased = await_release(kube, kind, name, namespace, outcome.ended)
                outcome = replace(outcome, ended=ended)
        except KeyboardInterrupt:
            if request.stays and not request.cleanup:
                note(f"\nInterrupted: detached; the {kind.name} keeps running (nothing was deleted).")
                for line in follow_up(kind, name, namespace):
                    note(line)
            raise UserError("interrupted") from None
        return _finish(kube, request, outcome, name, namespace, unreleased)
    finally:
        if request.cleanup:
            cleanup(kube, kind, name, namespace, created)
            if request.teardown is not None:
                request.teardown()


def _delete_secret(kube: Client, name: str, namespace: str) -> None:
    from lightkube.resources.core_v1 import Secret

    try:
        kube.delete(Secret, name, namespace=namespace)
    except Exception as error:
        note(f"Warning: could not delete secret {name}: {connection.api_error(error)}")


def _finish(
    kube: Client, request: RunRequest, outcome: Outcome, name: str, namespace: str, unreleased: str | None
) -> str:
    """Print the report, write the results files, and end as the run did; a run that passed
    fails when ``--cleanup`` could not prove its resources released (``unreleased`` says why)."""
    from nvcre.cli import report_io
    from nvcre.report.text import render_text

    kind = request.kind
    read = (
        report_io.read_workloadrun_report
        if kind.name == "WorkloadRun"
        else report_io.read_certification_report
    )
    ended = outcome.ended
    held = report_io.Held(ended.run, ended.workflows, ended.jobs) if ended is not None else None
    try:
        report = read(kube, name, namespace, held)
    except Exception as error:
        note(
            f'Warning: could not retrieve {kind.name} "{name}"; report unavailable: '
            f"{getattr(error, 'message', None) or connection.api_error(error)}"
        )
        report = None
    if report is not None:
        # A certification's report is the command's result when it passed (stdout); any other
        # report goes with the progress (cli.md 13.5).
        to_stdout = kind.name == "Certification" and report.result == "PASSED" and not outcome.timed_out
        click.echo("\n" + render_text(report), err=not to_stdout, nl=False)
        results_file = request.results_file
        if results_file is not None:
            _write(lambda: report_io.write_results(results_file, [report]))
        if request.junit_file is not None:
            report_io.write_junit(request.junit_file, [report])  # a write failure fails the command
        if request.html_file is not None:
            report_io.write_html(request.html_file, [report])
    if outcome.timed_out:
        if request.stays and not request.cleanup:
            note("")
            for line in follow_up(kind, name, namespace):
                note(line)
        if kind.name == "WorkloadRun":
            raise UserError(f"timeout waiting for WorkloadRun {name}")
        raise UserError(
            f"timeout waiting for certification {name}: it did not complete within "
            f"{duration_text(request.timeout)} (ran for {progress.elapsed_text(outcome.elapsed)})"
        )
    snapshot = outcome.snapshot
    if snapshot is not None and snapshot.phase == ConditionType.FAILED:
        if kind.name == "WorkloadRun":
            raise UserError(f"WorkloadRun failed: {snapshot.message}")
        raise UserError("certification failed")
    if report is not None:
        errors = report_io.report_exit_errors([report])
        if errors:
            raise UserError("; ".join(errors))
    if unreleased is not None:
        raise UserError(unreleased)
    return str(report.result) if report is not None else "PASSED"


def _write(action: Callable[[], None]) -> None:
    try:
        action()
    except UserError as error:
        note(f"Warning: failed to write results file: {error.message}")
