# Shared helpers of the end-to-end tests: a scratch dir and assertions that name what failed.
set -u
DTRAIN=$1
ROOT=$2
WORK=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
finish() {
  if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
  echo "all passed"
}
# wait_until PID CHECK... — poll CHECK (a command) until it succeeds; status 1 when process PID
# ended first without it. No time limit, so no machine is too slow for it: a test that races a
# job waits for something the job writes, the job is held until then by its run length or an
# emulated link (cluster.link), and CTest's TIMEOUT ends a hang.
wait_until() {
  local pid=$1
  shift
  until "$@"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      "$@"  # one last look: it may have come just before the end
      return
    fi
    sleep 0.05
  done
}
# check_learns WHAT OUT — fail unless the training loss of OUT's last accuracy.csv row is below
# 0.8 of its first row's (the run learns).
check_learns() {
  local first last
  first=$(sed -n 2p "$2/accuracy.csv" | cut -d, -f4)
  last=$(tail -1 "$2/accuracy.csv" | cut -d, -f4)
  /usr/bin/python3 -c "import sys; sys.exit(0 if $last < 0.8 * $first else 1)" ||
    fail "$1 learns: the training loss went from $first to $last"
}
# A small, fast experiment on synthetic data (no files needed).
write_synthetic_config() {
  cat > "$1" <<YAML
name: tiny
model: {name: mlp, hidden: [32]}
dataset: {name: synthetic, shape: [1, 8, 8], classes: 4, train_size: 512, test_size: 128, batch_size: 32}
optimizer: {lr: 0.05}
train: {epochs: 2}
output: {dir: $2}
YAML
}

# require_cuda: exits 77 (CTest: skipped), saying why, when this dtrain was built without CUDA or
# no GPU is usable — a failure instead with DTRAIN_REQUIRE_CUDA set (not 0); otherwise leaves the
# dry run on the GPU in $CUDA_PROBE.
require_cuda() {
  local cfg="$WORK/cuda_probe.yaml" rc why
  write_synthetic_config "$cfg" "$WORK/cuda_probe"
  CUDA_PROBE=$("$DTRAIN" --config "$cfg" --set cluster.device=cuda --dry-run 2>&1)
  rc=$?
  if [ "$rc" -eq 2 ] && echo "$CUDA_PROBE" | grep -q "cluster.device"; then
    why=$(echo "$CUDA_PROBE" | grep -m1 "cluster.device" | sed 's/^dtrain: [a-z ]*: //')
    if [ "${DTRAIN_REQUIRE_CUDA:-0}" != 0 ]; then
      echo "FAIL: no usable CUDA GPU: $why (DTRAIN_REQUIRE_CUDA is set)"
      exit 1
    fi
    case "$why" in
      *"without CUDA"*) echo "no CUDA in this build of dtrain: $why; skipped" ;;
      *) echo "no usable CUDA GPU: $why; skipped" ;;
    esac
    exit 77
  fi
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: dry run with cluster.device=cuda: exit code $rc: $CUDA_PROBE"
    exit 1
  fi
}
