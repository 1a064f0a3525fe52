# Shared helpers of the end-to-end tests: a scratch dir and assertions that name what failed.
set -u
DTRAIN=$1
ROOT=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
finish() {
  if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
  echo "all passed"
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
