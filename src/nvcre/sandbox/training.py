"""Megatron-LM and NeMo training logs for a simulated group.

Step time follows the slowest member's GPU speed (``slow-gpu``) plus a communication share that
follows the group's network (``slow-nic``). The line layouts are Megatron's ``training_log``
(`` [time] iteration N/ M | consumed samples: ...``) and its checkpoint messages, and NeMo 2's
``Training epoch E, iteration I/M | ...``, as in the corpus.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from nvcre.sandbox.faults import Fault, factor
from nvcre.sandbox.model import NodeModel, noise

_HYDRA = re.compile(r"[A-Za-z_][\w.]*=\S*")
#: Share of a healthy step spent in communication that the network does not hide.
COMM_SHARE = 0.08


@dataclass(frozen=True)
class Training:
    """A training run as far as its logs show it."""

    framework: Literal["megatron", "nemo"]
    train_iters: int
    global_batch: int
    seq_length: int
    layers: int
    hidden: int
    vocab: int
    lr: float
    min_lr: float
    warmup_iters: int
    procs_per_node: int | None
    save_dir: str | None  #: set when checkpointing is on
    save_interval: int
    exit_minutes: float | None


def _arguments(argv: Sequence[str]) -> dict[str, str]:
    """``--key value``, ``--key=value`` and Hydra's ``key=value``; a repeated key's last value
    wins, as argparse and Hydra take it."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--") and len(word) > 2:
            key, eq, value = word[2:].partition("=")
            if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value, i = argv[i + 1], i + 1
            out[key] = value
        elif _HYDRA.fullmatch(word):
            key, _, value = word.partition("=")
            out[key] = value
        i += 1
    return out


def _framework(argv: Sequence[str]) -> Literal["megatron", "nemo"] | None:
    """What a training program runs: a Megatron ``pretrain_*.py`` (or a script under a Megatron
    path), NeMo's CLI or a NeMo script; ``None`` for any other program."""
    scripts = [w.lower() for w in argv if w.lower().endswith(".py")]
    modules = [argv[i + 1].lower() for i, w in enumerate(argv[:-1]) if w == "-m"]
    named = [*scripts, *modules]
    if any(s.rsplit("/", 1)[-1].startswith("pretrain_") or "megatron" in s for s in named):
        return "megatron"
    if (argv and argv[0].rsplit("/", 1)[-1] == "nemo") or any("nemo" in s for s in named):
        return "nemo"
    return None


def parse_training(argv: Sequence[str]) -> Training | None:
    """The training run ``argv`` starts (a Megatron or NeMo launch), ``None`` if it is none."""
    framework = _framework(argv)
    if framework is None:
        return None
    args = _arguments(argv)

    def num(key: str, default: float, *more: str) -> float:
        for k in (key, *more):
            try:
                return float(args[k])
            except (KeyError, ValueError):
                continue
        return default

    def ival(key: str, default: int, *more: str) -> int:
        value = num(key, default, *more)
        return default if math.isnan(value) or math.isinf(value) else int(value)

    exit_minutes = num("exit-duration-in-mins", math.nan)
    checkpoint = "save" in args or "save-interval" in args
    return Training(
        framework=framework,
        train_iters=ival("train-iters", 100, "trainer.max_steps", "max-steps"),
        global_batch=ival("global-batch-size", 256, "model.global_batch_size", "data.global_batch_size"),
        seq_length=ival("seq-length", 4096, "model.seq_length", "data.seq_length"),
        layers=ival("num-layers", 32, "model.num_layers"),
        hidden=ival("hidden-size", 4096, "model.hidden_size"),
        vocab=ival("vocab-size", 131072),
        lr=num("lr", 3.0e-4, "optim.lr"),
        min_lr=num("min-lr", 3.0e-5),
        warmup_iters=ival("lr-warmup-iters", 10),
        procs_per_node=ival("nproc_per_node", 0) or ival("nproc-per-node", 0) or None,
        save_dir=(args.get("save") or "/mnt/workspace/checkpoints") if checkpoint else None,
        save_interval=ival("save-interval", 100, "checkpoint.every_n_train_steps"),
        exit_minutes=None if math.isnan(exit_minutes) else exit_minutes,
    )


def flops_per_iteration(t: Training) -> float:
    """Model FLOPs of one iteration: 6 * parameters * tokens, plus attention."""
    params = 12.0 * t.layers * t.hidden**2 + t.vocab * t.hidden
    tokens = float(t.global_batch * t.seq_length)
    return 6.0 * params * tokens + 12.0 * t.layers * t.hidden * t.seq_length * tokens


def step_seconds(t: Training, nodes: Sequence[NodeModel], faults: Sequence[Fault], at_s: float) -> float:
    """Healthy-noise-free step time ``at_s`` into the run: slowest GPU, then the network."""

    gpus = sum(t.procs_per_node or n.gpus for n in nodes)
    speed = min(n.tflops / factor(faults, n.name, "step_time", at_s) for n in nodes)
    compute = flops_per_iteration(t) / (gpus * speed * 1e12)
    healthy = flops_per_iteration(t) / (gpus * min(n.tflops for n in nodes) * 1e12)
    network = min(factor(faults, n.name, "network", at_s) for n in nodes) if len(nodes) > 1 else 1.0
    return compute + COMM_SHARE * healthy / network


