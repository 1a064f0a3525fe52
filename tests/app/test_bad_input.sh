#!/usr/bin/env bash
# Every kind of bad input ends with exit code 2, one line naming the problem, and nothing
# created in the output directory.
source "$(dirname "$0")/lib.sh"

out="$WORK/out"
good="$WORK/good.yaml"
write_synthetic_config "$good" "$out"

expect_2() {  # expect_2 DESCRIPTION PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  local msg rc
  msg=$("$DTRAIN" "$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] || fail "$what: exit code $rc, expected 2 (stderr: $msg)"
  echo "$msg" | grep -q -- "$pattern" || fail "$what: message lacks '$pattern': $msg"
  [ ! -e "$out" ] || { fail "$what: created $out"; rm -rf "$out"; }
}

expect_2 "missing config" "nope.yaml" --config "$WORK/nope.yaml"
printf 'name: x\nmodel: {name: mlp\n' > "$WORK/syntax.yaml"
expect_2 "YAML syntax error" "syntax.yaml:" --config "$WORK/syntax.yaml"
sed 's/^train: {epochs: 2}/train: {epochs: 2, epoks: 3}/' "$good" > "$WORK/unknown.yaml"
expect_2 "unknown key" "train.epoks" --config "$WORK/unknown.yaml"
sed 's/batch_size: 32/batch_size: -1/' "$good" > "$WORK/batch.yaml"
expect_2 "negative batch" "dataset.batch_size" --config "$WORK/batch.yaml"
expect_2 "unknown algorithm" "algorithm.name" --config "$good" --set algorithm.name=nonsense
expect_2 "missing dataset path" "/does/not/exist" --config "$good" \
  --set "dataset={name: mnist, path: /does/not/exist}"
expect_2 "missing dataset points at datasets/README.md" "datasets/README.md" --config "$good" \
  --set "dataset={name: cifar10, path: $WORK/no-cifar}"
mkdir -p "$WORK/trunc"
for f in /usr/share/datasets/fashion-mnist/*.gz; do cp "$f" "$WORK/trunc/"; done
if [ -f "$WORK/trunc/train-images-idx3-ubyte.gz" ]; then
  gzip -dc "$WORK/trunc/train-images-idx3-ubyte.gz" | head -c 100000 > "$WORK/trunc/train-images-idx3-ubyte"
  rm "$WORK/trunc/train-images-idx3-ubyte.gz"
  expect_2 "truncated idx" "train-images-idx3-ubyte" --config "$good" \
    --set "dataset={name: fashion_mnist, path: $WORK/trunc}"
else
  echo "skip: truncated idx (no Fashion-MNIST installed)"
fi
expect_2 "--set unknown key" "foo.bar" --config "$good" --set foo.bar=1
expect_2 "misspelt model name" "model.nmae: unknown key; did you mean 'name'?" \
  --config "$good" --set "model={nmae: mlp}"
# A custom layer's options are read with its layer type's schema: each problem names the entry.
layers="model={layers: [{name: f, type: flatten}"
expect_2 "layer option out of range" "model.layers\\[1\\].out_features: must be > 0" \
  --config "$good" --set "$layers, {name: fc, type: linear, out_features: 0}]}"
expect_2 "layer option of the wrong type" "model.layers\\[1\\].p: expected a number" \
  --config "$good" --set "$layers, {name: d, type: dropout, p: high}, {name: fc, type: linear, out_features: 2}]}"
expect_2 "unknown layer key" "model.layers\\[1\\].colour: unknown key" \
  --config "$good" --set "$layers, {name: fc, type: linear, out_features: 2, colour: red}]}"
expect_2 "malformed --set" "--set" --config "$good" --set novalue
expect_2 "unknown option" "--frobnicate" --config "$good" --frobnicate
expect_2 "plan --ranks 0" "--ranks" plan --config "$good" --ranks 0
# Each algorithm takes its own keys; unbuilt ones are refused before anything is created.
expect_2 "key of another algorithm" "algorithm.K: belongs to algorithm pipe_sgd, not to the chosen 'sync'" \
  --config "$good" --set "algorithm={name: sync, K: 7}"
# PipeDream's stages and replicas: every bad partition names its key (one process: what a job of
# the ranks the replicas name would do is checked without mpirun, and on 1 rank).
pd="algorithm={name: pipedream"
expect_2 "pipedream stages auto for replicas of other ranks" "algorithm.replicas: 1-1 needs 2 rank(s), but the job has 1" \
  --config "$good" --set "$pd, replicas: [1, 1]}"
expect_2 "pipedream stage not a layer" "algorithm.stages\\[0\\]: 'conv9' is not a layer of the model" \
  --config "$good" --set "$pd, stages: [conv9]}" --dry-run
expect_2 "pipedream empty stage" "algorithm.stages\\[1\\]: stage 2 would be empty" \
  --config "$good" --set "$pd, stages: [fc2, fc2]}" --dry-run
expect_2 "pipedream cut in a fused pair" "relu1" \
  --config "$good" --set "$pd, stages: [relu1]}" --dry-run
expect_2 "pipedream replicas not summing to the ranks" "algorithm.replicas: 1-1 needs 2 rank(s), but the job has 1" \
  --config "$good" --set "$pd, stages: [fc2], replicas: [1, 1]}"
expect_2 "pipedream replicas per stage" "algorithm.replicas: 3 count(s) for the 2 stage(s)" \
  --config "$good" --set "$pd, stages: [fc2], replicas: [1, 1, 1]}" --dry-run
expect_2 "pipedream more stages than ranks" "algorithm.stages: 2 stages need at least 2 ranks, but the job has 1" \
  --config "$good" --set "$pd, stages: [fc2]}"
expect_2 "pipedream microbatches with 1f1b" "algorithm.microbatches: 4" \
  --config "$good" --set "$pd, stages: [fc2], microbatches: 4}" --dry-run
expect_2 "pipedream microbatches not dividing the batch" "dataset.batch_size: 32 is not divisible by algorithm.microbatches 3" \
  --config "$good" --set "$pd, stages: [fc2], schedule: gpipe, microbatches: 3}" --dry-run
expect_2 "pipedream vertical sync without stashing" "algorithm.vertical_sync: needs weight_stashing" \
  --config "$good" --set "$pd, stages: [fc2], weight_stashing: false, vertical_sync: true}" --dry-run
expect_2 "pipedream cut inside a ResNet block" "cannot cut before 'layer1.0.conv2': 2 tensors would cross" \
  --config "$good" --set "model={name: resnet20}" --set "$pd, stages: [layer1.0.conv2]}" --dry-run
# SAPipe cannot make more layers stale than the model has.
expect_2 "sapipe stale_layers beyond the model" "algorithm.stale_layers: 99 is more than the model's" \
  --config "$good" --set "algorithm={name: sapipe, stale_layers: 99}"
# The decentralized algorithms exchange whole models: no codec.
for a in gossip d_psgd; do
  expect_2 "$a with a codec" "compression.name: $a exchanges whole models, uncompressed" \
    --config "$good" --set "algorithm={name: $a}" --set compression.name=quantize8
done
expect_2 "schedule key of another schedule" "milestones: applies only to schedule multistep" \
  --config "$good" --set "optimizer.schedule={name: cosine, milestones: [2]}"

# PipeDream's layer profiles (dtrain plan --profile): the file and the line are named.
header="layer,forward_ms,backward_ms,activation_bytes,parameter_bytes"
link="cluster.link.bandwidth=1Gbps"
: > "$WORK/empty.csv"
expect_2 "empty profile" "empty.csv: empty layer profile" plan --profile "$WORK/empty.csv" --set "$link"
printf 'layer,forward_ms,activation_bytes,parameter_bytes\nfc1,1,2,3\n' > "$WORK/column.csv"
expect_2 "profile without a column" "column.csv: the header lacks the column 'backward_ms'" \
  plan --profile "$WORK/column.csv" --set "$link"
printf '%s\nfc1,1,2,3,4\nfc2,1,-2,3,4\n' "$header" > "$WORK/negative.csv"
expect_2 "profile with a negative time" "negative.csv: line 3 (layer fc2): backward_ms: -2 is negative" \
  plan --profile "$WORK/negative.csv" --set "$link"
expect_2 "missing profile" "nothere.csv: cannot read the layer profile" \
  plan --profile "$WORK/nothere.csv" --set "$link"
expect_2 "profile without a link" "cluster.link is not set" plan --profile "$WORK/negative.csv"
expect_2 "plan without config or profile" "--config FILE is required" plan --ranks 2

# A corrupt image in an imagefolder dataset: exit 2 naming the file (found while training).
for split in train val; do
  for class in a b; do
    mkdir -p "$WORK/images/$split/$class"
    for i in 1 2; do printf 'P6\n8 8\n255\n%0192d' 0 > "$WORK/images/$split/$class/$i.ppm"; done
  done
done
printf 'P6\n8 8\n255\nshort' > "$WORK/images/train/b/2.ppm"
msg=$("$DTRAIN" --config "$good" --set "dataset={name: imagefolder, path: $WORK/images, batch_size: 2, image_size: 8, resize: 8}" \
  --out "$WORK/images_run" 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] || fail "corrupt image: exit code $rc, expected 2 ($msg)"
echo "$msg" | grep -q "images/train/b/2.ppm: cannot read or decode the image" || fail "corrupt image: $msg"

# Existing results are not touched by a bad run.
mkdir -p "$out" && echo keep > "$out/accuracy.csv"
"$DTRAIN" --config "$good" --set dataset.batch_size=0 >/dev/null 2>&1
[ "$(cat "$out/accuracy.csv")" = keep ] || fail "a bad run overwrote accuracy.csv"

finish
