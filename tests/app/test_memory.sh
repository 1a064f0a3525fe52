#!/usr/bin/env bash
# The memory of a run before it is built (docs/memory.md): --dry-run prints the per-rank table
# with the memory model's figures for a small MLP (every shard mode, on 2 ranks), a run whose
# estimate exceeds cluster.memory_per_rank is refused with exit 2 before anything is written or
# trained, one that fits by a byte runs, a bad size is exit 2 naming the key, and run.yaml
# records every rank's peak resident memory.
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

write_synthetic_config "$WORK/tiny.yaml" "$WORK/out"
# The MLP 64 → 32 → 4 has 2212 parameters: 8848 bytes of weights, of gradients, and of SGD's
# momentum (one state float per parameter).
table_row() {  # OUTPUT KIND: the exact bytes of that row
  awk -v kind="$2" '$0 ~ "^  " kind " " { for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9]+$/) { print $i; exit } }' <<<"$1"
}
check_rows() {  # WHAT OUTPUT WEIGHTS GRADIENTS OPTIMIZER WORKING_SET
  local what=$1 out=$2 kind expected got sum=0
  local -A want=([weights]=$3 [gradients]=$4 [optimizer]=$5 [buffers]=0 [accumulation]=0
                 ["working set"]=$6)
  for kind in weights gradients optimizer buffers accumulation "working set"; do
    got=$(table_row "$out" "$kind")
    [ "$got" = "${want[$kind]}" ] || fail "$what: $kind row: expected ${want[$kind]}, got '$got'"
    sum=$((sum + ${got:-0}))
  done
  local activations total
  activations=$(table_row "$out" activations)
  total=$(table_row "$out" total)
  [ -n "$activations" ] && [ "$activations" -gt 0 ] || fail "$what: no activations row"
  [ "$total" = "$((sum + ${activations:-0}))" ] ||
    fail "$what: total $total is not the rows' sum $((sum + ${activations:-0}))"
  grep -q "recomputing: activations" <<<"$out" || fail "$what: no activation figure recomputing"
}

out=$("$DTRAIN" --config "$WORK/tiny.yaml" --dry-run --ranks 2 2>&1) || fail "dry run: exit $?"
grep -q "^memory   per rank of 2 (algorithm.shard: none)" <<<"$out" || fail "dry run: no table"
check_rows "none" "$out" 8848 8848 8848 0
# One segment of 2212 elements over 2 ranks: 1106 each; in flight: the whole segment.
out=$("$DTRAIN" --config "$WORK/tiny.yaml" --dry-run --ranks 2 --set algorithm.shard=optimizer 2>&1)
# The ring's scratch: a block of 1106 elements received.
check_rows "optimizer" "$out" 8848 8848 4424 4424
# gradients: and the rank's half of the gradients; the working set adds the one segment beyond
# its half (1106 elements) whichever layer runs. parameters: and the weights' half, the segment
# beyond it gathered as well.
out=$("$DTRAIN" --config "$WORK/tiny.yaml" --dry-run --ranks 2 --set algorithm.shard=gradients 2>&1)
check_rows "gradients" "$out" 8848 4424 4424 8848
out=$("$DTRAIN" --config "$WORK/tiny.yaml" --dry-run --ranks 2 --set algorithm.shard=parameters 2>&1)
check_rows "parameters" "$out" 4424 4424 4424 13272

# A limit one byte below the total is refused (exit 2, the key, the table), before anything is
# written; at the total, the run trains.
out=$("$DTRAIN" --config "$WORK/tiny.yaml" --dry-run 2>&1)
total=$(table_row "$out" total)
out=$("$DTRAIN" --config "$WORK/tiny.yaml" --set "cluster.memory_per_rank=$((total - 1))B" 2>&1)
code=$?
[ "$code" -eq 2 ] || fail "over the limit: expected exit 2, got $code"
grep -q "cluster.memory_per_rank: the run needs .* ($total bytes) on a rank" <<<"$out" ||
  fail "over the limit: the message does not name the key and the total: $out"
grep -q "does NOT fit" <<<"$out" || fail "over the limit: no table in the message"
[ ! -e "$WORK/out" ] || fail "over the limit: the output folder was written"
# Sharding on 2 ranks would fit a limit the whole state does not: the message says which. With
# AdamW: the 4424 bytes of its state a rank sheds outweigh the ring's block of 4424 it receives
# (with SGD's one state float, on one segment of 2 ranks, the two are equal and nothing fits).
adamw=(--set "optimizer={name: adamw, lr: 0.001}")
out=$("$DTRAIN" --config "$WORK/tiny.yaml" "${adamw[@]}" --dry-run --ranks 2 2>&1)
total2=$(table_row "$out" total)
out=$(mpirun --oversubscribe -np 2 "$DTRAIN" --config "$WORK/tiny.yaml" "${adamw[@]}" --progress none \
      --set "cluster.memory_per_rank=$((total2 - 1000))B" 2>&1)
code=$?
[ "$code" -eq 2 ] || fail "2 ranks over the limit: expected exit 2, got $code"
grep -q "would fit: algorithm.shard: optimizer (" <<<"$out" ||
  fail "2 ranks: algorithm.shard: optimizer not suggested: $out"
[ ! -e "$WORK/out/accuracy.csv" ] || fail "2 ranks over the limit: it trained"

"$DTRAIN" --config "$WORK/tiny.yaml" --set train.epochs=1 --set "cluster.memory_per_rank=${total}B" \
  --progress none > "$WORK/fits.log" 2>&1 || fail "at the limit: exit $?"

out=$("$DTRAIN" --config "$WORK/tiny.yaml" --set cluster.memory_per_rank=20Gb 2>&1)
code=$?
[ "$code" -eq 2 ] || fail "bad size: expected exit 2, got $code"
grep -q "cluster.memory_per_rank: bad size '20Gb'" <<<"$out" || fail "bad size: $out"

# run.yaml: every rank's peak resident memory, gathered at the end.
mpirun --oversubscribe -np 2 "$DTRAIN" --config "$WORK/tiny.yaml" --set train.epochs=1 \
  --out "$WORK/two" --progress none > "$WORK/two.log" 2>&1 || fail "2 ranks: exit $?"
/usr/bin/python3 - "$WORK/two/run.yaml" <<'PY' || fail "run.yaml's memory block"
import sys, yaml
status = list(yaml.safe_load_all(open(sys.argv[1]).read().replace("\n# how", "\n---\n# how")))[-1]
memory = status["memory"]
assert memory["estimated_bytes"] > 0, memory
assert len(memory["peak_rss_bytes"]) == 2 and all(b > 1e6 for b in memory["peak_rss_bytes"]), memory
PY
finish
