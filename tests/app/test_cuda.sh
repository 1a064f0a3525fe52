#!/usr/bin/env bash
# The CUDA backend end to end. The same short trainings on the CPU and on the GPU (same seed:
# the same initial weights, data order and dropout masks; TF32 off by default) follow the same
# loss curve, per epoch in accuracy.csv (train and test loss within REL relative, accuracies
# within ACC) and per iteration in the progress log (its smoothed loss, printed to 4 decimals):
# MNIST-MLP within 1e-3, LeNet within 1e-2, on Fashion-MNIST when installed, else on synthetic
# data of the same shape; ResNet-20's training losses within 1e-2; the MLP, LeNet and the GPT
# below in bf16 against the CPU's bf16 (1e-2 to 3e-2). A small GPT (AdamW; and with
# dropout) on a char-level corpus written here within 1e-3 and 0.01, and `dtrain eval` of the GPU
# run's model.safetensors on the CPU and on the GPU gives its test loss within 1e-4 relative.
# Two ranks sharing the one GPU train with pipe_sgd (codecs none and quantize8, and none in bf16):
# exit 0, both ranks' timing rows, a finite test loss.
# Exits 77 (CTest: skipped), saying why, when this dtrain was built without CUDA or no GPU is
# usable; with DTRAIN_REQUIRE_CUDA set (not 0) that is a failure instead.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# ---- a GPU, and a dtrain built for it? ----
require_cuda
probe=$CUDA_PROBE probe_cfg="$WORK/cuda_probe.yaml"  # the config require_cuda dry-ran
echo "$probe" | grep -q "^backend  *cuda" ||
  fail "the dry run with cluster.device=cuda names no cuda backend: $(echo "$probe" | grep '^backend')"
echo "$probe" | grep -m1 "^backend"

# ---- GPU and CPU loss curves ----
# The two configs, or without Fashion-MNIST copies of them on synthetic data (a --set cannot take
# the dataset's path away, and synthetic data has none).
fashion=/usr/share/datasets/fashion-mnist configs=$ROOT/configs
if [ -f $fashion/train-images-idx3-ubyte.gz ]; then
  echo "data: Fashion-MNIST"
else
  echo "data: synthetic 1x28x28, 10 classes (Fashion-MNIST is not installed)"
  configs=$WORK
  for name in fashion_mlp_sync fashion_lenet_sync; do
    sed "s|name: fashion_mnist, path: $fashion,|name: synthetic, shape: [1, 28, 28], classes: 10,|" \
      "$ROOT/configs/$name.yaml" > "$WORK/$name.yaml"
    grep -q "name: synthetic" "$WORK/$name.yaml" || fail "configs/$name.yaml: no Fashion-MNIST line to replace"
  done
fi

