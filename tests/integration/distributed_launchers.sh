#!/usr/bin/env bash
# The same training job started three ways gives identical per-step losses: `xtrain launch` with
# two ranks, real torchrun (Debian's python3-torch) with two ranks, and a two-node job formed on
# this machine by two `xtrain launch --nnodes 2` processes of one rank each.
set -euo pipefail
xtrain=$1
srcdir=$2
source "$srcdir/tests/integration/lib/distributed.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work  # a failed launch keeps its error files under TMPDIR
write_recipe "$work/recipe.yaml" 10

"$xtrain" launch --nproc-per-node 2 --master-port "$(free_port)" -- \
  train "$work/recipe.yaml" --set run.dir="$work/launch" > "$work/launch.log" 2>&1

if /usr/bin/python3 -c 'import torch.distributed.run' 2> /dev/null; then
  # Python 3.11 breaks torch 1.13's parsing of the default "--redirects 0"; 1 (stdout) parses.
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 --master_port "$(free_port)" \
    --redirects 1 --tee 1 --log_dir "$work/torchrun-logs" --no_python \
    "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/torchrun" > "$work/torchrun.log" 2>&1 || {
    cat "$work/torchrun.log"
    exit 1
  }
  diff <(losses "$work/launch") <(losses "$work/torchrun")
  echo "torchrun: $(losses "$work/torchrun" | wc -l) losses identical to xtrain launch"
else
  echo "python3-torch is not installed: skipping the torchrun comparison" >&2
  exit 77
fi

port=$(free_port)
for node in 0 1; do
  "$xtrain" launch --nnodes 2 --node-rank "$node" --nproc-per-node 1 --master-addr 127.0.0.1 \
    --master-port "$port" -- train "$work/recipe.yaml" --set run.dir="$work/two-nodes" \
    > "$work/node$node.log" 2>&1 &
done
wait %1 && wait %2 || {
  cat "$work"/node*.log
  exit 1
}
diff <(losses "$work/launch") <(losses "$work/two-nodes")
echo "two nodes: $(losses "$work/two-nodes" | wc -l) losses identical to xtrain launch"
