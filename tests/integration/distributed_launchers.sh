#!/usr/bin/env bash
# The same training job started three ways gives identical per-step losses: `xtrain launch` with
# two ranks, real torchrun (from the torch wheel) with two ranks, and a two-node job formed on
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

# torchrun is the torch wheel's, in the project's Python environment.
python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
"$python" -m torch.distributed.run --nproc_per_node 2 --master_port "$(free_port)" \
  --tee 3 --log_dir "$work/torchrun-logs" --no_python \
  "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/torchrun" > "$work/torchrun.log" 2>&1 || {
  cat "$work/torchrun.log"
  exit 1
}
diff <(losses "$work/launch") <(losses "$work/torchrun")
echo "torchrun: $(losses "$work/torchrun" | wc -l) losses identical to xtrain launch"

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
