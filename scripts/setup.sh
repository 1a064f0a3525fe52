#!/usr/bin/env bash
# Installs every Debian package that dtrain's build, tests and default datasets need, and writes
# the default language-model corpus (the King James Bible, datasets/kjv/kjv.txt).
# Idempotent: packages already present are not touched, and a corpus already written is kept.
#   scripts/setup.sh           build + tests + Fashion-MNIST + the King James Bible
#   scripts/setup.sh --bench   also the benchmark peers (PyTorch with OpenBLAS)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build g++ pkg-config ccache
  libdnnl-dev            # oneDNN: the CPU backend
  libyaml-cpp-dev        # experiment files
  libcli11-dev           # command line
  nlohmann-json3-dev     # model.safetensors' JSON header
  libspdlog-dev libfmt-dev
  libopenmpi-dev openmpi-bin
  libopencv-dev          # imagefolder datasets
  zlib1g-dev             # .gz idx files
  doctest-dev            # unit tests
  dataset-fashion-mnist  # the default experiment's data
  bible-kjv              # the default language-model corpus (the `bible` command)
  python3
  python3-matplotlib python3-yaml  # scripts/sweep.py, scripts/plot.py
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch python3-numpy libopenblas0-pthread)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
    sudo=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The King James Bible as plain text, one verse a line without its reference: `bible -f` prints
# "Ge1:1 In the beginning ..." one verse a line (-f turns pretty-printing off), and the range
# Gen1:1-Rev22:21 is the whole text. Written to a temporary file first and renamed, so that an
# interrupted setup leaves no partial corpus.
corpus=datasets/kjv/kjv.txt
if [[ -s $corpus ]]; then
  echo "setup: $corpus present"
else
  mkdir -p "$(dirname "$corpus")"
  tmp=$(mktemp "$corpus.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  bible -f Gen1:1-Rev22:21 | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' >"$tmp"
  verses=$(wc -l <"$tmp")
  if [[ $verses -ne 31102 ]] || grep -qE '^[1-3]?[A-Za-z]+[0-9]+:[0-9]+( |$)' "$tmp"; then
    echo "setup: bible printed $verses verses, expected the 31102 of the King James Bible" >&2
    exit 1
  fi
  chmod 644 "$tmp"
  mv "$tmp" "$corpus"
  trap - EXIT
  echo "setup: wrote $corpus ($(wc -c <"$corpus") bytes, $verses verses)"
fi
echo "setup: done"
