#!/usr/bin/env bash
# Configures and builds dtrain (release preset) into build/. Extra arguments go to CMake's
# configure step, e.g. scripts/build.sh -DDTRAIN_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release "$@" >/dev/null
cmake --build build -j"$(nproc)"
