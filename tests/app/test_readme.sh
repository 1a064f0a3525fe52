#!/usr/bin/env bash
# The README's key reference is what `dtrain keys` prints (regenerate it with
# scripts/readme_keys.sh); --help lists the algorithms; no file cites what is outside the repository.
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
# The repository explains itself: no file cites the design notes or papers kept outside it (the
# GPU lab's bundle tool, which gpu_check.sh names as outside, is the one path that leaves it).
outside=$(cd "$ROOT" && grep -rIn --exclude-dir='build*' --exclude-dir=.git --exclude-dir=runs \
  -e 'DESIGN\.md' -e '\.\./shared/papers' -e '\.\./shared/DESIGN' . | grep -v '^./tests/app/test_readme.sh:')
[ -z "$outside" ] || fail "files cite what is not in the repository:
$outside"
for doc in docs/architecture.md third_party/README.md bench/README.md; do
  [ -f "$ROOT/$doc" ] || fail "$doc is missing"
done
# --help lists the algorithms.
help=$("$DTRAIN" --help)
for a in sync ps_sync pipe_sgd local_sgd hpsgd; do
  echo "$help" | grep -q "^  $a\$" || fail "--help does not list $a"
done
finish
