#!/usr/bin/env bash
# Sharded data parallelism on the GPU (algorithm.shard; docs/memory.md): two ranks sharing one GPU
# train the small GPT with every shard mode, fp32 and bf16, and end with the unsharded run's
# weights bit for bit (NCCL's reduce-scatter and all-gather, or the host ring through staging,
# against the same all-reduce); then GPT-2 medium in bf16 with shard: parameters trains a few
# iterations and both runs' peak device memory is printed beside the unsharded one's.
# Exits 77 (CTest: skipped), saying why, when this dtrain was built without CUDA or no GPU is
# usable; with DTRAIN_REQUIRE_CUDA set (not 0) that is a failure instead.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

require_cuda

cat "$ROOT"/docs/*.md > "$WORK/corpus.txt"
cat > "$WORK/gpt.yaml" <<YAML
name: gpu_shard
seed: 1
model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 64, dropout: 0.1, bias: true, tie_weights: true}
dataset: {name: text, path: $WORK/corpus.txt, tokenizer: char, block_size: 32, batch_size: 8}
cluster: {device: cuda}
algorithm: {name: sync, segments: 4}
optimizer: {name: adamw, lr: 3.0e-3, weight_decay: 0.1, clip_grad_norm: 0.5}
train: {epochs: 1, max_iterations: 20, eval_every_iterations: 10}
YAML
run() {  # run NAME CONFIG [--set ...]
  local name=$1 config=$2
  shift 2
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/$config" --out "$WORK/$name" \
    --progress none "$@" > "$WORK/$name.log" 2>&1 || { fail "$name: $(tail -3 "$WORK/$name.log")"; return 1; }
}
for precision in fp32 bf16; do
  p=(--set cluster.precision=$precision)
  run "none_$precision" gpt.yaml "${p[@]}" || continue
  for mode in optimizer gradients parameters; do
    run "${mode}_$precision" gpt.yaml "${p[@]}" --set algorithm.shard=$mode &&
      { cmp -s "$WORK/none_$precision/model.safetensors" "$WORK/${mode}_$precision/model.safetensors" ||
          fail "$precision, $mode: the sharded run's weights differ from the unsharded run's"; }
  done
done

# GPT-2 medium, bf16, 2 ranks on the one GPU: the peak device memory of each mode (informational:
# the CUDA backend shards the optimizer's state but does not give weight and gradient memory back
# yet, Backend::releases_memory).
sed -e 's/name: gpt, n_layer: 2, n_head: 2, n_embd: 64, dropout: 0.1, bias: true, tie_weights: true/name: gpt2, size: medium/' \
    -e 's/block_size: 32, batch_size: 8/block_size: 512, batch_size: 4/' \
    -e 's/max_iterations: 20, eval_every_iterations: 10/max_iterations: 5, eval_every_iterations: 0/' \
    "$WORK/gpt.yaml" > "$WORK/medium.yaml"
for mode in none parameters; do
  run "medium_$mode" medium.yaml --set cluster.precision=bf16 --set algorithm.shard=$mode &&
    echo "GPT-2 medium bf16, shard $mode: $(grep -A3 '^memory:' "$WORK/medium_$mode/run.yaml" | tr -s ' \n' ' ')"
done
finish
