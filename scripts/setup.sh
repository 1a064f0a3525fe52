#!/usr/bin/env bash
# Installs every Debian package that dtrain's build, tests and default dataset need.
# Idempotent: packages already present are not touched, and nothing runs when all are there.
#   scripts/setup.sh           build + tests + Fashion-MNIST
#   scripts/setup.sh --bench   also the benchmark peers (PyTorch with OpenBLAS)
set -euo pipefail

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
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
