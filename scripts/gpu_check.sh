#!/usr/bin/env bash
# Every GPU check of dtrain in one run, for a GPU machine that has CUDA, cuDNN, NCCL and
# PyTorch but none of our Debian packages. `pack` needs the GPU lab's bundle tool, which lives
# outside this repository (DTRAIN_BUNDLE_TOOL, default ../shared/device/make-bundle.sh): it packs
# the binaries with their shared libraries and a relocatable Open MPI.
#
#   scripts/gpu_check.sh pack     # here: build, then pack the binaries into .devbundle/
#   scripts/gpu_check.sh run      # there, from the repository root: unpack and run everything
#
# `run` fails (rather than skips) when no GPU is usable, runs the CUDA op and codec tests, the
# GPU all-reduce and scheduler tests on 1 and 2 ranks (two ranks share the GPU through host
# staging), the end-to-end CPU-vs-GPU loss curves (the small GPT's included, fp32 and bf16), the
# sharded modes against the unsharded run (tests/app/test_gpu_shard.sh), and
# bench/gpu_vs_pytorch.py (the CNNs and GPT-2 124M; then ResNet-18 and GPT-2 in bf16 against
# PyTorch's autocast); it writes the outputs under ${OUT:-gpu-check}/ and ends with a summary.
# The whole run should stay within ~10 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
tests=(tests/backend/test_cuda_ops tests/compress/test_cuda_codecs
       tests/comm/test_gpu_allreduce_mpi tests/sched/test_gpu_sched_mpi)

case "${1:-}" in
  pack)
    set -e
    scripts/build.sh
    exclude="$(git rev-parse --git-dir)/info/exclude"
    mkdir -p "$(dirname "$exclude")"
    grep -qx '.devbundle/' "$exclude" 2>/dev/null || echo '.devbundle/' >> "$exclude"
    # Stripped copies: the bundle must stay well under the device tool's 64 MiB carry limit.
    stripped=$(mktemp -d)
    for b in build/apps/dtrain/dtrain "${tests[@]/#/build/}"; do strip -o "$stripped/$(basename "$b")" "$b"; done
    "${DTRAIN_BUNDLE_TOOL:-../shared/device/make-bundle.sh}" .devbundle "$stripped"/*
    rm -rf "$stripped"
    # The CUDA plugin (libdtrain_cuda.so): the CUDA tests link it, so the bundle has it in lib/,
    # where dtrain looks for it (../lib beside its bin/).
    tar tJf .devbundle/devbundle.tar.xz | grep -x 'devbundle/lib/libdtrain_cuda.so' >/dev/null ||
      { echo "the bundle lacks lib/libdtrain_cuda.so (the CUDA plugin)" >&2; exit 1; }
    # The image decoder plugin (libdtrain_image.so) stays out, and OpenCV's libraries with it: no
    # check here reads an image folder.
    ;;
  run)
    tar xJf .devbundle/devbundle.tar.xz -C /tmp && source /tmp/devbundle/env.sh || exit 1
    # Every step is bounded (the device lease is short): a hang costs its step, not the run. The
    # logs are packed into one archive after each step, so a run cut short still returns them.
    out=${OUT:-gpu-check} logs=$(mktemp -d)
    mkdir -p "$out"
    export DTRAIN_REQUIRE_CUDA=1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
    declare -A result
    step() {  # step NAME SECONDS COMMAND...: run with a time limit, log, remember pass/fail
      local name=$1 limit=$2 start=$SECONDS; shift 2
      echo "== $name"
      if timeout -k 5 "$limit" "$@" > "$logs/$name.log" 2>&1; then result[$name]=passed
      else result[$name]="FAILED ($?)"; fi
      tail -n 25 "$logs/$name.log"
      echo "-- $name: ${result[$name]} in $((SECONDS - start)) s"
      tar czf "$out/logs.tgz" -C "$logs" .
    }
    step cuda_ops 120 /tmp/devbundle/bin/test_cuda_ops
    step cuda_codecs 60 /tmp/devbundle/bin/test_cuda_codecs
    for np in 1 2; do
      step gpu_allreduce_np$np 60 mpirun -np $np --oversubscribe /tmp/devbundle/bin/test_gpu_allreduce_mpi
      step gpu_sched_np$np 90 mpirun -np $np --oversubscribe /tmp/devbundle/bin/test_gpu_sched_mpi
    done
    # The CPU-vs-GPU curves: MLP, LeNet, ResNet-20, then two small GPTs (seconds each) and eval.
    step app_cuda 240 bash tests/app/test_cuda.sh /tmp/devbundle/bin/dtrain "$PWD"
    # Sharded training (algorithm.shard) on 2 ranks of the GPU: every mode equals none, bit for bit.
    step gpu_shard 300 bash tests/app/test_gpu_shard.sh /tmp/devbundle/bin/dtrain "$PWD"
    # resnet18, alexnet, mlp and gpt2 (10-iteration runs: about half a minute of GPT-2 a side).
    step bench "${GPU_CHECK_BENCH_SECONDS:-300}" python3 bench/gpu_vs_pytorch.py \
      --dtrain /tmp/devbundle/bin/dtrain ${GPU_CHECK_BENCH_ARGS:-}
    # bf16 mixed precision against PyTorch's autocast: ResNet-18 and GPT-2 124M.
    step bench_bf16 "${GPU_CHECK_BENCH_SECONDS:-300}" python3 bench/gpu_vs_pytorch.py \
      --dtrain /tmp/devbundle/bin/dtrain --precision bf16 --models resnet18,gpt2 \
      ${GPU_CHECK_BENCH_ARGS:-}
    echo "== summary"
    status=0
    for name in "${!result[@]}"; do
      echo "$name: ${result[$name]}"
      [ "${result[$name]}" = passed ] || status=1
    done | sort
    for name in "${!result[@]}"; do [ "${result[$name]}" = passed ] || status=1; done
    exit $status
    ;;
  *)
    sed -n 2,14p "$0"
    exit 2
    ;;
esac
