#!/usr/bin/env bash
# The guide explains itself: the key reference in docs/configuration.md is what `dtrain keys`
# prints (regenerate it with scripts/keys_reference.sh); every relative link of the README and
# docs/ reaches a file and, with #anchor, a heading of it; --help lists the algorithms; no file
# cites what is outside the repository.
source "$(dirname "$0")/lib.sh"

ref="$ROOT/docs/configuration.md"
begin="<!-- dtrain keys: begin -->"
end="<!-- dtrain keys: end -->"
grep -q "$begin" "$ref" || fail "docs/configuration.md has no '$begin' marker"
awk -v b="$begin" -v e="$end" '$0 == e { inside = 0 } inside { print } $0 == b { inside = 1 }' \
  "$ref" > "$WORK/reference.txt"
"$DTRAIN" keys > "$WORK/keys.txt" || fail "dtrain keys: exit code $?"
diff -u "$WORK/reference.txt" "$WORK/keys.txt" > "$WORK/diff.txt" ||
  fail "docs/configuration.md's key reference differs from 'dtrain keys' (run scripts/keys_reference.sh):
$(head -40 "$WORK/diff.txt")"
# Links: GitHub's heading anchors (lower case, punctuation dropped, spaces to hyphens).
broken=$(cd "$ROOT" && /usr/bin/python3 - README.md docs/*.md bench/README.md configs/paper/README.md \
  configs/paper/*/README.md datasets/README.md third_party/README.md <<'PY'
import os, re, sys
def anchors(path):
    found, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found
for doc in sys.argv[1:]:
    if not os.path.exists(doc):
        continue
    text = re.sub(r"```.*?```", "", open(doc, encoding="utf-8").read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not os.path.exists(file):
            print(f"{doc}: {target}: no such file")
        elif anchor and file.endswith(".md") and anchor not in anchors(file):
            print(f"{doc}: {target}: no heading #{anchor} in {file}")
PY
)
[ -z "$broken" ] || fail "broken links:
$broken"
# The repository explains itself: no file cites the design notes or papers kept outside it (the
# GPU lab's bundle tool, which gpu_check.sh names as outside, is the one path that leaves it).
outside=$(cd "$ROOT" && grep -rIn --exclude-dir='build*' --exclude-dir=.git --exclude-dir=runs \
  -e 'DESIGN\.md' -e '\.\./shared/papers' -e '\.\./shared/DESIGN' . | grep -v '^./tests/app/test_readme.sh:')
[ -z "$outside" ] || fail "files cite what is not in the repository:
$outside"
for doc in docs/architecture.md docs/configuration.md third_party/README.md bench/README.md; do
  [ -f "$ROOT/$doc" ] || fail "$doc is missing"
done
# The README is the guide's front page: the two commands, the tour, the map; not the reference.
grep -q '^scripts/test.sh$' "$ROOT/README.md" || fail "README.md does not show scripts/test.sh"
grep -q '^scripts/quickstart.sh$' "$ROOT/README.md" || fail "README.md does not show scripts/quickstart.sh"
grep -q "$begin" "$ROOT/README.md" && fail "README.md still holds the key reference"
# --help lists the algorithms.
help=$("$DTRAIN" --help)
for a in sync ps_sync pipe_sgd local_sgd hpsgd; do
  echo "$help" | grep -q "^  $a\$" || fail "--help does not list $a"
done
finish
