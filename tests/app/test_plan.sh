#!/usr/bin/env bash
# `dtrain plan`: the CSV contract (header, one row per candidate), predictions that react to the
# link, and bad input → exit 2 naming the culprit, with no CSV written.
source "$(dirname "$0")/lib.sh"

header="algorithm,compression,compute_s,comm_s,predicted_iteration_s,bound,configuration,samples_per_s,equivalence,memory_per_rank_bytes,fits_memory"
# What follows the configuration: samples_per_s and equivalence (test_plan_recommend.sh checks them).
tail_cols=",[0-9.]*,[a-z]*,[0-9]*,[a-z]*"
check_csv() {  # check_csv FILE WHAT RANKS
  local f=$1 what=$2 ranks=$3
  [ "$(head -1 "$f")" = "$header" ] || fail "$what: header is '$(head -1 "$f")'"
  # Every algorithm with a timing row (the registry's), with every codec, and PipeDream's.
  # gossip and d_psgd exchange whole models, uncompressed: one row each; sync has a row per
  # sharded mode (algorithm.shard: optimizer, gradients, parameters), pipe_sgd per mode it offers
  # (optimizer, gradients).
  [ "$(tail -n +2 "$f" | wc -l)" -eq 26 ] || fail "$what: expected 26 rows, got $(tail -n +2 "$f" | wc -l)"
  for m in optimizer gradients parameters; do
    grep -q "^sync,none,.*,$ranks shard=$m,[0-9.]*,exact,[0-9][0-9]*,[a-z]*$" "$f" ||
      fail "$what: no well-formed row for sync with algorithm.shard $m"
  done
  for m in optimizer gradients; do
    grep -q "^pipe_sgd,none,.*,$ranks shard=$m,[0-9.]*,stale,[0-9][0-9]*,[a-z]*$" "$f" ||
      fail "$what: no well-formed row for pipe_sgd with algorithm.shard $m"
  done
  grep -q "^pipe_sgd,none,.*shard=parameters" "$f" && fail "$what: pipe_sgd has a row for shard=parameters"
  for a in gossip d_psgd; do
    grep -q "^$a,none,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*,\(compute\|communication\),$ranks$tail_cols$" "$f" ||
      fail "$what: no well-formed row for $a,none"
  done
  for a in sync ps_sync pipe_sgd local_sgd hpsgd; do
    for c in none truncate16 quantize8; do
      grep -q "^$a,$c,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*,\(compute\|communication\),$ranks$tail_cols$" "$f" ||
        fail "$what: no well-formed row for $a,$c"
    done
  done
  # SAPipe's rows say how many layers are stale.
  for c in none truncate16 quantize8; do
    grep -q "^sapipe,$c,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*,\(compute\|communication\),k=[0-9]*$tail_cols$" "$f" ||
      fail "$what: no well-formed row for sapipe,$c"
  done
  # PipeDream's planner: its stages' replicas, summing to the ranks.
  local conf
  conf=$(grep "^pipedream,none,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*,\(compute\|communication\),[0-9-]*$tail_cols$" "$f" | cut -d, -f7)
  [ -n "$conf" ] || fail "$what: no well-formed row for pipedream"
  [ "$(echo "$conf" | tr '-' '\n' | awk '{ s += $1 } END { print s }')" = "$ranks" ] ||
    fail "$what: pipedream configuration $conf does not use $ranks ranks"
}
# configuration of ALGORITHM,CODEC in FILE
configuration() { grep "^$2,$3," "$1" | cut -d, -f7; }
# predicted_iteration_s of ALGORITHM,CODEC in FILE
predicted() { grep "^$2,$3," "$1" | cut -d, -f5; }

if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  out=$("$DTRAIN" plan --config "$ROOT/configs/fashion_mlp_sync.yaml" --ranks 2 \
        --csv "$WORK/mlp.csv" 2>&1); rc=$?
  [ "$rc" -eq 0 ] || fail "plan fashion_mlp_sync: exit code $rc: $out"
  check_csv "$WORK/mlp.csv" "fashion_mlp_sync" 2
  echo "$out" | grep -q "recommendation" || fail "no recommendation line: $out"
  echo "$out" | grep -q "shared-memory" || fail "no-link plan does not say the link is local"
  # PipeDream's replicas run whole minibatches: a small model's whole step is timed, not scaled.
  echo "$out" | grep -q "l_whole .* whole minibatch of 100 .*timed on a 1-rank build" ||
    fail "no timed l_whole line: $out"
else
  echo "skip: fashion_mlp_sync (no Fashion-MNIST installed)"
fi

cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/out"
"$DTRAIN" plan --config "$cfg" --ranks 4 --csv "$WORK/fast.csv" \
  --set cluster.link.bandwidth=10Gbps --set cluster.link.latency=20us >"$WORK/fast.txt" 2>&1 ||
  fail "plan on a 10 Gbit/s link failed: $(cat "$WORK/fast.txt")"
