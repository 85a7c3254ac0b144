# Node 1 of a 2-node launch without node 0: started alone (node 0 never comes), and with node 0
# gone mid-run (its launcher and rank killed with SIGKILL). Either way node 1 ends within a few
# seconds with its one-line message naming the launchers' store, and without c10d's log of each
# failed attempt ("[c10d] ...", "Exception raised from ...", "frame #").
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 3000
port=$(free_port_pair)
node() {  # node RANK: one node's launcher with one rank, short timeouts
  "$xtrain" launch --nnodes 2 --node-rank "$1" --nproc-per-node 1 --master-port "$port" --join-timeout 1 -- \
    train "$work/recipe.yaml" --set run.dir="$work/run" --set dist.timeout_s=3 --set dist.init_timeout_s=3
}
no_trace() {  # no_trace LOG: none of c10d's own lines
  ! grep -q "Exception raised from\|frame #\|\[c10d\]" "$1" || { cat "$1"; fail "c10d's log lines in $1"; }
}
store="the launchers' store at 127.0.0.1:$((port + 1)) (node 0's launcher hosts it)"

# Alone: node 0's launcher never comes.
start=$SECONDS
expect_exit 1 "$work/alone.log" node 1
(( SECONDS - start < 15 )) || fail "node 1 alone took $((SECONDS - start)) s to give up"
no_trace "$work/alone.log"
expect_text "$work/alone.log" "error: launch: cannot connect to $store: "
expect_text "$work/alone.log" "; start node 0's launcher with the same --master-addr and --master-port within --join-timeout=1"
[[ $(wc -l < "$work/alone.log") -le 2 ]] || { cat "$work/alone.log"; fail "more than the notice and the error"; }

# Gone: node 0's launcher and rank are killed once the job has trained a few steps.
port=$(free_port_pair)
store="the launchers' store at 127.0.0.1:$((port + 1)) (node 0's launcher hosts it)"
node 1 > "$work/gone.log" 2>&1 &
node1=$!
node 0 > "$work/node_0.log" 2>&1 &
node0=$!
for _ in $(seq 1 300); do grep -q '"step":5,' "$work/run/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
grep -q '"step":5,' "$work/run/metrics.jsonl" || { cat "$work/node_0.log" "$work/gone.log"; fail "the job never reached step 5"; }
rank0=$(pgrep -P $node0)
kill -9 $node0 $rank0
{ wait $node0; } 2>/dev/null || true  # killed: no word from bash
start=$SECONDS
status=0
wait $node1 || status=$?
(( SECONDS - start < 15 )) || fail "node 1 took $((SECONDS - start)) s to stop after node 0 was killed"
[[ $status -eq 1 ]] || { cat "$work/gone.log"; fail "node 1 exited $status, expected 1"; }
no_trace "$work/gone.log"
expect_text "$work/gone.log" "$store: "
check_neighbours "$work/neighbours"
cat "$work/alone.log" "$work/gone.log"
