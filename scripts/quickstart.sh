#!/usr/bin/env bash
# Installs, builds and runs the default experiment: an MLP on Fashion-MNIST (a few minutes on
# two cores), then says where the results are. Each run gets a folder of its own
# (runs/fashion_mlp_sync, then runs/fashion_mlp_sync-2, ...): nothing of an earlier run is lost.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
out=runs/fashion_mlp_sync
for n in $(seq 2 1000); do
  [ -e "$out/accuracy.csv" ] || [ -e "$out/config.yaml" ] || break
  out=runs/fashion_mlp_sync-$n
done
build/apps/dtrain/dtrain --config configs/fashion_mlp_sync.yaml --out "$out" "$@"
echo
echo "results: $out/accuracy.csv and $out/timing.csv"
