#!/usr/bin/env bash
# Every experiment under configs/ (recursively) is valid as shipped: `dtrain --dry-run` in one
# process exits 0 and ends with `parameters: N`, also where its dataset is not on this machine
# (the dry run then builds the model on a stand-in of the dataset's shape, and says so). A config
# whose stragglers name other ranks than 0 is noted as not checked for them, passes with
# `--ranks N` for enough ranks and is exit 2 naming the key with `--ranks 1`. No two configs
# share an output.dir, and configs/paper/ is what configs/paper/generate.py writes.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

# The value of `KEY` in the top-level map `SECTION` of a config, in flow style (also wrapped
# over several lines) or block style; empty when absent. Enough for the flat keys read here.
section_value() {
  awk -v section="$2" -v key="$3" '
    function flush() {
      if (done || text == "") return
      done = 1
      gsub(/[{}]/, ",", text)
      n = split(text, parts, ",")
      for (i = 1; i <= n; ++i) {
        p = parts[i]
        sub(/^[ \t]+/, "", p)
        if (index(p, key ":") == 1) {
          v = substr(p, length(key) + 2)
          gsub(/^[ \t"'\'']+|[ \t"'\'']+$/, "", v)
          print v
          return
        }
      }
    }
    /^[^ \t#]/ { if (inside) { flush(); exit } inside = (index($0, section ":") == 1)
                 if (inside) { line = substr($0, length(section) + 2) } else next }
    inside && !/^[^ \t#]/ { line = $0 }
    inside { sub(/[ \t]#.*$/, "", line); if (line !~ /^[ \t]*#/) text = text "," line }
    END { if (inside) flush() }' "$1"
}

top_value() {
  sed -n "s/^$2:[[:space:]]*//p" "$1" | sed 's/[[:space:]]#.*$//; s/^["'\'']//; s/["'\'']*[[:space:]]*$//' | head -1
}

checked=0
skipped=0
: > "$WORK/dirs.txt"
while IFS= read -r cfg; do
  name=$(top_value "$cfg" name)
  [ -n "$name" ] || name=$(basename "$cfg" .yaml)
  dir=$(section_value "$cfg" output dir)
  [ -n "$dir" ] || dir="runs/$name"
  dir=${dir#./}
  echo "${dir%/} $cfg" >> "$WORK/dirs.txt"

  dataset=$(section_value "$cfg" dataset name)
  path=$(section_value "$cfg" dataset path)
  [ "$dataset" = fashion_mnist ] && [ -z "$path" ] && path=/usr/share/datasets/fashion-mnist
  missing=0
  if [ "$dataset" != synthetic ] && [ ! -e "$path" ]; then
    missing=1
    skipped=$((skipped + 1))
  fi
  log="$WORK/dry.txt"
  timeout 60 "$DTRAIN" --config "$cfg" --dry-run < /dev/null > "$log" 2>&1
  rc=$?
  # A config whose stragglers name ranks: noted without --ranks; checked for as many ranks
  # (rounded up to even, for gossip) and refused for one.
  last=$(grep -o 'stragglers: \[{rank: [0-9]*' "$cfg" | grep -o '[0-9]*$' | sort -n | tail -1)
  if [ -n "$last" ] && [ "$last" -gt 0 ]; then
    grep -q "not checked: cluster.stragglers names rank $last; give --ranks N" "$log" \
      || fail "$cfg: the dry run does not note the unchecked stragglers: $(head -3 "$log")"
    ranks=$(((last + 2) / 2 * 2))
    timeout 60 "$DTRAIN" --config "$cfg" --dry-run --ranks "$ranks" < /dev/null \
      > "$WORK/ranks.txt" 2>&1 || fail "$cfg: --dry-run --ranks $ranks: exit $?: $(tail -3 "$WORK/ranks.txt")"
    timeout 60 "$DTRAIN" --config "$cfg" --dry-run --ranks 1 < /dev/null > "$WORK/one.txt" 2>&1
    one=$?
    [ "$one" -eq 2 ] && grep -q "cluster.stragglers\[[0-9]*\].rank: [0-9]*, but the job has 1" "$WORK/one.txt" \
      || fail "$cfg: --dry-run --ranks 1: exit $one, expected 2 naming the key: $(cat "$WORK/one.txt")"
  fi
  if [ "$rc" -ne 0 ]; then
    fail "$cfg: dry run exit code $rc: $(tail -3 "$log")"
  elif ! tail -n 1 "$log" | grep -qx "parameters: [0-9]*"; then
    fail "$cfg: dry run's last line: $(tail -n 1 "$log")"
  elif [ "$missing" -eq 1 ] && ! grep -q "STAND-IN" "$log"; then
    fail "$cfg: its dataset is missing, and the dry run does not say it stood in"
  fi
  checked=$((checked + 1))
done < <(find configs -name '*.yaml' | sort)

[ "$checked" -gt 0 ] || fail "no config under configs/ was dry-run"
dups=$(cut -d' ' -f1 "$WORK/dirs.txt" | sort | uniq -d)
for d in $dups; do
  fail "output.dir $d is shared by: $(awk -v d="$d" '$1 == d { printf "%s ", $2 }' "$WORK/dirs.txt")"
done

if command -v python3 > /dev/null; then
  python3 configs/paper/generate.py --check > "$WORK/gen.txt" 2>&1 \
    || fail "configs/paper/ differs from configs/paper/generate.py: $(cat "$WORK/gen.txt")"
else
  echo "skipped: python3 missing, configs/paper/generate.py --check not run"
fi

echo "$(wc -l < "$WORK/dirs.txt") configs, $checked dry-run, $skipped of them on a stand-in of their dataset"
finish
