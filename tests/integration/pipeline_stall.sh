#!/usr/bin/env bash
# A pipeline stage that stalls in the middle of a step ends the job within dist.timeout_s + 15 s,
# its neighbours naming the receive and the peer. Held to a time limit, it runs alone
# (tests/CMakeLists.txt); the layouts' parity is pipeline_parallel.sh's.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
write_recipe "$work/recipe.yaml" 20
four=(--set model.num_layers=4 --set optim.lr=1e-3)

# Stage 2 of 4 stalls in its second micro batch's forward at step 3: stage 3 waits for its
# activation, stage 1 for its gradient; each names the receive and the peer.
started=$(date +%s)
if XTRAIN_FAULT=stall_in_step:2:3 "$xtrain" launch --nproc-per-node 4 --master-port "$(free_port)" -- train \
    "$work/recipe.yaml" --set run.dir="$work/stall" "${four[@]}" --set data.pack=true --set parallel.pp=4 \
    --set parallel.fsdp=1 --set dist.timeout_s=10 > "$work/stall.log" 2>&1; then
  echo "the stalled pipeline exited 0"; exit 1
fi
elapsed=$(( $(date +%s) - started ))
grep -q "\[rank 3\]: error: recv from rank 2 on group 'pp' (ranks 0,1,2,3) did not complete within dist.timeout_s=10" "$work/stall.log" || { cat "$work/stall.log"; exit 1; }
echo "stalled stage 2: the job ended after ${elapsed} s (dist.timeout_s 10); $(grep -o 'rank 3\]: error: recv from rank 2[^:]*' "$work/stall.log")"
(( elapsed <= 10 + 15 + 5 ))  # 5 s to start the ranks and reach step 3
