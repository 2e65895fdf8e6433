"""The goodput log parser (spec measurements 3.1): one line at a time, bounded memory, never raises.

A :class:`GoodputParser` reads one window of a pod's log (a ``sinceTime`` read) and gives a
:class:`Window`: the application start, the training steps (the last :data:`MAX_STEPS`), the
checkpoints, the first restore and the save still open at its end. What must survive from one
window to the next (the warm-up base step, an open two-line save) is passed in.

A save's duration is, in order of preference: the one its line states (NeMo's ``Global Checkpoint
Save ... Save duration``), the time between its start and done lines, or, when those lines carry
no time (stock Megatron-LM prints them without one), the save's own timer line that follows
(Megatron's ``save-checkpoint ...: (min, max)`` in ms). Lines that only confirm a save already
counted (an async save finalised later, NeMo's second message for the same file) add no time.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from nvcre.measure.profile import (
    CompiledProfile,
    Match,
    Pattern,
    capture_float,
    capture_int,
    capture_seconds,
    capture_text,
)

MAX_STEPS = 100
"""Steps kept per window (the averages are over these)."""
MAX_CHECKPOINTS = 100
KUBELET_PREFIX = re.compile(
    r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))\s", re.ASCII
)


@dataclass(frozen=True)
class Step:
    global_step: int
    timestamp: datetime | None
    step_timing: float
    """Seconds per iteration (``stepTiming``, else ``elapsedTime``)."""
    tflops: float = 0.0
    loss: float = 0.0
    iteration: int = 0
    epoch: int = 0
    warmup: bool = False


@dataclass(frozen=True)
class CheckpointFile:
    """A checkpoint file the log names at a step (``timestamp`` None: its line showed no time)."""

    step: int
    timestamp: datetime | None
    path: str


@dataclass(frozen=True)
class Checkpoint(CheckpointFile):
    """A save of the file, with its duration."""

    save_duration: float
    timed: bool = True
    """The duration is known: stated by the log or measured between two stamped lines."""


@dataclass(frozen=True)
class PendingSave(CheckpointFile):
    """A two-line save whose done line has not been seen yet."""


@dataclass(frozen=True)
class Restore(CheckpointFile):
    """A load of the file."""

    load_duration: float = 0.0
    """Seconds the load took, as the log's own timer states it (0: not stated)."""


@dataclass
class Window:
    """What one read of a log showed."""

    last_log_timestamp: datetime | None = None
    application_start_time: datetime | None = None
    steps: deque[Step] = field(default_factory=lambda: deque(maxlen=MAX_STEPS))
    first_step: Step | None = None
    last_step: Step | None = None
    checkpoints: deque[Checkpoint] = field(default_factory=lambda: deque(maxlen=MAX_CHECKPOINTS))
    restore: Restore | None = None
    pending_save: PendingSave | None = None
    warmup_base: int | None = None
    """The base step of the warm-up window at the end of the read (None: none seen yet)."""
    last_time: datetime | None = None
    """The latest time any line showed (kubelet prefix or an event's own stamp): the end of a
    log read offline."""
    step_count: int = 0
    """Training step lines recognised in the read (all of them, not only the last MAX_STEPS)."""
    step_backs: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=MAX_CHECKPOINTS))
    """(step, the lower step that followed it) each time the step went back within the read: the
    run started again from a checkpoint in the same log (an in-job restart) and redoes steps."""

    def with_lifecycle(self, lifecycle: Window) -> Window:
        """This window's steps with ``lifecycle``'s start, checkpoints and restore (the ``Multi``
        worker strategy: steps from one pod, lifecycle events from another)."""
        times = [t for t in (self.last_time, lifecycle.last_time) if t is not None]
        return replace(
            self,
            last_log_timestamp=self.last_log_timestamp or lifecycle.last_log_timestamp,
            last_time=max(times) if times else None,
            application_start_time=lifecycle.application_start_time,
            checkpoints=lifecycle.checkpoints,
            restore=lifecycle.restore,
            pending_save=lifecycle.pending_save,
        )


def kubelet_time(line: str) -> datetime | None:
    """The kubelet's RFC 3339 prefix of a line read with ``timestamps=true``, if any."""
    match = KUBELET_PREFIX.match(line)
    if match is None:
        return None
    try:
        return datetime.fromisoformat(match.group(1))
    except ValueError:
        return None