# compare NAME REL ACC ARGS...: trains with ARGS on the CPU and on the GPU and compares. ACC "-":
# the training loss only (see ResNet-20 below).
compare() {
  local name=$1 rel=$2 acc=$3 dev rc
  shift 3
  for dev in cpu cuda; do
    timeout 900 "$DTRAIN" "$@" --set cluster.device=$dev --set train.log_every_iterations=1 \
      --out "$WORK/$name-$dev" > "$WORK/$name-$dev.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
      fail "$name on $dev: exit code $rc: $(tail -3 "$WORK/$name-$dev.log")"
      return
    fi
  done
  grep -q "^backend  *cuda" "$WORK/$name-cuda.log" || fail "$name: the cuda run names no cuda backend"
  grep -q "^backend  *cpu" "$WORK/$name-cpu.log" || fail "$name: the cpu run names no cpu backend"

  # Per epoch: accuracy.csv side by side (columns 1-7 CPU, 8-14 GPU).
  [ "$(wc -l < "$WORK/$name-cpu/accuracy.csv")" -eq "$(wc -l < "$WORK/$name-cuda/accuracy.csv")" ] ||
    fail "$name: accuracy.csv has $(wc -l < "$WORK/$name-cpu/accuracy.csv") lines on the CPU, $(wc -l < "$WORK/$name-cuda/accuracy.csv") on the GPU"
  paste -d, "$WORK/$name-cpu/accuracy.csv" "$WORK/$name-cuda/accuracy.csv" |
    awk -F, -v rel="$rel" -v acc="$acc" -v name="$name" '
      function abs(v) { return v < 0 ? -v : v }
      function near(a, b) { return abs(a - b) <= rel * (abs(a) > abs(b) ? abs(a) : abs(b)) + 1e-6 }
      NR == 1 { next }
      {
        ++rows
        printf "  %s epoch %s (iteration %s): train loss %s / %s, test loss %s / %s, test acc %s / %s (cpu / cuda)\n",
               name, $1, $2, $4, $11, $6, $13, $7, $14
        if ($1 != $8 || $2 != $9) { print "    epoch or iteration differ"; bad = 1 }
        if (!near($4, $11) || (acc != "-" && !near($6, $13))) { print "    a loss differs by more than " rel " relative"; bad = 1 }
        if (acc != "-" && (abs($5 - $12) > acc || abs($7 - $14) > acc)) { print "    an accuracy differs by more than " acc; bad = 1 }
      }
      END { if (rows < 2) { print "    fewer than 2 evaluations"; bad = 1 } exit bad }' ||
    fail "$name: the GPU's per-epoch losses or accuracies differ from the CPU's (accuracy.csv)"

  # Per iteration: the progress lines' smoothed loss (4 decimals: 1.5e-4 for the rounding).
  for dev in cpu cuda; do
    grep -o 'epoch [0-9]*/[0-9]* | iter [0-9]*/[0-9]* | loss [^ ]*' "$WORK/$name-$dev.log" |
      awk '{ print $2, $5, $8 }' > "$WORK/$name-$dev.iter"
  done
  if [ ! -s "$WORK/$name-cpu.iter" ]; then
    fail "$name: no per-iteration progress lines in the log"
  elif [ "$(wc -l < "$WORK/$name-cpu.iter")" -ne "$(wc -l < "$WORK/$name-cuda.iter")" ]; then
    fail "$name: $(wc -l < "$WORK/$name-cpu.iter") progress lines on the CPU, $(wc -l < "$WORK/$name-cuda.iter") on the GPU"
  else
    paste -d' ' "$WORK/$name-cpu.iter" "$WORK/$name-cuda.iter" | awk -v rel="$rel" -v name="$name" '
      function abs(v) { return v < 0 ? -v : v }
      {
        ++n
        d = abs($3 - $6)
        if ($1 != $4 || $2 != $5 || !(d <= rel * abs($3) + 1.5e-4)) {
          if (!bad) first = "epoch " $1 " iteration " $2 ": cpu " $3 ", cuda " $6
          bad = 1
        }
        if (d > worst) worst = d
      }
      END {
        printf "  %s: %d iterations, largest difference of the smoothed loss %.4f\n", name, n, worst
        if (bad) print "    first outside " rel " relative: " first
        exit bad
      }' || fail "$name: the GPU's per-iteration losses differ from the CPU's (progress log)"
  fi
}

# Rounding differences (cuBLAS/cuDNN vs oneDNN summation orders, Winograd) grow over the
# iterations as two nearby SGD trajectories drift apart, hence short runs: 60 and 40 iterations.
compare mlp 1e-3 0.01 --config "$configs/fashion_mlp_sync.yaml" \
  --set dataset.train_size=2000 --set dataset.test_size=1000 --set train.epochs=3
compare lenet 1e-2 0.03 --config "$configs/fashion_lenet_sync.yaml" \
  --set dataset.train_size=1280 --set dataset.test_size=640 --set train.epochs=2
