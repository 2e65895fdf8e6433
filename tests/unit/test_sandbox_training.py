"""Megatron and NeMo logs: the corpus line layouts, step time following GPU speed, checkpoints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvcre.sandbox import Member, node_model, parse_faults, simulate

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
MEGATRON = re.compile(
    r"^ \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] iteration +(\d+)/ *(\d+) \| consumed samples: +(\d+) \| "
    r"elapsed time per iteration \(ms\): ([\d.]+) \| throughput per GPU \(TFLOP/s/GPU\): ([\d.]+) \| "
    r"learning rate: ([\d.E+-]+) \| global batch size: +(\d+) \| lm loss: ([\d.E+-]+) \| loss scale: ([\d.]+) \| "
    r"grad norm: ([\d.]+) \| number of skipped iterations: +(\d+) \| number of nan iterations: +(\d+) \|$"
)
SAVING = re.compile(r"saving checkpoint at iteration +(\d+) to (\S+) in torch_dist format")
SAVED = re.compile(r"successfully saved checkpoint from iteration +(\d+) to (\S+)")
NEMO = re.compile(
    r"Training epoch (\d+), iteration (\d+)/(\d+) \| lr: ([\d.e+-]+) \| global_batch_size: (\d+) \| "
    r"global_step: (\d+) \| reduced_train_loss: ([\d.]+) \| train_step_timing in s: ([\d.]+)"
)

SCRIPT = """CKPT_ARGS=""
if [ "${ENABLE_CHECKPOINT:-false}" = "true" ]; then
  mkdir -p "$CKPT_DIR"
  CKPT_ARGS="--save $CKPT_DIR --save-interval ${SAVE_INTERVAL}"
fi
exec torchrun --nnodes="${PET_NNODES}" --nproc_per_node="${PET_NPROC_PER_NODE}" \
  "$MEGATRON/pretrain_mamba.py" --num-layers 24 --hidden-size 2048 --seq-length "$SEQ_LENGTH" \
  --global-batch-size 64 --lr 3.0e-4 --min-lr 3.0e-5 --lr-decay-style cosine --lr-warmup-iters 10 \
  --vocab-size 131072 --log-interval 1 --train-iters ${TRAIN_ITERS} $CKPT_ARGS"""
ENV = {
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "8",
    "SEQ_LENGTH": "8192",
    "TRAIN_ITERS": "20",
    "SAVE_INTERVAL": "10",
}
GROUP = [Member(f"n{i}", node_model(f"n{i}", "NVIDIA-H100-80GB-HBM3", "aws")) for i in range(2)]


def lines(*faults: str, env: dict[str, str] = ENV, rank: int = 1, script: str = SCRIPT) -> list[str]:
    sim = simulate(["/bin/bash", "-c", script], GROUP, parse_faults(faults), seed=5, rank=rank, env=env)
    assert sim.exit_code == 0
    return [line.text for line in sim.lines]


@pytest.mark.skipif(not CORPUS.exists(), reason="the log corpus (../shared/corpus) is not here")
def test_the_megatron_regex_reads_the_corpus_line_it_is_modelled_on() -> None:
    real = (CORPUS / "megatron" / "nemo-mcore-rtxa1000-5iter-all-skipped.log").read_text().splitlines()
    iteration = next(line for line in real if "iteration        1/" in line)
    with_loss = iteration.replace("| loss scale", "| lm loss: 1.086954E+01 | loss scale").replace(
        "| number of skipped", "| grad norm: 0.000 | number of skipped"
    )
    assert MEGATRON.match(with_loss)
    checkpoint = (CORPUS / "megatron" / "cre-fixture-n6-full-sequence-k8s-ts-checkpoint.log").read_text()
    assert SAVING.search(checkpoint) and SAVED.search(checkpoint)
    nemo = (CORPUS / "nemo" / "nemo2-llama3-8b-iso8601-offset-prefix.log").read_text()
    assert NEMO.search(nemo)


def test_megatron_iteration_lines_on_the_last_rank() -> None:
    out = [m for m in map(MEGATRON.match, lines()) if m]
    assert [int(m.group(2)) for m in out] == list(range(1, 21))
    assert {int(m.group(3)) for m in out} == {20}
    assert int(out[-1].group(4)) == 20 * 64
    tflops = [float(m.group(6)) for m in out[1:]]
    assert all(330.0 <= t <= 460.0 for t in tflops)  # H100 bf16, as published Megatron runs
    assert not any(MEGATRON.match(line) for line in lines(rank=0))


def test_slow_gpu_on_one_member_slows_every_step() -> None:
    def step_ms(*faults: str) -> float:
        out = [float(m.group(5)) for m in map(MEGATRON.match, lines(*faults)) if m][1:]
        return sum(out) / len(out)

    assert 1.8 <= step_ms("n0=slow-gpu:2") / step_ms() <= 2.1
    assert 1.02 <= step_ms("n0=slow-nic:0.5") / step_ms() <= 1.2


def test_checkpoint_lines_only_when_checkpointing_is_on() -> None:
    on = lines(env={**ENV, "ENABLE_CHECKPOINT": "true", "CKPT_DIR": "/ckpt"}, rank=0)
    assert [int(m.group(1)) for m in map(SAVING.search, on) if m] == [10, 20]
    assert [m.group(2) for m in map(SAVED.search, on) if m] == ["/ckpt", "/ckpt"]
    assert not any(SAVING.search(line) for line in lines(rank=0))


def test_nemo_lines() -> None:
    script = "nemo llm pretrain trainer.max_steps=5 model.global_batch_size=64"
    out = [m for m in map(NEMO.match, lines(env={}, rank=0, script=script)) if m]
    assert [(int(m.group(2)), int(m.group(3)), int(m.group(6))) for m in out] == [(i, 4, i) for i in range(5)]


def test_an_nccl_error_fails_training_naming_the_node() -> None:
    sim = simulate(
        ["/bin/bash", "-c", SCRIPT], GROUP, parse_faults(["n0=nccl-error"]), seed=5, rank=1, env=ENV
    )
    assert sim.exit_code == 1 and sim.failed_hosts == ("n0",)
    assert any("ncclRemoteError" in line.text and "n0" in line.text for line in sim.lines)


def test_save_flags_turn_checkpointing_on_without_an_enable_switch() -> None:
    script = "torchrun pretrain_gpt.py --train-iters 4 --save /ckpt --save-interval 2 --num-layers 2"
    out = lines(env={}, rank=0, script=script)
    assert [int(m.group(1)) for m in map(SAVING.search, out) if m] == [2, 4]
