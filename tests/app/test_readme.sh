#!/usr/bin/env bash
# The README's key reference is what `dtrain keys` prints: the registry's algorithms and every
# key of the schema (regenerate it with scripts/readme_keys.sh).
source "$(dirname "$0")/lib.sh"

begin="<!-- dtrain keys: begin -->"
end="<!-- dtrain keys: end -->"
grep -q "$begin" "$ROOT/README.md" || fail "README.md has no '$begin' marker"
awk -v b="$begin" -v e="$end" '$0 == e { inside = 0 } inside { print } $0 == b { inside = 1 }' \
  "$ROOT/README.md" > "$WORK/readme.txt"
"$DTRAIN" keys > "$WORK/keys.txt" || fail "dtrain keys: exit code $?"
diff -u "$WORK/readme.txt" "$WORK/keys.txt" > "$WORK/diff.txt" ||
  fail "README.md's key reference differs from 'dtrain keys' (run scripts/readme_keys.sh):
$(head -40 "$WORK/diff.txt")"
# --help lists the algorithms.
help=$("$DTRAIN" --help)
for a in sync ps_sync pipe_sgd local_sgd hpsgd; do
  echo "$help" | grep -q "^  $a\$" || fail "--help does not list $a"
done
finish
