#!/usr/bin/env bash
# `dtrain plan`'s recommendation: plan.csv's samples_per_s and equivalence columns, the fastest
# row per sample named after the table, every registered algorithm accounted for (a row or a
# line saying it has no timing model), and a config naming each algorithm planned without error.
source "$(dirname "$0")/lib.sh"

# What each algorithm's updates are, against sync's.
declare -A expected=([sync]=exact [ps_sync]=exact [pipe_sgd]=stale [sapipe]=stale [pipedream]=stale
                     [local_sgd]=local [hpsgd]=local [gossip]=decentralized [d_psgd]=decentralized)
# The registry's algorithms, as `dtrain --help` lists them.
names=$("$DTRAIN" --help | head -1 | sed 's/.*trains with //' | tr -d ',')
[ -n "$names" ] || fail "no algorithm names in dtrain --help"
for a in $names; do
  [ -n "${expected[$a]:-}" ] || fail "algorithm $a: this test does not know its equivalence class"
done

cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/out"
batch=32
out=$("$DTRAIN" plan --config "$cfg" --ranks 2 --csv "$WORK/plan.csv" \
      --set cluster.link.bandwidth=1Gbps --set cluster.link.latency=50us 2>&1) ||
  fail "plan failed: $out"

head -1 "$WORK/plan.csv" | grep -q ",configuration,samples_per_s,equivalence," ||
  fail "header lacks samples_per_s,equivalence at its end: $(head -1 "$WORK/plan.csv")"
# samples_per_s > 0 and the global batch over predicted_iteration_s (every row: the data-parallel
# ones and PipeDream's minibatch); equivalence the row's algorithm's class.
while IFS=, read -r algorithm compression _ _ iteration _ _ samples equivalence _; do
  awk -v s="$samples" -v i="$iteration" -v b="$batch" \
    'BEGIN { exit !(s > 0 && i > 0 && (s - b / i) ^ 2 <= (1e-4 * s) ^ 2 + 1e-6) }' ||
    fail "$algorithm,$compression: samples_per_s $samples, not $batch / $iteration"
  [ "$equivalence" = "${expected[$algorithm]:-?}" ] ||
    fail "$algorithm,$compression: equivalence '$equivalence', expected '${expected[$algorithm]:-?}'"
done < <(tail -n +2 "$WORK/plan.csv")

# The recommendation names the row with the highest samples_per_s, of any algorithm.
pick=$(echo "$out" | sed -n 's/^recommendation (fastest per sample): \([a-z_0-9]*\) + \([a-z0-9]*\).*/\1,\2/p')
[ -n "$pick" ] || fail "no overall recommendation line: $out"
best=$(tail -n +2 "$WORK/plan.csv" | awk -F, '$8 > m { m = $8 } END { print m }')
picked=$(grep "^$pick," "$WORK/plan.csv" | head -1 | cut -d, -f8)
[ -n "$picked" ] && [ "$picked" = "$best" ] ||
  fail "recommended $pick ($picked samples/s), but the highest is $best samples/s"
echo "$out" | grep -q "a faster iteration is not a faster time to accuracy" ||
  fail "no word that a faster iteration is not a faster time to accuracy"
# Pipe-SGD's own advice on its settings stays, after the overall pick.
echo "$out" | grep -q "^recommendation (Pipe-SGD" || fail "Pipe-SGD's recommendation is gone: $out"

# Every algorithm: a table row or a line saying it has no timing model, and its class in words
# with where its accuracy was measured.
for a in $names; do
  if grep -q "^$a," "$WORK/plan.csv"; then
    echo "$out" | grep -q "^$a " || fail "$a has CSV rows but no table row"
  else
    echo "$out" | grep -q "^$a  *no timing model yet" || fail "$a: neither a row nor a 'no timing model' line"
  fi
  echo "$out" | grep -q "^  $a  *${expected[$a]}  *.*(accuracy: docs/" ||
    fail "$a: no line with its equivalence class (${expected[$a]}) and accuracy pointer"
done
# The classes in words.
for words in "its updates equal sync's" "applies stale gradients" \
  "ranks step their own models between averagings" "ranks average with neighbours, no global model"; do
  echo "$out" | grep -q "$words" || fail "the recommendation does not say '$words'"
done
# The accuracy pointers lead to sections that exist.
for target in $(echo "$out" | grep -o "docs/[a-z_]*\.md#[a-z0-9-]*" | sort -u); do
  file=${target%%#*} anchor=${target#*#}
  [ -f "$ROOT/$file" ] || fail "pointer $target: no $file"
  grep -i "^#\+ " "$ROOT/$file" | sed 's/^#* //' | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9 \n-' | tr ' ' '-' |
    grep -qx "$anchor" || fail "pointer $target: no such section in $file"
done

# A config naming each algorithm plans without error, and the chosen one is in the output.
for a in $names; do
  msg=$("$DTRAIN" plan --config "$cfg" --ranks 2 --set algorithm.name="$a" 2>&1) ||
    fail "plan with algorithm.name=$a failed: $msg"
  echo "$msg" | grep -q "^$a " || fail "plan with algorithm.name=$a does not list $a"
done
finish
