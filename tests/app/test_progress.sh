#!/usr/bin/env bash
# Progress output: under mpirun with the output in a file, plain log lines every
# train.log_every_iterations and no terminal escape codes; --progress bar|none|log forces a
# mode; the loss shown at an epoch's last iteration is accuracy.csv's train_loss (one rank).
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/out"  # 512 samples, batch 32: 16 iterations, 2 epochs
ESC=$(printf '\033')

mpirun -np 2 --oversubscribe "$DTRAIN" --config "$cfg" --out "$WORK/mpi" \
  --set train.log_every_iterations=4 > "$WORK/mpi.log" 2>&1 || fail "mpirun run: exit $?"
grep -q "$ESC" "$WORK/mpi.log" && fail "escape codes in a log file under mpirun"
lines=$(grep -c "| iter [0-9]*/16 |" "$WORK/mpi.log")
[ "$lines" -eq 8 ] || fail "expected 8 progress lines (every 4 of 16 iterations, 2 epochs), got $lines"
grep -q "iter 4/16 | loss [0-9.]* (epoch mean) | [0-9]* samples/s | ETA" "$WORK/mpi.log" ||
  fail "progress line format: $(grep "iter" "$WORK/mpi.log" | head -1)"

"$DTRAIN" --config "$cfg" --out "$WORK/bar" --progress bar > "$WORK/bar.log" 2>&1 || fail "bar: exit $?"
grep -q "$ESC" "$WORK/bar.log" || fail "--progress bar drew no live line"
"$DTRAIN" --config "$cfg" --out "$WORK/none" --progress none > "$WORK/none.log" 2>&1 || fail "none: exit $?"
grep -q "| iter " "$WORK/none.log" && fail "--progress none printed progress"
"$DTRAIN" --config "$cfg" --out "$WORK/bad" --progress sometimes > "$WORK/bad.log" 2>&1
[ $? -eq 2 ] || fail "--progress sometimes should exit 2"
grep -q "progress" "$WORK/bad.log" || fail "bad --progress message: $(cat "$WORK/bad.log")"

# One rank: the last line of epoch 1 shows the epoch's mean loss, accuracy.csv's train_loss.
"$DTRAIN" --config "$cfg" --out "$WORK/log" --progress log --set train.log_every_iterations=16 \
  > "$WORK/log.log" 2>&1 || fail "log: exit $?"
shown=$(grep "epoch 1/2 | iter 16/16" "$WORK/log.log" | sed 's/.*loss \([0-9.]*\) (epoch mean).*/\1/')
logged=$(awk -F, 'NR == 2 {print $4}' "$WORK/log/accuracy.csv")
awk -v a="$shown" -v b="$logged" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }' ||
  fail "progress loss $shown != accuracy.csv train_loss $logged"
finish
