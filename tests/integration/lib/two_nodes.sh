# Two nodes on one machine, joined by a real network link: two network namespaces, each with its
# own loopback and one end of a veth pair. The addresses (192.0.2.1 and 192.0.2.2, TEST-NET-1,
# which is never routed) exist only inside the namespaces, and neither namespace has a route
# anywhere else, so no traffic leaves them. Everything crossing between the nodes shows in the
# veth's counters. Needs root and iproute2's `ip`. Used by tests/integration/two_nodes.sh and
# scripts/bench/two-nodes.sh; both source tests/integration/lib/distributed.sh first (free_port
# is not needed: each namespace has its own ports).

node_addr=(192.0.2.1 192.0.2.2)
node_ns=()
node_if=()
node_pids=()

# make_nodes TAG: creates the namespaces "${TAG}n0", "${TAG}n1" joined by the veth ends "${TAG}v0"
# and "${TAG}v1" (an interface name holds at most 15 characters: keep TAG short and unique per
# run, e.g. "xt$$"). The caller removes them with remove_nodes, from an EXIT trap.
make_nodes() {
  local tag=$1 i
  command -v ip > /dev/null ||
    fail "ip (iproute2) is missing: two nodes on one machine are network namespaces made with it (apt-get install iproute2)"
  [[ $(id -u) == 0 ]] || fail "making network namespaces needs root (ip netns add); run as root"
  node_ns=("${tag}n0" "${tag}n1")
  node_if=("${tag}v0" "${tag}v1")
  for i in 0 1; do ip netns add "${node_ns[i]}" || fail "ip netns add ${node_ns[i]} failed"; done
  ip link add "${node_if[0]}" netns "${node_ns[0]}" type veth peer name "${node_if[1]}" netns "${node_ns[1]}" ||
    fail "could not make the veth pair ${node_if[*]}"
  for i in 0 1; do
    ip -n "${node_ns[i]}" link set lo up
    ip -n "${node_ns[i]}" addr add "${node_addr[i]}/24" dev "${node_if[i]}"
    ip -n "${node_ns[i]}" link set "${node_if[i]}" up
  done
}

# remove_nodes: ends what still runs in the namespaces (the jobs started by start_node) and
# deletes them, which deletes the veth pair. Safe to call twice or before make_nodes.
remove_nodes() {
  local pid ns
  for pid in "${node_pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  for pid in "${node_pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  node_pids=()
  for ns in "${node_ns[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
}

# in_node I COMMAND...: runs COMMAND on node I (inside its namespace).
in_node() {
  local i=$1
  shift
  ip netns exec "${node_ns[i]}" "$@"
}

# link_bytes: the bytes that have crossed the link so far, both directions (node 0's end: what
# it sent plus what it received).
link_bytes() {
  local statistics=/sys/class/net/${node_if[0]}/statistics
  in_node 0 sh -c "echo \$(( \$(cat $statistics/tx_bytes) + \$(cat $statistics/rx_bytes) ))"
}

# run_two_nodes NAME LAUNCHER PORT [train args...]: trains $work/recipe.yaml into $work/NAME as 2
# nodes x 2 ranks, node 0 the master (192.0.2.1:PORT), started on each node by LAUNCHER:
#   launch    `xtrain launch --nnodes 2 --node-rank N --nproc-per-node 2 --master-addr 192.0.2.1`;
#   torchrun  real torchrun (the torch wheel's) `--nnodes 2 --node_rank N --nproc_per_node 2
#             --no_python`, with GLOO_SOCKET_IFNAME naming the node's veth.
# Each node's output goes to $work/NAME.nodeN.log, shown on failure.
run_two_nodes() {
  local name=$1 launcher=$2 port=$3 node status=0
  shift 3
  local python=${XTRAIN_PYTHON:-$srcdir/.venv/bin/python3}
  node_pids=()
  for node in 0 1; do
    local command
    case $launcher in
      launch)
        command=("$xtrain" launch --nnodes 2 --node-rank "$node" --nproc-per-node 2 --master-addr "${node_addr[0]}"
          --master-port "$port" -- train) ;;
      torchrun)
        command=(env "GLOO_SOCKET_IFNAME=${node_if[node]}" "$python" -m torch.distributed.run --nnodes 2
          --node_rank "$node" --nproc_per_node 2 --master_addr "${node_addr[0]}" --master_port "$port"
          --no_python "$xtrain" train) ;;
      *) fail "run_two_nodes: unknown launcher $launcher" ;;
    esac
    in_node "$node" "${command[@]}" "$work/recipe.yaml" --set run.dir="$work/$name" "$@" \
      > "$work/$name.node$node.log" 2>&1 &
    node_pids+=($!)
  done
  for node in 0 1; do wait "${node_pids[node]}" || status=$?; done
  node_pids=()
  if [[ $status != 0 ]]; then
    tail -n 40 "$work/$name".node*.log
    fail "$name ($launcher, 2 nodes x 2 ranks) exited $status"
  fi
}
