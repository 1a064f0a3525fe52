#!/usr/bin/env bash
# The default experiment learns: one epoch of the MLP on Fashion-MNIST passes 80 % test
# accuracy (the full 5-epoch quickstart reaches ≈ 88 %). Without Fashion-MNIST it exits 77,
# which CTest reports as skipped (tests/app/CMakeLists.txt), not as passed.
source "$(dirname "$0")/lib.sh"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skipped: Fashion-MNIST is not installed (datasets/README.md)"; exit 77
fi
"$DTRAIN" --config "$ROOT/configs/fashion_mlp_sync.yaml" --set train.epochs=1 --out "$WORK/run" \
  > "$WORK/log.txt" 2>&1 || fail "exit code $?: $(tail -3 "$WORK/log.txt")"
acc=$(tail -1 "$WORK/run/accuracy.csv" | cut -d, -f7)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "test accuracy $acc < 0.80"
echo "test accuracy after 1 epoch: $acc"
finish
