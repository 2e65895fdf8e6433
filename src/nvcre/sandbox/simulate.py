"""The one entry point the sandbox shell calls: what a pod's command prints, and how it ends.

:func:`simulate` is a pure function of the command, the group's hosts and node models, the
faults, the seed and the attempt. The shell writes :attr:`Simulation.lines` as a CRI log
(:func:`cri_log`), ends the pod with :attr:`Simulation.exit_code` after
:attr:`Simulation.duration_s` (``None``: it runs until killed), and applies each
:class:`NodeEffect` to its Node at its offset (:func:`~nvcre.sandbox.faults.apply_node_change`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from nvcre.sandbox.dcgm import STOPPED_BY, Diag, DiagCommandError, parse_diag, run_diag
from nvcre.sandbox.faults import KINDS, Fault, NodeChange, Outcome, log_cut, log_served, on_node
from nvcre.sandbox.faults import node_change as combined_change
from nvcre.sandbox.model import unit
from nvcre.sandbox.nccl import Member, healthy_run
from nvcre.sandbox.nccl_args import CommandError, NcclTest, parse_command
from nvcre.sandbox.nccl_log import (
    LAYOUTS,
    NCCL_ERROR_EXIT,
    WRONG_RESULTS_EXIT,
    Line,
    error_lines,
    mpirun_abort,
    ssh_warnings,
    wrong_results_lines,
)
from nvcre.sandbox.script import resolve
from nvcre.sandbox.styles import PLAIN, LogStyle, prefixer
from nvcre.sandbox.training import Training, parse_training, training_lines

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class LogLine:
    offset_s: float  #: seconds after the container started
    text: str
    stream: str = "stdout"
    origin: int | None = 0  #: the process rank that printed it; ``None``: the launcher (mpirun)


@dataclass(frozen=True)
class NodeEffect:
    """A change to Node ``node`` at ``offset_s`` seconds after this pod started."""

    offset_s: float
    node: str
    change: NodeChange


@dataclass(frozen=True)
class Simulation:
    lines: tuple[LogLine, ...]
    exit_code: int | None  #: ``None`` while it runs (hang, worker, horizon reached)
    duration_s: float | None  #: when it exits; ``None``: runs until killed
    node_effects: tuple[NodeEffect, ...] = ()
    failed_hosts: tuple[str, ...] = ()  #: hosts an error names (for tests and status)
    log_served: bool = True  #: whether the log is served through the API (``no-log``)


@dataclass(frozen=True)
class _Event:
    at_s: float
    fault: Fault
    host: str
    outcome: Outcome


def initial_node_change(faults: Sequence[Fault], node: str) -> NodeChange:
    """What ``node`` looks like from creation: its node faults that strike at once (missing-gpus)."""
    static = [f for f in on_node(faults, node) if f.delay_s == 0 and KINDS[f.kind].default_at == "start"]
    return combined_change(static, node)


def _strike(f: Fault, first_s: float, end_s: float) -> float:
    if f.delay_s:
        return f.delay_s
    return {"start": 0.0, "collective": first_s, "mid": (first_s + end_s) / 2.0}[KINDS[f.kind].default_at]


def _events(
    members: Sequence[Member], faults: Sequence[Fault], seed: int, attempt: int, first_s: float, end_s: float
) -> list[_Event]:
    events = []
    for m in members:
        for f in on_node(faults, m.node.name):
            outcome = KINDS[f.kind].outcome(f, seed, attempt)
            if outcome is not None:
                events.append(_Event(_strike(f, first_s, end_s), f, m.host, outcome))
    return sorted(events, key=lambda e: (e.at_s, e.host))


def _effects(
    members: Sequence[Member], faults: Sequence[Fault], first_s: float, end_s: float, until: float | None
) -> tuple[NodeEffect, ...]:
    out = []
    for name in dict.fromkeys(m.node.name for m in members):
        for f in on_node(faults, name):
            change = KINDS[f.kind].node_change(f)
            if change is None or (f.delay_s == 0 and KINDS[f.kind].default_at == "start"):
                continue
            at = _strike(f, first_s, end_s)
            if until is None or at <= until:
                out.append(NodeEffect(at, name, change))
    return tuple(sorted(out, key=lambda e: (e.offset_s, e.node)))


def simulate(
    command: Sequence[str],
    members: Sequence[Member],
    faults: Sequence[Fault] = (),
    *,
    seed: int = 0,
    attempt: int = 0,
    rank: int = 0,
    env: Mapping[str, str] | None = None,
    files: Mapping[str, str] | None = None,
    style: LogStyle = PLAIN,
    started_at: datetime = EPOCH,
    horizon_s: float = 3600.0,
    speed: float = 1.0,
) -> Simulation:
    """What the pod of ``members[rank]`` running ``command`` prints and how it ends.

    ``members`` are the group's hosts in rank order (for an MPI job the launcher is rank 0 and
    prints the table). ``env`` is the container's environment and ``files`` (path -> text) the
    scripts it can run: a shell command is read by :func:`~nvcre.sandbox.script.resolve` (never
    run) and the first program it starts that the simulator knows is simulated. ``attempt``
    (0, 1, ...) is how many groups the members ran before (the most of any member), which
    ``flaky`` faults draw on: a retry, or a later Job on the node, draws afresh; ``style`` the launcher's prefixes
    and table layout. Offsets are simulated seconds; the wall-clock times lines print (Megatron's,
    ``timestamps``) pass ``speed`` simulated seconds a second from ``started_at``.
    """
    found = workload(command, env, files)
    served = log_served(faults, (m.node.name for m in members))
    if found.error is not None:
        lines = tuple(LogLine(0.1, text, "stderr") for text in found.error.split("\n"))
        return Simulation(lines, found.exit_code, 0.2, log_served=served)
    if found.worker is not None:
        return replace(_worker(found.worker), log_served=served)
    if found.dcgm is not None:
        return replace(_dcgm(found.dcgm, members, faults, seed, attempt, rank, horizon_s), log_served=served)
    if found.nccl is not None:
        sim = _nccl(found.nccl, members, faults, seed, attempt, found.env, horizon_s, style.layout)
        procs = len(members) * found.nccl.procs_per_host
    elif found.training is not None:
        sim = _training(found.training, members, faults, seed, attempt, rank, started_at, horizon_s, speed)
        procs = len(members)
    else:
        return Simulation((), found.exit_code, 1.0, log_served=served)
    prefix = prefixer(style, head=members[0].host, procs=procs, seed=seed, started_at=started_at, speed=speed)
    lines = tuple(replace(x, text=prefix(x.offset_s, x.stream, x.origin) + x.text) for x in sim.lines)
    return replace(sim, lines=lines, log_served=served)


@dataclass(frozen=True)
class Workload:
    """The program a container runs as the simulator sees it: an nccl-tests run, a training
    run, a ``dcgmi diag``, an MPI worker's sshd, or none of them (``error``: how it failed before
    starting, one line per line it printed)."""

    env: Mapping[str, str] = field(default_factory=dict)  #: the program's environment
    nccl: NcclTest | None = None
    training: Training | None = None
    dcgm: Diag | None = None
    worker: tuple[str, ...] | None = None  #: sshd's argv
    error: str | None = None  #: what the shell or the binary printed when it refused
    exit_code: int = 0


def workload(
    command: Sequence[str], env: Mapping[str, str] | None = None, files: Mapping[str, str] | None = None
) -> Workload:
    """The first program ``command`` starts (its shell script read, never run) that the simulator
    knows, parsed as the program would parse its arguments."""
    script = resolve(command, env or {}, files or {})
    for program in script.invocations:
        argv = list(program.argv)
        if argv[0].rsplit("/", 1)[-1] == "sshd":
            return Workload(program.env, worker=program.argv)
        try:
            diag = parse_diag(argv)
        except DiagCommandError as err:
            return Workload(program.env, error=str(err), exit_code=err.exit_code)
        if diag is not None:
            return Workload(program.env, dcgm=diag)
        try:
            test = parse_command(argv, program.env)
        except CommandError as err:
            return Workload(program.env, error=str(err), exit_code=1)
        if test is not None:
            return Workload(program.env, nccl=test)
        training = parse_training(argv)
        if training is not None:
            return Workload(program.env, training=training)
    return Workload(error=script.error, exit_code=script.exit_code)


def _worker(argv: Sequence[str]) -> Simulation:
    """An MPI worker: sshd in the foreground (``-De``) until the launcher is done."""
    flags = argv[1:]
    port = next(
        (flags[i + 1] for i, w in enumerate(flags[:-1]) if w == "-p" and flags[i + 1].isdigit()), "22"
    )
    lines = (
        LogLine(0.05, f"Server listening on 0.0.0.0 port {port}.", "stderr"),
        LogLine(0.05, f"Server listening on :: port {port}.", "stderr"),
    )
    return Simulation(lines, None, None)


def _nccl(
    test: NcclTest,
    members: Sequence[Member],
    faults: Sequence[Fault],
    seed: int,
    attempt: int,
    env: Mapping[str, str],
    horizon_s: float,
    layout: str,
) -> Simulation:
    if env.get("NCCL_DEBUG") and "NCCL_DEBUG" not in test.env:
        test = replace(test, env={**test.env, "NCCL_DEBUG": env["NCCL_DEBUG"]})
    for m in members:
        have = m.node.gpus - initial_node_change(faults, m.node.name).missing_gpus
        want = test.procs_per_host * test.nthreads * test.ngpus
        if want > have:
            lines = (
                LogLine(
                    0.5, f"Invalid number of GPUs: {want} requested but only {have} were found.", "stderr"
                ),
                LogLine(0.5, "Please check the number of processes and GPUs per process.", "stderr"),
            )
            return Simulation(lines, 1, 1.0, failed_hosts=(m.host,))
    run = healthy_run(test, members, faults, seed, horizon_s, layout=layout)
    style = LAYOUTS[layout]
    timed = [_line(0.3, line, "stderr") for line in ssh_warnings(run.ranks)] if test.mpirun else []
    timed += [_line(at, line) for at, line in run.head]
    timed += [_line(at, (style.row(test, cells), 0)) for at, cells in run.rows]
    healthy_exit = 0
    if run.end_s is not None:
        tail = list(run.foot)
        if run.errors:  # nccl-tests exits non-zero after wrong results; mpirun reports the first
            healthy_exit = 1 if layout != "current" else WRONG_RESULTS_EXIT
            tail += wrong_results_lines(run.ranks, seed) if layout == "current" else []
        timed += [_line(run.end_s, line) for line in tail]
        if healthy_exit and test.mpirun:
            timed += [
                _line(run.end_s + 0.1, line, "stderr")
                for line in mpirun_abort(run.ranks, 0, healthy_exit, seed)
            ]

    def failure(event: _Event, at: float) -> list[LogLine]:
        lines = [
            _line(at, line)
            for line in error_lines(run.ranks, event.host, seed, debug=test.debug in ("INFO", "WARN"))
        ]
        if test.mpirun:
            proc = next(i for i, m in enumerate(members) if m.host == event.host) * test.procs_per_host
            abort = mpirun_abort(run.ranks, proc, NCCL_ERROR_EXIT, seed)
            lines += [_line(at + 0.1, line, "stderr") for line in abort]
        return lines

    sim = _conclude(
        timed,
        run.end_s,
        run.first_collective_s,
        members,
        faults,
        seed,
        attempt,
        horizon_s,
        failure,
        NCCL_ERROR_EXIT,
        healthy_exit,
    )
    cut = log_cut(faults, (m.node.name for m in members))
    if cut is None or not run.rows:
        return sim
    sizes = sorted({cells.size for _, cells in run.rows})
    last = next((s for s in sizes if s >= cut.value), sizes[-1]) if cut.value else sizes[len(sizes) // 2]
    cut_at = next(at for at, cells in run.rows if cells.size == last)
    return replace(sim, lines=tuple(x for x in sim.lines if x.offset_s <= cut_at))


def _line(at: float, line: Line, stream: str = "stdout") -> LogLine:
    return LogLine(at, line[0], stream, line[1])


def _training(
    training: Training,
    members: Sequence[Member],
    faults: Sequence[Fault],
    seed: int,
    attempt: int,
    rank: int,
    started_at: datetime,
    horizon_s: float,
    speed: float,
) -> Simulation:
    nodes = [m.node for m in members]
    timed, end, first = training_lines(training, nodes, rank, faults, seed, started_at, horizon_s, speed)
    host = members[rank].host

    def failure(event: _Event, at: float) -> list[LogLine]:
        return [
            LogLine(
                at,
                f"[rank{rank}]:[E] ProcessGroupNCCL.cpp:1895] [PG 0 Rank {rank}] Process group watchdog thread "
                "terminated with exception: NCCL error: remote process exited or there was a network error, "
                "NCCL version 2.29.2",
                "stderr",
                rank,
            ),
            LogLine(
                at,
                "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
                f"prematurely. Last error: NET/IB : Got completion from peer on {event.host} with status=12",
                "stderr",
                rank,
            ),
            LogLine(
                at + 0.5,
                "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 "
                f"(pid: {100 + rank}) of binary: /usr/bin/python on {host}",
                "stderr",
                rank,
            ),
        ]

    lines = [LogLine(at, text, origin=rank) for at, text in timed]
    return _conclude(lines, end, first, members, faults, seed, attempt, horizon_s, failure, 1)


def _conclude(
    timed: list[LogLine],
    end_s: float | None,
    first_s: float,
    members: Sequence[Member],
    faults: Sequence[Fault],
    seed: int,
    attempt: int,
    horizon_s: float,
    failure: Callable[[_Event, float], list[LogLine]],
    fail_exit: int,
    healthy_exit: int = 0,
    *,
    event_faults: Sequence[Fault] | None = None,
) -> Simulation:
    """The run ``timed`` (ending ``healthy_exit`` at ``end_s``) cut by the first event fault that
    strikes before its end (of ``event_faults``, every fault when ``None``; the Node changes are
    those of every fault).

    ``end_s`` ``None``: the healthy run is still going at ``horizon_s``.
    """
    until = end_s if end_s is not None else horizon_s
    events = _events(members, faults if event_faults is None else event_faults, seed, attempt, first_s, until)
    event = next((e for e in events if e.at_s < until), None)
    if event is None:
        lines = tuple(timed)
        if end_s is None:
            return Simulation(lines, None, None, _effects(members, faults, first_s, until, None))
        done = max(end_s, lines[-1].offset_s if lines else end_s) + 0.2
        return Simulation(lines, healthy_exit, done, _effects(members, faults, first_s, until, end_s))
    kept = [line for line in timed if line.offset_s <= event.at_s]
    if event.outcome == "hang":
        return Simulation(tuple(kept), None, None, _effects(members, faults, first_s, until, None))
    at = event.at_s + 0.05 + 2.0 * unit(seed, "fail", attempt)
    lines = (*kept, *failure(event, at))
    done = lines[-1].offset_s + 0.5
    return Simulation(lines, fail_exit, done, _effects(members, faults, first_s, until, at), (event.host,))


def _dcgm(
    diag: Diag,
    members: Sequence[Member],
    faults: Sequence[Fault],
    seed: int,
    attempt: int,
    rank: int,
    horizon_s: float,
) -> Simulation:
    """``dcgmi diag`` on the node of ``members[rank]`` (the GPUs it still has): the document
    comes at the end; ``hang`` and ``not-ready`` stop the diag (it prints nothing and runs until
    killed), XIDs and slow GPUs are what the diag reports (:func:`nvcre.sandbox.dcgm.findings`),
    the NCCL failures of ``nccl-error`` and ``flaky`` never reach it, and every fault's Node change
    comes at its time as for any workload."""
    member = members[rank]
    gpus = member.node.gpus - initial_node_change(faults, member.node.name).missing_gpus
    run = run_diag(diag, member.node, gpus, faults, seed, _strike)
    # a diag always ends, when its tests' own durations say (level 4's power and stress phases
    # take an hour of their own): the horizon that stops open-ended runs does not cut it
    end = run.end_s
    timed = [LogLine(run.end_s, text, stream) for stream, text in run.lines]

    def failure(event: _Event, at: float) -> list[LogLine]:  # no event fault ends a diag with output
        raise AssertionError(f"{event.fault} does not fail a diag")

    stopping = [f for f in faults if f.kind in STOPPED_BY]
    return _conclude(
        timed, end, run.first_s, [member], faults, seed, attempt, max(horizon_s, end), failure, 1,
        run.exit_code,
        event_faults=stopping,
    )  # fmt: skip


def cri_log(sim: Simulation, started_at: datetime, speed: float = 1.0) -> list[str]:
    """``sim``'s lines in the CRI log format kwok serves: ``<RFC3339Nano> <stream> F <text>``, each
    at ``started_at`` plus its offset, ``speed`` simulated seconds passing a second."""
    out = []
    for line in sim.lines:
        seconds = line.offset_s / speed
        when = (started_at + timedelta(seconds=seconds)).astimezone(UTC)
        nanos = round(seconds * 1e9) % 1000
        out.append(
            f"{when.strftime('%Y-%m-%dT%H:%M:%S')}.{when.microsecond:06d}{nanos:03d}Z {line.stream} F {line.text}"
        )
    return out


__all__ = [
    "EPOCH",
    "LogLine",
    "NodeEffect",
    "Simulation",
    "Workload",
    "cri_log",
    "initial_node_change",
    "simulate",
    "workload",
]