check_csv "$WORK/fast.csv" "tiny, 10Gbps" 4
grep -q "emulated (cluster.link)" "$WORK/fast.txt" || fail "plan with cluster.link does not name it"
# Each `dtrain plan` profiles this machine anew: compute_s is measured, and on a loaded machine
# one stalled iteration (the data loader's, say) adds milliseconds to it. A comparison that
# involves it is made only where the link puts the answer out of any stall's reach: at 100 kbit/s
# an all-reduce of these 2212 floats takes about a second, at 10 Gbit/s well under a millisecond
# (over 1000x apart). The comparisons within one plan share its measurements.
"$DTRAIN" plan --config "$cfg" --ranks 4 --csv "$WORK/slow.csv" \
  --set cluster.link.bandwidth=100Kbps --set cluster.link.latency=20us >/dev/null 2>&1 ||
  fail "plan on a 100 kbit/s link failed"
# A 100000x slower link: communication-bound, and D-Sync slower than on the fast link.
grep -q "^sync,none,.*,communication,4," "$WORK/slow.csv" || fail "sync,none not communication-bound at 100 kbit/s"
awk -v s="$(predicted "$WORK/slow.csv" sync none)" -v f="$(predicted "$WORK/fast.csv" sync none)" \
  'BEGIN { exit !(s > f) }' || fail "sync,none is not slower on a slower link"
# Pipe-SGD hides computation behind communication: never slower than D-Sync, same codec.
for c in none truncate16 quantize8; do
  awk -v p="$(predicted "$WORK/slow.csv" pipe_sgd $c)" -v s="$(predicted "$WORK/slow.csv" sync $c)" \
    'BEGIN { exit !(p <= s) }' || fail "pipe_sgd,$c slower than sync,$c"
done

# SAPipe: a slower link needs at least as many stale layers, and SAPipe is never slower than
# D-Sync (k = 0 is D-Sync) nor than Pipe-SGD by more than the stall.
k_fast=$(configuration "$WORK/fast.csv" sapipe none); k_slow=$(configuration "$WORK/slow.csv" sapipe none)
[ "${k_slow#k=}" -ge "${k_fast#k=}" ] || fail "sapipe: $k_slow on the slow link, $k_fast on the fast one"
for c in none truncate16 quantize8; do
  awk -v a="$(predicted "$WORK/slow.csv" sapipe $c)" -v s="$(predicted "$WORK/slow.csv" sync $c)" \
    'BEGIN { exit !(a <= s) }' || fail "sapipe,$c slower than sync,$c"
done
"$DTRAIN" plan --config "$cfg" --ranks 4 --csv "$WORK/all.csv" --set cluster.link.bandwidth=100Kbps \
  --set "algorithm={name: sapipe, stale_layers: all}" >/dev/null 2>&1 || fail "plan with stale_layers: all failed"
k_all=$(configuration "$WORK/all.csv" sapipe none)
[ "${k_all#k=}" -ge "${k_slow#k=}" ] && [ "$k_all" = "$(configuration "$WORK/all.csv" sapipe quantize8)" ] ||
  fail "stale_layers: all gives $k_all (auto: $k_slow), or differs between codecs"
awk -v a="$(predicted "$WORK/all.csv" sapipe none)" -v p="$(predicted "$WORK/all.csv" pipe_sgd none)" \
  'BEGIN { exit !(a <= p * 1.0001) }' || fail "sapipe with all layers stale slower than pipe_sgd (K = 2)"

# Local SGD communicates every sync_period iterations: cheaper per iteration than D-Sync when
# communication-bound.
awk -v l="$(predicted "$WORK/slow.csv" local_sgd none)" -v s="$(predicted "$WORK/slow.csv" sync none)" \
  'BEGIN { exit !(l < s) }' || fail "local_sgd,none not faster than sync,none at 100 kbit/s"
# HPSGD all-reduces while it trains: faster than Local SGD, which waits every sync_period.
awk -v h="$(predicted "$WORK/slow.csv" hpsgd none)" -v l="$(predicted "$WORK/slow.csv" local_sgd none)" \
  'BEGIN { exit !(h < l) }' || fail "hpsgd,none not faster than local_sgd,none at 100 kbit/s"

# A gossip config with a ten times slower rank (stand-in data when the files are missing): the
# gossip and d_psgd rows are there; sync waits for the straggler every iteration, gossip only
# slows its own updates.
"$DTRAIN" plan --config "$ROOT/configs/paper/adpsgd/small/fashion_mlp_gossip_straggler.yaml" \
  --ranks 4 --set dataset.path="$WORK/no-fashion" --csv "$WORK/gossip.csv" >/dev/null 2>&1 ||
  fail "plan of the gossip straggler config failed"
