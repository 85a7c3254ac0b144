#!/usr/bin/env bash
# Downloads the Debian packages that the GPU machine lacks (it has torch 2.11, CUDA 13.0, CMake
# and ninja, and no package registry) into .deps/debs, which `run` carries there and
# scripts/device/run.sh unpacks with dpkg -x. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
packages=(
  libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev catch2 nlohmann-json3-dev libgloo-dev
  libsentencepiece-dev libsentencepiece0 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libicu-dev libicu72 icu-devtools
  libxxhash-dev
  libpng-dev libpng16-16 zlib1g-dev libjpeg62-turbo-dev libjpeg62-turbo
)
mkdir -p .deps/debs
cd .deps/debs
missing=()
for package in "${packages[@]}"; do
  compgen -G "${package}_*.deb" > /dev/null || missing+=("$package")
done
if ((${#missing[@]})); then
  apt-get download "${missing[@]}" > /dev/null
fi
ls -1 ./*.deb | wc -l | xargs echo "fetch-deps: packages in .deps/debs:"
du -sh . | cut -f1 | xargs echo "fetch-deps: size"