def done_step(match: Match) -> int:
    """The step a done line names: ``step``, else ``stepsDone`` - 1 (Lightning's "Async checkpoint
    save for step 25" counts the steps done; the file it names is "...-step=24-...", the global_step
    of the step lines, which count from 0)."""
    done = capture_int(match, "stepsDone")
    return capture_int(match, "step") or max(done - 1, 0)


class GoodputParser:
    """Feed lines, then read :attr:`window`.

    ``warmup_base``: the persisted base step of the current run (None at the start of a run: its
    first step becomes the base). ``pending_save``: a save left open by the previous window.
    ``until``: lines and events stamped after it are dropped (the terminal read).
    """

    def __init__(
        self,
        profile: CompiledProfile,
        *,
        warmup_base: int | None = None,
        pending_save: PendingSave | None = None,
        until: datetime | None = None,
    ) -> None:
        self.profile = profile
        self.until = until
        self.window = Window(warmup_base=warmup_base, pending_save=pending_save)
        self._warmup_pending = warmup_base is None
        self._closed = False
        """A save closed since the last step line: a timer line that follows is its own."""
        self._untimed = False
        """That save's lines showed no time: its timer line gives its duration."""
        p = profile.patterns
        self._start = p.get("applicationStart")
        self._step = p.get("trainingStep")
        self._done = p.get("checkpointDone")
        self._save = p.get("checkpointSave")
        self._restore = p.get("checkpointRestore")
        self._loaded = p.get("checkpointLoaded")
        self._timer = p.get("checkpointTime")
        self._clock = p.get("wallClock")
        self._warmup = p.get("warmupStep")

    def feed_all(self, lines: Iterable[str]) -> Window:
        for line in lines:
            self.feed(line)
        return self.window

    def _time(self, match: Match, fallback: datetime | None) -> datetime | None:
        text = capture_text(match, "timestamp")
        parsed = self.profile.parse_time(text) if text else None
        if parsed is not None and not self._late(parsed):
            last = self.window.last_time
            self.window.last_time = parsed if last is None else max(last, parsed)
        return parsed or fallback

    def _late(self, moment: datetime | None) -> bool:
        return self.until is not None and moment is not None and moment > self.until

    def feed(self, line: str) -> None:
        prefix = kubelet_time(line)
        if self._late(prefix):
            return
        w = self.window
        if prefix is not None:
            w.last_log_timestamp = prefix
            w.last_time = prefix if w.last_time is None else max(w.last_time, prefix)
        if self._start is not None and (m := self._start.search(line)) is not None:
            moment = self._time(m, prefix)
            if moment is not None and w.application_start_time is None and not self._late(moment):
                w.application_start_time = moment
                self._warmup_pending = True
                w.warmup_base = None
        if self._step is not None and (m := self._step.search(line)) is not None:
            self._on_step(self._step, m, prefix, line)
            return
        if self._done is not None and (m := self._done.search(line)) is not None:
            self._on_done(m, prefix)
        elif self._save is not None and (m := self._save.search(line)) is not None:
            self._on_save(self._save, m, prefix)
        elif self._restore is not None and (m := self._restore.search(line)) is not None:
            moment = self._time(m, prefix)
            if w.restore is None and not self._late(moment):
                w.restore = Restore(capture_int(m, "step"), moment, capture_text(m, "path"))
            self._warmup_pending = True
            w.warmup_base = None
        elif self._loaded is not None and (m := self._loaded.search(line)) is not None:
            self._time(m, prefix)
            if w.restore is not None:
                step, path = capture_int(m, "step"), capture_text(m, "path")
                w.restore = replace(w.restore, step=step or w.restore.step, path=path or w.restore.path)
        # A timer may share its line with the done line it follows (a log joined by its author).
        if self._timer is not None and (m := self._timer.search(line)) is not None:
            self._on_timer(self._timer, m)
        if self._clock is not None and (m := self._clock.search(line)) is not None:
            self._time(m, prefix)

    def _on_step(self, pattern: Pattern, m: Match, prefix: datetime | None, line: str) -> None:
        w = self.window
        moment = self._time(m, prefix)
        if self._late(moment):
            return
        timing = capture_seconds(pattern, m, "stepTiming") or capture_seconds(pattern, m, "elapsedTime")
        iteration = capture_int(m, "iteration")
        global_step = capture_int(m, "globalStep") or iteration
        interval = self.profile.log_interval
        if interval > 1 and global_step % interval != 0:
            return
        warmup = self._warmup is not None and self._warmup.search(line) is not None
        if self.profile.warmup_steps > 0:
            if self._warmup_pending:
                w.warmup_base = global_step
                self._warmup_pending = False
            if w.warmup_base is not None and global_step - w.warmup_base < self.profile.warmup_steps:
                warmup = True
        step = Step(
            global_step=global_step,
            timestamp=moment,
            step_timing=timing,
            tflops=capture_float(m, "tflops"),
            loss=capture_float(m, "loss"),
            iteration=iteration,
            epoch=capture_int(m, "epoch"),
            warmup=warmup,
        )
        if w.last_step is not None and global_step < w.last_step.global_step:
            w.step_backs.append((w.last_step.global_step, global_step))
        w.steps.append(step)
        w.step_count += 1
        self._closed = False
        if w.first_step is None:
            w.first_step = step
        w.last_step = step

    def _on_done(self, m: Match, prefix: datetime | None) -> None:
        moment = self._time(m, prefix)
        if self._late(moment):
            return
        w = self.window
        step, path = done_step(m), capture_text(m, "path")
        pending = w.pending_save
        if pending is not None and (not step or not pending.step or step == pending.step):
            started, duration = pending.timestamp, 0.0
            if moment is not None and started is not None:
                duration = max((moment - started).total_seconds(), 0.0)
            w.pending_save = None
            timed = moment is not None and started is not None
            self._record(pending.step or step, moment or started, path or pending.path, duration, timed=timed)
            return
        last = w.checkpoints[-1] if w.checkpoints else None
        if last is not None and (
            (step and step == last.step) or (path and path == last.path and step <= last.step + 1)
        ):
            # a confirmation of the save just counted: an async save finalised, or Lightning's
            # "Async checkpoint save for step N+1 (FILE)" after NeMo's "... iteration N to FILE"
            w.checkpoints[-1] = replace(last, path=path or last.path)
            return
        self._record(step, moment, path, 0.0, timed=False)

    def _on_save(self, pattern: Pattern, m: Match, prefix: datetime | None) -> None:
        moment = self._time(m, prefix)
        if self._late(moment):
            return
        w = self.window
        step, path = capture_int(m, "step"), capture_text(m, "path")
        duration = capture_seconds(pattern, m, "saveDuration")
        pending = w.pending_save
        if duration:
            w.pending_save = None
            self._record(step, moment, path, duration, timed=True)
        elif pending is not None and step and step == pending.step:
            # the same save announced again (DeepSpeed's "Saving model checkpoint" inside Megatron's)
            w.pending_save = replace(
                pending, timestamp=pending.timestamp or moment, path=pending.path or path
            )
        else:
            w.pending_save = PendingSave(step, moment, path)

    def _on_timer(self, pattern: Pattern, m: Match) -> None:
        """A timer line: how long the save just closed (or the checkpoint load) took."""
        w = self.window
        load = capture_seconds(pattern, m, "loadDuration")
        if load and w.restore is not None and not w.restore.load_duration:
            w.restore = replace(w.restore, load_duration=load)
        save = capture_seconds(pattern, m, "saveDuration")
        if not save:
            return
        pending = w.pending_save
        if pending is not None:
            w.pending_save = None
            self._record(pending.step, pending.timestamp, pending.path, save, timed=True)
        elif self._closed:
            if self._untimed and w.checkpoints:
                last = w.checkpoints[-1]
                w.checkpoints[-1] = replace(last, save_duration=last.save_duration + save, timed=True)
                self._untimed = False
        elif w.last_step is not None:  # the save lines are in another rank's log
            self._record(w.last_step.global_step, None, "", save, timed=True)

    def _record(self, step: int, moment: datetime | None, path: str, duration: float, *, timed: bool) -> None:
        """A save closed: a new checkpoint, or one more save of the step just saved."""
        w = self.window
        last = w.checkpoints[-1] if w.checkpoints else None
        if last is not None and step and step == last.step:
            w.checkpoints[-1] = Checkpoint(
                step,
                moment or last.timestamp,
                path or last.path,
                last.save_duration + duration,
                last.timed or timed,
            )
        else:
            w.checkpoints.append(Checkpoint(step, moment, path, duration, timed))
        self._closed = True
        self._untimed = not timed