# ResNet-20: batch norm with its fused ReLU, option-A channel padding, residual adds run in
# place, global pooling; the CPU on its blocked layouts. Direct convolutions on both sides
# (cuDNN's FFT and Winograd round far more, see README), 10 iterations: rounding differences
# grow fast in a young ResNet (on an H200 at lr 0.05, 7e-5 apart after 10 iterations, 1 %
# after 13; two GPU runs differ too, as cuDNN's choice of algorithms can). Training losses
# only: so early the running statistics are far from the batch ones, and the evaluation in
# inference mode amplifies the differences (test loss 13.0 / 14.7, accuracy 0.21 / 0.11, CPU /
# GPU, after 20 iterations); the ops test compares inference-mode batch norm itself.
cat > "$WORK/resnet20.yaml" <<YAML
name: resnet20_cpu_vs_gpu
seed: 1
model: {name: resnet20}
dataset: {name: synthetic, shape: [3, 32, 32], classes: 10, train_size: 320, test_size: 256, batch_size: 64}
optimizer: {name: sgd, lr: 0.02, momentum: 0.9, weight_decay: 0.0001}
train: {epochs: 2, eval_every_epochs: 1}
YAML
export DTRAIN_CONV_ALGO=direct
compare resnet20 1e-2 - --config "$WORK/resnet20.yaml"
unset DTRAIN_CONV_ALGO

# ---- the GPT: flash attention, layer norm, embeddings, GELU, AdamW ----
# A char-level corpus written here (the GPU machine has no datasets): 1500 verse-like lines of
# words drawn by a Park-Miller generator (exact in awk's doubles, so every awk writes the same
# file). The small GPT (2 layers, 2 heads of 32 channels, block 64: one 64-wide attention
# tile) trains 100 iterations with AdamW (warm-up, cosine, clipping) on both devices: losses
# within 1e-3 relative, token accuracies within 0.01. Unlike a young ResNet's, this trajectory
# is not chaotic: on the CPU a learning rate 1e-5 relative off moves the losses by 2e-6 after
# 100 iterations, and a β2 of 0.98 for 0.99 by 1.3e-3 (caught). Then dropout 0.1 everywhere
# the GPT has it (attention weights included) on a wider model (2 heads of 96 channels: the
# 128-wide tiles) at block 100 (a partial second tile): both backends draw the same masks
# (core/rng.h by element index), so the curves agree as closely.
words="the and of to in that shall he unto for his a lord they be is him not them it with all thou
thy was god which my me said but ye their have will thee from as are when this out were upon man
by you israel king son up there hath then people came had house into on her come one we children
before your also day land"
awk -v words="$words" 'BEGIN {
  n = split(words, w)
  x = 1
  for (line = 0; line < 1500; ++line) {
    s = ""
    for (k = 6 + x % 9; k > 0; --k) {
      x = (x * 16807) % 2147483647
      s = s w[1 + x % n] (k > 1 ? " " : "")
    }
    printf "%d:%d %s.\n", 1 + line % 50, 1 + x % 30, s
  }
}' > "$WORK/corpus.txt"
cat > "$WORK/gpt.yaml" <<YAML
name: gpt_cpu_vs_gpu
seed: 3
model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 64, dropout: 0.0}
dataset: {name: text, path: $WORK/corpus.txt, tokenizer: char, block_size: 64, batch_size: 16}
optimizer:
  {name: adamw, lr: 0.003, betas: [0.9, 0.99], weight_decay: 0.1, clip_grad_norm: 1.0,
   schedule: {name: cosine, min_lr: 0.0003, warmup_iterations: 10}}
train: {max_iterations: 100, eval_every_iterations: 25}
YAML
compare gpt 1e-3 0.01 --config "$WORK/gpt.yaml"
compare gpt_dropout 1e-3 0.01 --config "$WORK/gpt.yaml" --set model.n_embd=192 \
  --set model.dropout=0.1 --set dataset.block_size=100 --set train.max_iterations=60 \
  --set train.eval_every_iterations=20

