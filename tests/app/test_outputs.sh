#!/usr/bin/env bash
# A short run writes config.yaml, run.yaml, accuracy.csv and timing.csv as the contract says (docs/architecture.md §3);
# timing parts add up to no more than wall_s; --dry-run prints the parameter count and writes
# nothing; the resolved config.yaml runs again as it is.
source "$(dirname "$0")/lib.sh"

out="$WORK/out"
cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$out"

dry=$("$DTRAIN" --config "$cfg" --dry-run) || fail "dry run exit code $?"
echo "$dry" | tail -n 1 | grep -qx "parameters: [0-9]*" || fail "dry run's last line: $(echo "$dry" | tail -n 1)"
# mlp 64-32-4: 64·32 + 32 + 32·4 + 4
echo "$dry" | tail -n 1 | grep -qx "parameters: 2212" || fail "parameter count: $(echo "$dry" | tail -n 1)"
[ ! -e "$out" ] || fail "dry run created $out"

"$DTRAIN" --config "$cfg" > "$WORK/log.txt" 2>&1 || fail "training exit code $? ($(tail -3 "$WORK/log.txt"))"
for f in config.yaml run.yaml accuracy.csv timing.csv; do [ -s "$out/$f" ] || fail "missing $f"; done
# run.yaml records what really ran.
for key in "version: " "commit: " "started: " "world_size: 1" "hosts: \[" "backend: cpu" \
           "comm: local" "algorithm: sync (one rank)" "train_data: \"synthetic train"; do
  grep -q "$key" "$out/run.yaml" || fail "run.yaml lacks '$key': $(cat "$out/run.yaml")"
done
[ "$(head -1 "$out/accuracy.csv")" = "epoch,iteration,wall_s,train_loss,train_acc,test_loss,test_acc" ] \
  || fail "accuracy.csv header: $(head -1 "$out/accuracy.csv")"
[ "$(head -1 "$out/timing.csv")" = "rank,epoch,iterations,wall_s,data_s,forward_s,backward_s,update_s,compress_s,comm_s,wait_s" ] \
  || fail "timing.csv header: $(head -1 "$out/timing.csv")"
[ "$(wc -l < "$out/accuracy.csv")" -eq 3 ] || fail "accuracy.csv should have 2 rows"
[ "$(wc -l < "$out/timing.csv")" -eq 3 ] || fail "timing.csv should have 2 rows (1 rank × 2 epochs)"
# The phases are disjoint stretches of the epoch on one rank (no comm thread), so their sum is at
# most wall_s whatever the machine's speed; each of the 8 printed values is rounded to 1e-6 s, so
# their sums may differ by 4e-6 on a fast machine where the gaps between the phases are tiny.
awk -F, 'NR > 1 {
  parts = $5 + $6 + $7 + $8 + $9 + $10 + $11
  if ($3 != 16) { print "iterations " $3 " != 16"; bad = 1 }
  if (parts > $4 * 1.0001 + 4e-6) { print "parts " parts " exceed wall_s " $4; bad = 1 }
  if ($6 <= 0 || $7 <= 0) { print "forward/backward not measured"; bad = 1 }
} END { exit bad }' "$out/timing.csv" || fail "timing.csv does not add up"

# max_iterations ends training and still evaluates once.
"$DTRAIN" --config "$out/config.yaml" --set train.max_iterations=5 --out "$WORK/again" >/dev/null 2>&1 \
  || fail "rerun of the resolved config.yaml failed"
[ "$(tail -1 "$WORK/again/accuracy.csv" | cut -d, -f2)" = 5 ] || fail "max_iterations row: $(tail -1 "$WORK/again/accuracy.csv")"
finish

# OpenCV is in the image decoder plugin (lib/data/image_decoder.h), not in dtrain itself.
opencv_needed=$(readelf -d "$DTRAIN" | grep NEEDED | grep -i opencv)
[ -z "$opencv_needed" ] || fail "dtrain needs OpenCV itself: $opencv_needed"
loaded=$(LD_DEBUG=files "$DTRAIN" --config "$cfg" --set train.max_iterations=2 --out "$WORK/plain" 2>&1 |
         grep -oE 'file=[^ ]*(opencv|dtrain_image)[^ ]*' | sort -u)
[ -z "$loaded" ] || fail "a run on synthetic data loaded $(echo $loaded)"

# `cmake --install` puts dtrain (and nothing else) in PREFIX/bin, and its plugins in PREFIX/lib,
# where dtrain looks for them: with CUDA the CUDA plugin, with OpenCV the image decoder.
build_dir=$(dirname "$(dirname "$(dirname "$DTRAIN")")")
if [ -f "$build_dir/cmake_install.cmake" ]; then
  cmake --install "$build_dir" --prefix "$WORK/prefix" > "$WORK/install.txt" 2>&1 ||
    fail "cmake --install: $(tail -3 "$WORK/install.txt")"
  installed=$(cd "$WORK/prefix" && find . -type f | sort | tr '\n' ' ')
  expected="./bin/dtrain "
  [ -f "$build_dir/lib/libdtrain_cuda.so" ] && expected+="./lib/libdtrain_cuda.so "
  [ -f "$build_dir/lib/libdtrain_image.so" ] && expected+="./lib/libdtrain_image.so "
  [ "$installed" = "$expected" ] || fail "cmake --install installed: $installed"
  "$WORK/prefix/bin/dtrain" --version | grep -q "^dtrain " || fail "the installed dtrain does not run"
  if [ -f "$WORK/prefix/lib/libdtrain_image.so" ]; then
    # An image folder: the installed dtrain loads the installed decoder (LD_DEBUG=files names
    # every library the dynamic linker opens), which the run on synthetic data above did not.
    for class in a b; do
      mkdir -p "$WORK/images/train/$class" "$WORK/images/val/$class"
      printf 'P6\n8 8\n255\n%0192d' 0 > "$WORK/images/train/$class/1.ppm"
      printf 'P6\n8 8\n255\n%0192d' 0 > "$WORK/images/val/$class/1.ppm"
    done
    images="dataset={name: imagefolder, path: $WORK/images, batch_size: 2, image_size: 8, resize: 8}"
    LD_DEBUG=files "$WORK/prefix/bin/dtrain" --config "$cfg" --set "$images" \
      --set train.epochs=1 --out "$WORK/images_run" > "$WORK/images.txt" 2>&1 ||
      fail "imagefolder with the installed dtrain: exit code $? ($(grep -v '^ *[0-9]*:' "$WORK/images.txt" | tail -3))"
    grep -q "file=$WORK/prefix/lib/libdtrain_image.so " "$WORK/images.txt" ||
      fail "the installed dtrain did not load $WORK/prefix/lib/libdtrain_image.so: $(grep -m3 'file=[^ ]*libdtrain_image' "$WORK/images.txt")"
  fi
fi
finish
