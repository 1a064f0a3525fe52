#!/usr/bin/env bash
# bf16 mixed precision learns what f32 learns: the Fashion-MNIST MLP and LeNet after 5 epochs end
# within 0.3 points of test accuracy of their f32 runs, and the small GPT of configs/gpt_kjv.yaml
# (2 of its 4 layers, 400 iterations) within 0.02 of its f32 validation loss. Same seeds, same
# data order: only the precision differs.
source "$(dirname "$0")/lib.sh"

if ! "$DTRAIN" --config "$ROOT/configs/fashion_mlp_sync.yaml" --set cluster.precision=bf16 \
  --dry-run > "$WORK/probe.log" 2>&1; then
  grep -q "no native bfloat16" "$WORK/probe.log" || fail "bf16 dry run: $(tail -3 "$WORK/probe.log")"
  echo "skipped: $(grep -o 'this CPU has no native bfloat16[^;]*' "$WORK/probe.log")"
  finish
  exit 0
fi

train() {  # CONFIG PRECISION OUT SETS...
  local config=$1 precision=$2 out=$3; shift 3
  "$DTRAIN" --config "$ROOT/configs/$config.yaml" --set cluster.precision=$precision \
    --set cluster.threads_per_rank=1 "$@" --out "$WORK/$out" --progress none > "$WORK/$out.log" 2>&1 ||
    fail "$out: $(tail -3 "$WORK/$out.log")"
}
last() { tail -1 "$WORK/$1/accuracy.csv" 2>/dev/null | cut -d, -f"$2"; }  # RUN FIELD (6 loss, 7 accuracy)

for model in mlp lenet; do
  train fashion_${model}_sync fp32 ${model}_fp32 --set train.epochs=5
  train fashion_${model}_sync bf16 ${model}_bf16 --set train.epochs=5
  a=$(last ${model}_fp32 7) b=$(last ${model}_bf16 7)
  echo "$model after 5 epochs: test accuracy f32 $a, bf16 $b"
  [ -n "$a" ] && [ -n "$b" ] && /usr/bin/python3 -c "import sys; sys.exit(abs($a - $b) > 0.003)" ||
    fail "$model: bf16's test accuracy $b is more than 0.3 points from f32's $a"
done

gpt=(--set model.n_layer=2 --set train.max_iterations=400 --set train.eval_every_iterations=400
     --set dataset.path="$ROOT/datasets/kjv/kjv.txt")
train gpt_kjv fp32 gpt_fp32 "${gpt[@]}"
train gpt_kjv bf16 gpt_bf16 "${gpt[@]}"
a=$(last gpt_fp32 6) b=$(last gpt_bf16 6)
echo "gpt after 400 iterations: validation loss f32 $a, bf16 $b"
[ -n "$a" ] && [ -n "$b" ] && /usr/bin/python3 -c "import sys; sys.exit(abs($a - $b) > 0.02)" ||
  fail "gpt: bf16's validation loss $b is more than 0.02 from f32's $a"
finish
