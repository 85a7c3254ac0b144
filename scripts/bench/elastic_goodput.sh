#!/usr/bin/env bash
# Goodput of an elastic run that loses a node every few minutes: recipes/demo.yaml (micro batches
# of 8, so that 2 ranks keep its global batch of 16) under
# `xtrain launch` on network-namespace nodes (tests/integration/lib/bridged_nodes.sh), one rank
# a node, for --minutes; every --kill-every minutes every process of one working node other than
# node 0 gets SIGKILL, and its launcher is started again 5 s later with the same command.
#   --nodes 3 (default): --nnodes 2:3 --active-nodes 2; a hot spare takes the lost node's place,
#                        and the node started again waits as the next spare.
#   --nodes 2:           --nnodes 1:2; the run goes on on node 0, and grows back to 2 nodes at
#                        the first checkpoint after the node is back.
#   --in-memory:         checkpoint.in_memory, each node's memory folder in /dev/shm; a killed
#                        node's folder is removed with it, so a restart reads the lost node's
#                        files from the copy another node kept.
# At --minutes a STOP file ends the run (a checkpoint, exit 75); then `xtrain goodput` and the
# wall-clock arithmetic: the time the kills cost, against the launch's whole wall time.
#   scripts/bench/elastic_goodput.sh [--minutes 10] [--kill-every 2] [--nodes 3] [--checkpoint-every 20] [--in-memory]
# Needs root and iproute2's `ip`; uses build/xtrain ($XTRAIN), built by scripts/build.sh if missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=10 kill_every=2 nodes=3 checkpoint_every=20 in_memory=false
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --kill-every) kill_every=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --checkpoint-every) checkpoint_every=$2; shift 2 ;;
    --in-memory) in_memory=true; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ $nodes == 2 || $nodes == 3 ]] || { echo "--nodes is 2 or 3" >&2; exit 2; }
xtrain=${XTRAIN:-$PWD/build/xtrain}
[[ -x $xtrain ]] || bash scripts/build.sh > /dev/null
python=${XTRAIN_PYTHON:-.venv/bin/python3}
source tests/integration/lib/expect.sh
source tests/integration/lib/bridged_nodes.sh
bridged_session "xg$$" "$nodes"
if [[ $nodes == 3 ]]; then elastic=(--nnodes 2:3 --active-nodes 2); else elastic=(--nnodes 1:2); fi
run=$work/run

# start_node NODE: the node's launcher in its namespace, its output appended to $work/nodeN.log.
start_node() {
  ip netns exec "${namespaces[$1]}" env XTRAIN_NODE_MEMORY_DIR="$node_memory/node$1" "$xtrain" launch "${elastic[@]}" --node-rank "$1" --nproc-per-node 1 \
    --master-addr 192.0.2.1 --master-port 29800 --max-restarts 1000 --heartbeat 0.5 -- train recipes/demo.yaml \
    --set run.dir="$run" --set train.steps=1000000 --set train.micro_batch_size=8 --set train.threads=1 --set checkpoint.every="$checkpoint_every" \
    --set checkpoint.in_memory="$in_memory" \
    >> "$work/node$1.log" 2>&1 &
  pids+=($!)
}

# The working node to kill: the last attempt's members, less node 0.
victim() {
  grep -o 'attempt [0-9]* runs on nodes [0-9,]*' "$work/node0.log" | tail -n 1 | awk '{ print $NF }' |
    tr ',' '\n' | grep -v '^0$' | head -n 1
}

started=$EPOCHREALTIME
start_node 0
for ((node = 1; node < nodes; ++node)); do
  sleep 0.5
  start_node "$node"
done
kills=0
end=$((SECONDS + 60 * minutes))
next_kill=$((SECONDS + 60 * kill_every))
while ((SECONDS < end)); do
  sleep 1
  [[ -n $(jobs -rp) ]] || { tail -n 20 "$work"/node*.log; fail "every launcher has ended"; }
  ((SECONDS >= next_kill && SECONDS < end - 30)) || continue  # no restart under way at the STOP
  node=$(victim)
  [[ -n $node ]] || continue
  kill_node "$node" > /dev/null
  rm -rf "$node_memory/node$node"  # the node's memory is lost with it
  kills=$((kills + 1))
  echo "$(date -u +%T) killed node $node (kill $kills)" >&2
  sleep 5
  start_node "$node"
  next_kill=$((next_kill + 60 * kill_every))
done
# A STOP that ranks starting up find before their first step is removed, not obeyed: again until
# the launchers have ended.
touch "$run/STOP"
while [[ -n $(jobs -rp) ]]; do
  sleep 1
  [[ -e $run/STOP ]] || touch "$run/STOP"
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
pids=()
ended=$EPOCHREALTIME
"$xtrain" goodput "$run" | tee "$work/goodput.txt" || true
# Where each restart read its checkpoint (metrics.jsonl's resume records).
"$python" - "$run/metrics.jsonl" <<'PY'
import collections, json, sys
resumes = [r for r in map(json.loads, open(sys.argv[1])) if "resume_source" in r]
by_source = collections.defaultdict(list)
for r in resumes:
    by_source[r["resume_source"]].append(r["resume_read_s"])
print("resumes: " + ", ".join(f"{len(t)} from {s} ({min(t):.3f} to {max(t):.3f} s to read)" for s, t in by_source.items()))
PY
awk -v wall="$(awk -v a="$started" -v b="$ended" 'BEGIN { print b - a }')" -v kills="$kills" -v every="$kill_every" \
  -v minutes="$minutes" -v nodes="$nodes" -v in_memory="$in_memory" '
  /^  wall time/ { recorded = $3 }
  /^  productive/ { productive = $2 }
  /^  interruption/ { lost += $3; count++ }
  END {
    printf "settings: recipes/demo.yaml, %d namespace nodes (%s), %g min, a node killed every %g min: %d kills, %d interruptions%s\n",
      nodes, nodes == 3 ? "2 working + 1 spare" : "1 to 2 working", minutes, every, kills, count, in_memory == "true" ? ", checkpoints in memory" : ""
    printf "launch wall time %.1f s (the records cover %.1f s of it; before: start-up, after: the last stop)\n", wall, recorded
    printf "productive %.1f s = %.1f %% of the launch; the interruptions %.1f s = %.1f %%", productive, 100 * productive / wall, lost, 100 * lost / wall
    # With --nodes 2 a kill costs two interruptions: the restart on node 0, and the regroup.
    if (kills > 0) printf ", %.1f s a kill", lost / kills
    printf "\n"
    if (kills > 0) printf "at one kill every %g min: %.1f s / %.0f s = %.1f %% of the time lost to kills\n", every, lost / kills, 60 * every, 100 * lost / kills / (60 * every)
  }' "$work/goodput.txt"
