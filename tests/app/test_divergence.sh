#!/usr/bin/env bash
# A diverging run (learning rate 1e12) ends with exit 1 and "training diverged" for every
# algorithm; a pipelined one (pipe_sgd K=3, sapipe, pipedream) ends in the iteration whose
# gradient is not finite — named as such — rather than K iterations later when the weights it
# reaches give a NaN loss. The message is printed once, not once per rank.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat > "$WORK/nan.yaml" <<'YAML'
name: nan
model: {layers: [{name: flat, type: flatten}, {name: fc1, type: linear, out_features: 24},
                 {name: relu, type: relu}, {name: fc2, type: linear, out_features: 4}]}
dataset: {name: synthetic, shape: [1, 6, 6], classes: 4, train_size: 480, test_size: 96, batch_size: 24}
optimizer: {lr: 1e12, momentum: 0.9}
train: {epochs: 1}
YAML
check() {  # NAME ALGORITHM PATTERN
  local log="$WORK/$1.log"
  mpirun -np 2 --oversubscribe "$DTRAIN" --config "$WORK/nan.yaml" --set "algorithm=$2" \
    --out "$WORK/$1" --progress none > "$log" 2>&1; local rc=$?
  [ $rc = 1 ] || fail "$1: exit $rc, expected 1: $(tail -3 "$log")"
  grep -q "$3" "$log" || fail "$1: no '$3': $(grep dtrain: "$log")"
  [ "$(grep -c "training diverged" "$log")" = 1 ] || fail "$1: the message is not printed once: $(grep dtrain: "$log")"
}
check sync "{name: sync}" "training diverged: the loss is .*nan at epoch 1, iteration"
check pipe_sgd "{name: pipe_sgd, K: 3}" "training diverged: the gradient of iteration [0-9]* is not finite"
check sapipe "{name: sapipe, stale_layers: all, compensation: none}" "training diverged: the gradient of iteration [0-9]* is not finite"
check pipedream "{name: pipedream, stages: [fc2]}" "training diverged: the \(loss of minibatch\|gradient of step\)"
finish
