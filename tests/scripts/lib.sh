# shellcheck shell=bash
# Shared by the tests of scripts/sweep.py and scripts/plot.py: the helpers of the app tests
# ($DTRAIN $ROOT $WORK fail finish write_synthetic_config), Debian's python3 and a sweep runner.
# shellcheck source=../app/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../app/lib.sh"
# The tests cd into $WORK: make the arguments absolute.
DTRAIN=$(realpath "$DTRAIN")
ROOT=$(realpath "$ROOT")
PY=/usr/bin/python3
SWEEP="$ROOT/scripts/sweep.py"
# shellcheck disable=SC2034  # used by test_plot.sh
PLOT="$ROOT/scripts/plot.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# skip_without_modules MODULE... — exit 77 (CTest: skipped) when Debian's python3 lacks one.
skip_without_modules() {
  local module
  for module in "$@"; do
    if ! "$PY" -c "import $module" 2>/dev/null; then
      echo "SKIP: $PY has no module $module (apt-get install python3-$module)"
      exit 77
    fi
  done
}

# sweep ARGS... — scripts/sweep.py with this build's dtrain.
sweep() { "$PY" "$SWEEP" --dtrain "$DTRAIN" "$@"; }

# check_python DESCRIPTION SCRIPT ARGS... — run a Python check; it prints why it fails.
check_python() {
  local description=$1
  shift
  local output
  if ! output=$("$PY" - "$@" 2>&1); then
    fail "$description: $output"
  fi
}
