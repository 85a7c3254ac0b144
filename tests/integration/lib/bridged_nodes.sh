# Nodes on one machine joined by a switch: COUNT network namespaces, each with its own loopback and
# one end of a veth pair whose other end is a port of a bridge in one more namespace, so any node
# can be lost (its processes killed, its link cut) while the others keep talking. The addresses
# 192.0.2.1 ... (TEST-NET-1, never routed) exist only inside the namespaces, and no namespace has a
# route anywhere else. Needs root and iproute2's `ip`; without them the test fails, it does not
# skip. Used by the elastic tests (elastic_nodes.sh, elastic_torchrun.sh), which source
# tests/integration/lib/expect.sh first and set $work.

namespaces=()  # the nodes' namespaces, node i in namespaces[i]
switch=""      # the bridge's namespace
pids=()        # background jobs started in the nodes (stopped by remove_bridged_nodes)

# bridged_session TAG COUNT: a scratch folder $work (TMPDIR too; KEEP=1 keeps it) and a folder
# for the nodes' host-memory checkpoints $node_memory (under /dev/shm), both removed on exit with
# the nodes; then make_bridged_nodes TAG COUNT.
bridged_session() {
  work=$(mktemp -d)
  node_memory=/dev/shm/xtrain-nodes-$$
  trap 'remove_bridged_nodes; rm -rf "$node_memory"; [[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
  trap 'exit 130' INT TERM
  export TMPDIR=$work
  make_bridged_nodes "$1" "$2"
}

# make_bridged_nodes TAG COUNT: the namespaces "${TAG}n0" ... and "${TAG}sw". An interface name
# holds at most 15 characters: keep TAG short and unique per run ("xe$$"). The caller removes them
# with remove_bridged_nodes, from an EXIT trap.
make_bridged_nodes() {
  local tag=$1 count=$2 i
  command -v ip > /dev/null || fail "ip (iproute2) is missing: the nodes are network namespaces (apt-get install iproute2)"
  [[ $(id -u) == 0 ]] || fail "making network namespaces needs root (ip netns add); run as root"
  switch="${tag}sw"
  ip netns add "$switch"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  for ((i = 0; i < count; ++i)); do
    namespaces+=("${tag}n$i")
    ip netns add "${namespaces[i]}"
    ip link add "${tag}v$i" netns "${namespaces[i]}" type veth peer name "p$i" netns "$switch"
    ip -n "$switch" link set "p$i" master br0 up
    ip -n "${namespaces[i]}" link set lo up
    ip -n "${namespaces[i]}" addr add "192.0.2.$((i + 1))/24" dev "${tag}v$i"
    ip -n "${namespaces[i]}" link set "${tag}v$i" up
  done
}

# remove_bridged_nodes: stops the jobs in $pids and whatever else still runs in the namespaces,
# then deletes them (which deletes the veth pairs). Safe to call twice or before make_bridged_nodes.
remove_bridged_nodes() {
  local pid ns
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null || true; done
  done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  for ns in "${namespaces[@]}" $switch; do ip netns del "$ns" 2> /dev/null || true; done
}

# start_node RUN NODE NNODES [launch options...]: the node's launcher in its namespace, training
# $work/recipe.yaml into $work/RUN (node 0's store on $port), each output line stamped with the
# time it arrived ($EPOCHREALTIME), into $work/RUN.nodeN.log. The ranks' stdout is line-buffered
# (stdbuf) so that their lines arrive when printed. With $node_memory set, the node keeps its
# checkpoints in host memory under $node_memory/nodeN (checkpoint.in_memory).
start_node() {
  local run=$1 node=$2 nnodes=$3
  shift 3
  local environment=()
  [[ -z ${node_memory:-} ]] || environment=(env "XTRAIN_NODE_MEMORY_DIR=$node_memory/node$node")
  ip netns exec "${namespaces[node]}" "${environment[@]}" "$xtrain" launch --nnodes "$nnodes" --node-rank "$node" \
    --nproc-per-node 1 --master-addr 192.0.2.1 --master-port "$port" --max-restarts 1 --heartbeat 0.5 "$@" \
    --program stdbuf -- -oL "$xtrain" train "$work/recipe.yaml" --set run.dir="$work/$run" 2>&1 |
    while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done > "$work/$run.node$node.log" &
  pids+=($!)
}

# start_with_spare RUN [SECONDS]: nodes 0 and 1 train RUN (--nnodes 2:3 --active-nodes 2), then
# node 2 starts and waits as their hot spare; each wait at most SECONDS (default 30).
start_with_spare() {
  local run=$1 seconds=${2:-30}
  start_node "$run" 0 2:3 --active-nodes 2
  start_node "$run" 1 2:3 --active-nodes 2
  wait_for "$work/$run.node0.log" "attempt 0 runs on nodes 0,1" "$seconds"
  start_node "$run" 2 2:3 --active-nodes 2  # after the others: node 2 is the spare
  wait_for "$work/$run.node2.log" "this node waits as a spare" "$seconds"
}

# wait_all: waits for every job in $pids; fails when any failed.
wait_all() {
  local pid status=0
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || status=1; done
  pids=()
  return $status
}

# kill_node NODE: SIGKILL to every process of the node (launcher and ranks alike); prints the time.
kill_node() {
  local when=$EPOCHREALTIME
  ip netns pids "${namespaces[$1]}" | xargs -r kill -9
  echo "$when"
}

# wait_for LOG PATTERN SECONDS: until a line of LOG matches PATTERN (grep -E).
wait_for() {
  local deadline=$((SECONDS + $3))
  until grep -qE -- "$2" "$1" 2> /dev/null; do
    ((SECONDS < deadline)) || { tail -n 30 "$work"/*.log; fail "no '$2' in $1 within $3 s"; }
    sleep 0.05
  done
}

# first_time LOG PATTERN [AFTER]: the time stamp of LOG's first line matching PATTERN (awk's
# regular expression), after time AFTER. The logs' lines start with $EPOCHREALTIME.
first_time() {
  pattern=$2 awk -v after="${3:-0}" '$1 > after && $0 ~ ENVIRON["pattern"] { print $1; exit }' "$1"
}

# same_losses REFERENCE RUN STEPS LIMIT LABEL: the per-step losses of two run folders, every step
# of 1..STEPS in both; LIMIT 0 asks for them bit for bit, else the largest relative difference.
same_losses() {
  "$python" - "$@" <<'PY'
import json, sys
reference_dir, run_dir, steps, limit, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def losses(folder):
    records = [json.loads(line) for line in open(f"{folder}/metrics.jsonl")]
    return {r["step"]: r["loss"] for r in records if "loss" in r}
reference, run = losses(reference_dir), losses(run_dir)
assert reference.keys() == run.keys() and len(run) == steps, (sorted(reference), sorted(run))
if limit == 0:
    different = [s for s in run if run[s] != reference[s]]
    assert not different, [(s, reference[s], run[s]) for s in different]
    print(f"{label}: {steps} steps, every loss equal to the uninterrupted run's bit for bit")
else:
    worst = max(abs(run[s] - reference[s]) / abs(reference[s]) for s in run)
    print(f"{label}: {steps} steps, max loss difference {worst:.2e} (relative) from the uninterrupted run")
    assert worst <= limit, worst
PY
}
