#!/usr/bin/env bash
# Installs what xtrain needs to build, test and run: Debian packages when any is missing, and a
# Python virtual environment in .venv (ignored by git) holding the pinned torch 2.11.0 wheel,
# whose LibTorch the build links, and the Python references the tests compare with.
# XTRAIN_VENV=PATH puts the environment elsewhere; LIBTORCH=PATH (an unpacked LibTorch archive)
# still gets the environment, which the tests need for their references and torchrun.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libyaml-cpp-dev libcli11-dev nlohmann-json3-dev catch2
  libgloo-dev  # headers only: the torch wheel compiles Gloo in but ships no gloo/*.h for ProcessGroupGloo.hpp
  libsentencepiece-dev libpcre2-dev libicu-dev  # tokenizers
  libpng-dev libjpeg62-turbo-dev  # image decoding (lib/image/image_decode.h)
  libxxhash-dev  # checkpoint checksums (header-only use)
  clang libclang-rt-dev  # the fuzz targets: libFuzzer, ASan, UBSan (scripts/fuzz.sh)
  python3-venv
  chromium  # a headless browser for the TensorBoard page check (tools/browser/page_capture.py)
  slurmctld slurmd slurm-client munge  # a one-node SLURM for the batch-script tests (scripts/slurm/local-cluster.sh)
)
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

venv=${XTRAIN_VENV:-.venv}
stamp=$venv/.xtrain-requirements
wanted=$(cat requirements/torch.txt requirements/python.txt | sha256sum | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$wanted" ]]; then
  start=$(date +%s)
  python=$(command -v python3)
  [[ -x $venv/bin/python3 ]] || "$python" -m venv "$venv"
  # --no-deps: the torch wheel's nvidia-* dependencies (2.1 GB) duplicate the CUDA toolkit, and
  # requirements/python.txt pins the whole closure of the references' dependencies.
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r requirements/torch.txt
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r requirements/python.txt
  echo "$wanted" > "$stamp"
  echo "setup-deps: Python environment $venv ready in $(( $(date +%s) - start )) s"
fi
