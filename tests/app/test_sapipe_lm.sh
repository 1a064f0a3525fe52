#!/usr/bin/env bash
# SAPipe trains a tiny GPT with AdamW on 2 ranks: three stale layers (the tied token table among
# them), weight prediction with AdamW's own step (wp3, and wp1), the all-reduced gradient
# clipped; the test loss falls well below a uniform guess's ln(vocabulary).
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for i in $(seq 1 300); do
  echo "In the beginning God created the heaven and the earth, day $i. And the earth was without form."
done > "$WORK/corpus.txt"
cat > "$WORK/gpt.yaml" <<YAML
name: gpt_sapipe
seed: 2
model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32}
dataset: {name: text, path: $WORK/corpus.txt, tokenizer: char, block_size: 32, batch_size: 16}
cluster: {device: cpu, threads_per_rank: 1}
algorithm: {name: sapipe, stale_layers: 3}
optimizer: {name: adamw, lr: 0.003, betas: [0.9, 0.98], clip_grad_norm: 1.0}
train: {epochs: 2}
YAML

for compensation in wp3 wp1; do
  run="$WORK/$compensation"
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/gpt.yaml" \
    --set algorithm.compensation=$compensation --out "$run" --progress none > "$run.log" 2>&1 ||
    { fail "$compensation: $(tail -3 "$run.log")"; continue; }
  grep -q "3 of [0-9]* layers stale" "$run.log" || fail "$compensation: no stale layers in the log"
  vocab=$(grep -Eo "[0-9]+ classes" "$run.log" | head -1 | cut -d' ' -f1)
  loss=$(tail -1 "$run/accuracy.csv" | cut -d, -f6)
  /usr/bin/python3 -c "import math, sys; sys.exit(0 if $loss < 0.5 * math.log($vocab) else 1)" ||
    fail "$compensation: the test loss $loss did not fall well below ln($vocab)"
done
finish
