#!/usr/bin/env bash
# Installs, builds and runs the default experiment: an MLP on Fashion-MNIST (a few minutes on
# two cores), then says where the results are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/apps/dtrain/dtrain --config configs/fashion_mlp_sync.yaml "$@"
echo
echo "results: runs/fashion_mlp_sync/accuracy.csv and runs/fashion_mlp_sync/timing.csv"