check_csv "$WORK/gossip.csv" "gossip straggler" 4
awk -v g="$(predicted "$WORK/gossip.csv" gossip none)" -v s="$(predicted "$WORK/gossip.csv" sync none)" \
  'BEGIN { exit !(g < s / 2) }' || fail "gossip,none not twice as fast as sync,none with a 10x straggler"

# A dataset whose files are not here: planned on a stand-in of its shape, and said so.
out=$("$DTRAIN" plan --config "$ROOT/configs/paper/cifar100_cnn_dsync.yaml" --ranks 2 \
      --set dataset.path="$WORK/no-cifar" 2>&1) || fail "plan without the dataset files failed: $out"
echo "$out" | grep -q "STAND-IN" || fail "plan without the files does not say it stands in: $out"

# The GPT (AdamW, a tied head, [N, T, C] activations) on a stand-in of its corpus: every row, the
# update measured as AdamW's, and PipeDream's stages cut between transformer blocks.
out=$("$DTRAIN" plan --config "$ROOT/configs/gpt_kjv.yaml" --ranks 2 --csv "$WORK/gpt.csv" \
      --set dataset.path="$WORK/no-kjv.txt" 2>&1) || fail "plan of the GPT failed: $out"
check_csv "$WORK/gpt.csv" "gpt_kjv" 2
echo "$out" | grep -q "l_up .*AdamW update" || fail "the GPT's update is not AdamW's: $out"
starts=$(echo "$out" | grep -o "^chosen: stages \[[^]]*\]" | sed 's/^chosen: stages \[//; s/\]$//')
for s in $(echo "$starts" | tr -d ',' ); do
  case "$s" in transformer.h.[1-3].ln_1) ;; *) fail "the GPT's pipeline cut before $s, not between blocks" ;; esac
done
out=$("$DTRAIN" plan --config "$ROOT/configs/gpt_kjv.yaml" --ranks 4 --set dataset.path="$WORK/no-kjv.txt" \
      --set "algorithm={name: pipedream, replicas: [1, 1, 1, 1]}" 2>&1) || fail "plan of the GPT on 4 stages: $out"
echo "$out" | grep -q "^chosen: stages \[transformer.h.1.ln_1, transformer.h.2.ln_1, transformer.h.3.ln_1\]" ||
  fail "4 stages of the 4-block GPT are not its blocks: $(echo "$out" | grep "^chosen")"

# --profile plans PipeDream, the algorithm that plans from a layer profile: its keys need no
# algorithm.name.
printf 'layer,forward_ms,backward_ms,activation_bytes,parameter_bytes\nfc1,1,2,4096,400000\nfc2,2,4,4096,800000\nfc3,1,2,40,4000\n' \
  > "$WORK/profile.csv"
out=$("$DTRAIN" plan --profile "$WORK/profile.csv" --ranks 4 --set cluster.link.bandwidth=25Gbps \
      --set algorithm.partition_cost=runtime --csv "$WORK/profile_plan.csv" 2>&1) ||
  fail "plan --profile with a pipedream key and no algorithm.name: $out"
echo "$out" | grep -q "partition_cost: runtime" || fail "plan --profile ignored algorithm.partition_cost: $out"
grep -q "^pipedream,none," "$WORK/profile_plan.csv" || fail "plan --profile: no pipedream row"

expect_2() {  # expect_2 DESCRIPTION PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  local msg rc
  msg=$("$DTRAIN" "$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] || fail "$what: exit code $rc, expected 2 (stderr: $msg)"
  echo "$msg" | grep -q -- "$pattern" || fail "$what: message lacks '$pattern': $msg"
  [ ! -e "$WORK/bad.csv" ] || { fail "$what: wrote the CSV"; rm -f "$WORK/bad.csv"; }
}
expect_2 "batch not divisible by --ranks" "dataset.batch_size" \
  plan --config "$cfg" --ranks 3 --csv "$WORK/bad.csv"
expect_2 "batch error names the file" "tiny.yaml" plan --config "$cfg" --ranks 3 --csv "$WORK/bad.csv"
expect_2 "global batch 100 over 3 ranks" "divisible by --ranks 3 (nearest: 99 or 102)" \
  plan --config "$ROOT/configs/fashion_mlp_sync.yaml" --ranks 3 --csv "$WORK/bad.csv"
expect_2 "--ranks 0" "--ranks" plan --config "$cfg" --ranks 0 --csv "$WORK/bad.csv"
expect_2 "missing config" "nope.yaml" plan --config "$WORK/nope.yaml" --csv "$WORK/bad.csv"
expect_2 "bad --set" "foo.bar" plan --config "$cfg" --set foo.bar=1 --csv "$WORK/bad.csv"
expect_2 "no --config" "--config" plan --ranks 2
finish
