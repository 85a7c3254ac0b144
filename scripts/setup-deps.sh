#!/usr/bin/env bash
# Installs the Debian packages xtrain needs to build, test and run, when any is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache
  libtorch-dev libgloo-dev libopenblas0-pthread
  libyaml-cpp-dev libcli11-dev libfmt-dev nlohmann-json3-dev catch2 pkg-config
  libsentencepiece-dev libpcre2-dev libicu-dev  # tokenizers
  python3-torch python3-numpy
  python3-sentencepiece  # trains the small model of the SentencePiece parity test
  libblas3  # the reference BLAS, only so that a test can provoke the slow-BLAS warning
)
# The BPE parity tests fetch their reference libraries with npm. A Node.js from another source
# (e.g. NodeSource) already ships npm and conflicts with Debian's npm package.
command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
