#!/usr/bin/env bash
# Rebuilds tests/data/demo_losses_libtorch_1.13.txt: xtrain at commit 4c3aebb (the last one on
# Debian's LibTorch 1.13) built in a Debian 12 chroot, so that LibTorch 1.13 never reaches this
# machine's own build, then the demo recipe's first 20 steps. Needs root and Debian's mirror;
# about 40 minutes on 2 cores (apt 2 min, build 21 min). Usage: scripts/libtorch-113-baseline.sh [CHROOT]
set -euo pipefail
cd "$(dirname "$0")/.."
chroot_dir=${1:-/var/tmp/xtrain-libtorch-113}
command -v debootstrap > /dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
[[ -d $chroot_dir/usr ]] || debootstrap --variant=minbase bookworm "$chroot_dir" http://deb.debian.org/debian
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
mount -t proc proc "$chroot_dir/proc"
trap 'umount "$chroot_dir/proc"' EXIT
chroot "$chroot_dir" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  --no-install-recommends build-essential cmake ninja-build libtorch-dev libgloo-dev libopenblas0-pthread \
  libyaml-cpp-dev libcli11-dev libfmt-dev nlohmann-json3-dev catch2 pkg-config libsentencepiece-dev \
  libpcre2-dev libicu-dev'
rm -rf "$chroot_dir/src" && mkdir -p "$chroot_dir/src"
git archive 4c3aebb | tar -x -C "$chroot_dir/src"
chroot "$chroot_dir" bash -c 'cd /src && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  > /dev/null && ninja -C build xtrain > /dev/null && rm -rf /tmp/demo113 && ./build/xtrain train recipes/demo.yaml \
  --set train.log_every=20 --set run.dir=/tmp/demo113 --stop-at-step 20'
out=tests/data/demo_losses_libtorch_1.13.txt
head -4 "$out" > "$out.new"
python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "loss" in r: print(r["step"], repr(r["loss"]))' "$chroot_dir/tmp/demo113/metrics.jsonl" >> "$out.new"
mv "$out.new" "$out"
echo "wrote $out"