def _lr(t: Training, it: int) -> float:
    if it <= t.warmup_iters:
        return t.lr * it / max(t.warmup_iters, 1)
    progress = min(1.0, (it - t.warmup_iters) / max(t.train_iters - t.warmup_iters, 1))
    return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + math.cos(math.pi * progress))


def _loss(seed: int, it: int) -> float:
    return (2.2 + 10.0 * math.exp(-it / 250.0)) * noise(0.01, seed, "loss", it)


def training_lines(
    t: Training,
    nodes: Sequence[NodeModel],
    rank: int,
    faults: Sequence[Fault],
    seed: int,
    started_at: datetime,
    horizon_s: float,
    speed: float = 1.0,
) -> tuple[list[tuple[float, str]], float | None, float]:
    """(lines, end or None if still running at ``horizon_s``, time of the first iteration).

    Megatron prints iteration lines on the last rank and checkpoint lines on rank 0; NeMo
    prints both on rank 0. The wall-clock times the lines print pass ``speed`` times slower
    than the simulated ``at`` (the sandbox's clock runs ``speed`` simulated seconds a second).
    """
    last = len(nodes) - 1
    gpus = sum(t.procs_per_node or n.gpus for n in nodes)
    iter_rank = last if t.framework == "megatron" else 0
    lines: list[tuple[float, str]] = []
    clock = 8.0

    def stamp(at: float) -> str:
        return (started_at + timedelta(seconds=at / speed)).strftime("%Y-%m-%d %H:%M:%S")

    if t.framework == "megatron":
        lines.append((2.0, "> initializing torch distributed ..."))
        lines.append((6.0, "training ..."))
        lines.append((clock, f"[before the start of training step] datetime: {stamp(clock)}"))
    first = clock
    flops = flops_per_iteration(t)
    for it in range(1, t.train_iters + 1):
        step = (
            step_seconds(t, nodes, faults, clock) * noise(0.02, seed, "step", it) * (3.0 if it == 1 else 1.0)
        )
        clock += step
        if clock > horizon_s:
            return lines, None, first
        if it == 1:
            first = clock
        tflops = flops / (step * gpus * 1e12)
        if rank == iter_rank and t.framework == "megatron":
            lines.append(
                (
                    clock,
                    f" [{stamp(clock)}] iteration {it:8d}/{t.train_iters:8d} | consumed samples: {it * t.global_batch:12d} "
                    f"| elapsed time per iteration (ms): {step * 1e3:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} "
                    f"| learning rate: {_lr(t, it):.6E} | global batch size: {t.global_batch:5d} | lm loss: {_loss(seed, it):.6E} "
                    f"| loss scale: 1.0 | grad norm: {1.5 * noise(0.3, seed, 'grad', it):.3f} "
                    "| number of skipped iterations:   0 | number of nan iterations:   0 |",
                )
            )
        elif rank == iter_rank:
            consumed = f" | consumed_samples: {it * t.global_batch}" if it > 1 else ""
            lines.append(
                (
                    clock,
                    f"Training epoch 0, iteration {it - 1}/{t.train_iters - 1} | lr: {_lr(t, it):.3e} "
                    f"| global_batch_size: {t.global_batch} | global_step: {it - 1} | reduced_train_loss: {_loss(seed, it):.4g} "
                    f"| train_step_timing in s: {step:.4g}{consumed}",
                )
            )
        if t.save_dir and it % t.save_interval == 0:
            if rank == 0:
                lines += _checkpoint(t, it, clock, stamp)
            clock += 4.0  # a save is collective: every rank waits for it
        if t.exit_minutes is not None and clock >= t.exit_minutes * 60.0:
            if rank == 0:
                lines.append((clock, f"exiting program after {clock / 60.0:.2f} minutes"))
            break
    return lines, clock + 1.0, first


def _checkpoint(t: Training, it: int, clock: float, stamp: object) -> list[tuple[float, str]]:
    assert callable(stamp)
    if t.framework == "megatron":
        return [
            (
                clock,
                f" [{stamp(clock)}] saving checkpoint at iteration {it:7d} to {t.save_dir} in torch_dist format",
            ),
            (
                clock + 4.0,
                f" [{stamp(clock + 4.0)}] successfully saved checkpoint from iteration {it:7d} to {t.save_dir} [ t 1/1, p 1/1 ]",
            ),
        ]
    ckpt = f"{t.save_dir}/checkpoints/model_name=0--val_loss=0.00-step={it - 1}-consumed_samples={it * t.global_batch}.0-last.ckpt"
    return [
        (clock, f"[NeMo I {stamp(clock)} model_checkpoint:497] Scheduled async checkpoint save for {ckpt}"),
        (
            clock + 4.0,
            f"[NeMo I {stamp(clock + 4.0)} model_checkpoint:522] Async checkpoint save for step {it} finalized successfully.",
        ),
    ]


__all__ = [
    "COMM_SHARE",
    "Training",
    "flops_per_iteration",
    "parse_training",
    "step_seconds",
    "training_lines",
]
