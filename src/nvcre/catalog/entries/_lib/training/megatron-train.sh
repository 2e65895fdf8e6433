#!/bin/bash
# Nemotron 5 ({{ model_name }}) pre-training on mock data with Megatron-LM, one torchrun per node.
# Kubeflow Trainer sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR/PORT.
set -euo pipefail

MEGATRON=/mnt/workspace/megatron-lm
if [ -d /opt/megatron-lm ] && [ ! -d "$MEGATRON/.git" ]; then
  MEGATRON=/opt/megatron-lm
fi
export PYTHONPATH="$MEGATRON:${PYTHONPATH:-}"

SEQ_LENGTH="${SEQ_LENGTH:-{{ seq_length }}}"
RECOMPUTE_ARGS="${RECOMPUTE_ARGS:-}"
CKPT_DIR=/mnt/workspace/checkpoints/{{ entry_name }}
CKPT_ARGS=""
if [ "${ENABLE_CHECKPOINT:-false}" = "true" ]; then
  mkdir -p "$CKPT_DIR"
  CKPT_ARGS="--save $CKPT_DIR --load $CKPT_DIR --save-interval ${SAVE_INTERVAL} --save-retain-interval ${SAVE_RETAIN_INTERVAL} --ckpt-format torch_dist"
fi
TRAIN_ARGS="--train-iters ${TRAIN_ITERS}"
if [ "${TRAIN_ITERS}" = "-1" ]; then
  # No step limit: stop on time only.
  TRAIN_ARGS="--train-iters 1000000"
fi

# shellcheck disable=SC2086
exec torchrun \
  --nnodes="${PET_NNODES}" \
  --nproc_per_node="${PET_NPROC_PER_NODE}" \
  --node_rank="${PET_NODE_RANK}" \
  --master_addr="${PET_MASTER_ADDR}" \
  --master_port="${PET_MASTER_PORT}" \
  "$MEGATRON/pretrain_mamba.py" \
  --num-layers {{ num_layers }} \
  --hidden-size {{ hidden_size }} \
  --ffn-hidden-size {{ ffn_hidden_size }} \
  --num-attention-heads {{ attention_heads }} \
  --group-query-attention \
  --num-query-groups 8 \
  --hybrid-override-pattern "{{ hybrid_pattern }}" \
  --mamba-num-heads {{ mamba_heads }} \
  --spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec \
  --squared-relu \
  --normalization RMSNorm \
  --position-embedding-type none \
  --untie-embeddings-and-output-weights \
  --disable-bias-linear \
  --seq-length "$SEQ_LENGTH" \
  --max-position-embeddings "$SEQ_LENGTH" \
  --tensor-model-parallel-size {{ tp or 1 }} \
  --pipeline-model-parallel-size {{ pp or 1 }} \
{% if ep %}
  --expert-model-parallel-size {{ ep }} \
{% endif %}
  --sequence-parallel \
  --use-distributed-optimizer \
  --micro-batch-size 1 \
  --global-batch-size {{ global_batch_size }} \
  --lr 3.0e-4 --min-lr 3.0e-5 --lr-decay-style cosine --lr-warmup-iters 10 \
  --weight-decay 0.1 --clip-grad 1.0 \
  --bf16 \
  --mock-data \
  --tokenizer-type NullTokenizer --vocab-size 131072 \
  --split 99,1,0 \
  --eval-iters 0 \
  --log-interval 1 \
  --log-throughput \
  --exit-duration-in-mins "${EXIT_DURATION_MINS}" \
  $TRAIN_ARGS $CKPT_ARGS $RECOMPUTE_ARGS
