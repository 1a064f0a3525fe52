#!/usr/bin/env bash
# --help says what applies: the top level lists the algorithms and models (what --config
# chooses); `plan`, `bench` and `bench comm` do not repeat that list (a subcommand would inherit
# it); --progress shows its values, not how they are parsed.
source "$(dirname "$0")/lib.sh"
"$DTRAIN" --help > "$WORK/top.txt" || fail "dtrain --help: exit $?"
grep -q "^Algorithms (algorithm.name" "$WORK/top.txt" || fail "dtrain --help lacks the algorithms"
grep -q -- "--progress auto|bar|log|none$" "$WORK/top.txt" \
  || fail "--progress in --help: $(grep -- --progress "$WORK/top.txt")"
grep -q -- "->" "$WORK/top.txt" && fail "dtrain --help shows a mapping: $(grep -- "->" "$WORK/top.txt")"
for sub in "plan" "keys" "bench" "bench comm"; do
  # shellcheck disable=SC2086  # the words of the subcommand
  "$DTRAIN" $sub --help > "$WORK/sub.txt" || fail "dtrain $sub --help: exit $?"
  grep -q "^Usage: dtrain $sub" "$WORK/sub.txt" || fail "dtrain $sub --help: $(head -3 "$WORK/sub.txt")"
  ! grep -q "^Algorithms (\|^Models (\|^Layer types" "$WORK/sub.txt" \
    || fail "dtrain $sub --help lists the algorithms or models, which do not apply to it"
  ! grep -q -- "--dry-run\|--resume\|--progress" "$WORK/sub.txt" \
    || fail "dtrain $sub --help lists an option of training"
done
grep -q -- "--ranks" <("$DTRAIN" plan --help) || fail "dtrain plan --help lacks --ranks"
finish
