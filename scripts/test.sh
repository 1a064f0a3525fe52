#!/usr/bin/env bash
# The one test command (README, CI): installs what is missing, builds, runs every test.
# --quick leaves out the tests labelled `long` (the end-to-end runs that take minutes each:
# tests/app/CMakeLists.txt, tests/scripts/CMakeLists.txt); every other argument goes to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ctest_args=()
for arg in "$@"; do
  if [ "$arg" = --quick ]; then ctest_args+=(-LE long); else ctest_args+=("$arg"); fi
done
scripts/setup.sh
scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
