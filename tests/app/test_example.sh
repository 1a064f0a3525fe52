#!/usr/bin/env bash
# examples/one_sync_step.cpp, the library's spine, runs as its comment says: one rank and two, the
# same weights on every rank and a loss that went down (it exits 0 only then), and an experiment
# file given on its command line.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EXAMPLE=$3

timeout 120 "$EXAMPLE" > "$WORK/one.txt" 2>&1 || fail "one rank: exit $? ($(tail -3 "$WORK/one.txt"))"
grep -q "^one_sync_step on 1 rank(s)" "$WORK/one.txt" || fail "one rank: $(head -3 "$WORK/one.txt")"
grep -q "weights identical on every rank" "$WORK/one.txt" || fail "one rank: $(tail -2 "$WORK/one.txt")"

timeout 120 mpirun --oversubscribe -np 2 "$EXAMPLE" > "$WORK/two.txt" 2>&1 \
  || fail "two ranks: exit $? ($(tail -3 "$WORK/two.txt"))"
grep -q "^one_sync_step on 2 rank(s)" "$WORK/two.txt" || fail "two ranks: $(head -3 "$WORK/two.txt")"
grep -q "16 rows a rank" "$WORK/two.txt" || fail "two ranks split the batch of 32: $(head -2 "$WORK/two.txt")"
grep -q "^weights identical on every rank.*: learned" "$WORK/two.txt" \
  || fail "two ranks: $(tail -2 "$WORK/two.txt")"

# An experiment file: its keys, its model. A wrong one is exit 2 naming the key.
cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/out"
timeout 120 "$EXAMPLE" "$cfg" > "$WORK/file.txt" 2>&1 || fail "with $cfg: exit $? ($(tail -3 "$WORK/file.txt"))"
grep -q "weights identical" "$WORK/file.txt" || fail "with $cfg: $(tail -2 "$WORK/file.txt")"
sed -i 's/epochs: 2/epochs: 0/' "$cfg"
"$EXAMPLE" "$cfg" > "$WORK/bad.txt" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "a bad experiment file: exit $rc, expected 2"
grep -q "train.epochs" "$WORK/bad.txt" || fail "the message does not name the key: $(cat "$WORK/bad.txt")"
finish