# ---- bf16 mixed precision: the GPU's bf16 kernels against the CPU's ----
# Both sides round the same values to bf16 in the same places (the layer table's precision
# column) and differ in their f32 summation orders; where a sum straddles a rounding boundary
# they store neighbouring bf16 values (2^-8 relative), so the curves agree less closely than in
# fp32: 1e-2 relative for the MLP's losses, 3e-2 for LeNet's and 2e-2 for the GPT's. Skipped when
# this CPU cannot train in bf16 (the reference); the GPU must (an H100 does).
if bf16_probe=$("$DTRAIN" --config "$probe_cfg" --set cluster.precision=bf16 --dry-run 2>&1); then
  compare mlp_bf16 1e-2 0.02 --config "$configs/fashion_mlp_sync.yaml" \
    --set cluster.precision=bf16 --set dataset.train_size=2000 --set dataset.test_size=1000 \
    --set train.epochs=3
  compare lenet_bf16 3e-2 0.05 --config "$configs/fashion_lenet_sync.yaml" \
    --set cluster.precision=bf16 --set dataset.train_size=1280 --set dataset.test_size=640 \
    --set train.epochs=2
  compare gpt_bf16 2e-2 0.02 --config "$WORK/gpt.yaml" --set cluster.precision=bf16
  grep -q "bf16" "$WORK/gpt_bf16-cuda.log" || fail "gpt_bf16: the GPU run's log never names bf16"
else
  echo "skipped: bf16 against the CPU ($(echo "$bf16_probe" | grep -m1 precision))"
fi

# The GPU run's model.safetensors evaluated on the CPU (and on the GPU) gives the GPU run's last
# test loss: the same weights, two forward passes that differ only in rounding.
if [ -f "$WORK/gpt-cuda/model.safetensors" ]; then
  run_loss=$(tail -1 "$WORK/gpt-cuda/accuracy.csv" | cut -d, -f6)
  for dev in cpu cuda; do
    "$DTRAIN" eval --config "$WORK/gpt.yaml" --set cluster.device=$dev \
      --weights "$WORK/gpt-cuda/model.safetensors" > "$WORK/gpt-eval-$dev.txt" 2>&1 ||
      { fail "gpt: eval on $dev of the GPU run's weights: $(tail -3 "$WORK/gpt-eval-$dev.txt")"
        continue; }
    eval_loss=$(grep -Eo "test loss [0-9.]+" "$WORK/gpt-eval-$dev.txt" | cut -d' ' -f3)
    awk -v a="${eval_loss:-x}" -v b="$run_loss" 'BEGIN {
      d = a - b; if (d < 0) d = -d; exit !(a ~ /^[0-9.]+$/ && d <= 1e-4 * b + 1e-5) }' ||
      fail "gpt: eval on $dev of the GPU run's weights gives test loss '$eval_loss', the GPU run $run_loss"
    echo "  gpt: eval on $dev of the GPU run's model.safetensors: test loss $eval_loss (the run: $run_loss)"
  done
else
  fail "gpt: the GPU run left no model.safetensors"
fi

# ---- two ranks sharing the GPU ----
if ! command -v mpirun > /dev/null; then
  echo "skipped: the 2-rank runs (no mpirun on PATH)"
else
  # bf16: codec none, the model in bf16 (its gradients still f32 on the ring).
  for codec in none quantize8 bf16; do
    cfg="$WORK/pipe-$codec.yaml" out="$WORK/pipe-$codec" log="$WORK/pipe-$codec.log"
    write_synthetic_config "$cfg" "$out"
    precision=fp32
    [ "$codec" = bf16 ] && precision=bf16
    timeout 300 mpirun --oversubscribe -np 2 "$DTRAIN" --config "$cfg" --set cluster.device=cuda \
      --set algorithm.name=pipe_sgd --set compression.name=${codec/bf16/none} \
      --set cluster.precision=$precision > "$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
      fail "2 ranks on one GPU, pipe_sgd + $codec: exit code $rc: $(tail -5 "$log")"
      continue
    fi
    grep -q "^backend  *cuda" "$log" || fail "2 ranks, pipe_sgd + $codec: rank 0 names no cuda backend"
    ranks=$(tail -n +2 "$out/timing.csv" | cut -d, -f1 | sort -u | tr '\n' ' ')
    [ "$ranks" = "0 1 " ] || fail "2 ranks, pipe_sgd + $codec: timing.csv ranks are '$ranks'"
    loss=$(tail -1 "$out/accuracy.csv" | cut -d, -f6)
    awk -v l="$loss" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l > 0 && l < 100) }' ||
      fail "2 ranks, pipe_sgd + $codec: test loss '$loss'"
    echo "2 ranks on one GPU, pipe_sgd + $codec: exit 0, test loss $loss"
  done
fi
finish
