#!/usr/bin/env bash
# Rewrites the generated block of docs/configuration.md (between "<!-- dtrain keys: begin -->"
# and "<!-- dtrain keys: end -->") with `dtrain keys`: the algorithms and every key of an
# experiment file. tests/app/test_readme.sh fails when the block is not current.
#   scripts/keys_reference.sh [path/to/dtrain]
set -euo pipefail
cd "$(dirname "$0")/.."
dtrain=${1:-build/apps/dtrain/dtrain}
keys=$("$dtrain" keys)
/usr/bin/python3 - "$keys" <<'PY'
import re, sys
path = "docs/configuration.md"
text = open(path).read()
begin, end = "<!-- dtrain keys: begin -->", "<!-- dtrain keys: end -->"
i, j = text.index(begin) + len(begin), text.index(end)
open(path, "w").write(text[:i] + "\n" + sys.argv[1].rstrip("\n") + "\n" + text[j:])
PY
echo "docs/configuration.md: key reference rewritten from $dtrain keys"
