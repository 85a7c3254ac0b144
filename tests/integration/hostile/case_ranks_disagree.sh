# Two nodes (two `xtrain launch --nnodes 2` on this machine) started with the same recipe, but
# node 1 with `--set optim.lr=1e-2 --set run.seed=8`: both stop with exit 2 soon after the ranks
# join, each with one message naming the ranks and the first differing key with both values, no
# C++ stack trace, and nothing of the run written (no checkpoint, no metrics, no recipe.yaml).
# The timeouts are long (60 s), so that only the comparison can stop the job within the bound.
source "$2/tests/integration/hostile/lib.sh"
mkdir -p neighbours && echo keep > neighbours/file && guard_neighbours "$work/neighbours"
write_recipe "$work/recipe.yaml" 20
node() {  # node NAME RANK [--set ...]: one node's launcher with one rank; output in NAME_RANK.log
  local name=$1 rank=$2
  shift 2
  "$xtrain" launch --nnodes 2 --node-rank "$rank" --nproc-per-node 1 --master-port "$port" -- \
    train "$work/recipe.yaml" --set run.dir="$work/$name" --set dist.timeout_s=60 --set dist.init_timeout_s=60 "$@" \
    > "$work/${name}_$rank.log" 2>&1
}
# two_nodes NAME "NODE 0'S OPTIONS" "NODE 1'S OPTIONS": sets status0, status1 and elapsed (seconds).
two_nodes() {
  local name=$1 start node1
  port=$(free_port_pair)  # each job its own: the last one's ports may be in TIME_WAIT
  start=$(date +%s.%N)
  status0=0 status1=0
  # shellcheck disable=SC2086  # the options: split on purpose
  node "$name" 1 $3 &
  node1=$!
  # shellcheck disable=SC2086
  node "$name" 0 $2 || status0=$?
  wait $node1 || status1=$?
  elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
}
# Equal recipes and one step: the reference for the time bound, which holds the same start-up.
two_nodes equal "--set train.steps=1" "--set train.steps=1"
[[ $status0 -eq 0 && $status1 -eq 0 ]] || { cat "$work/equal_0.log" "$work/equal_1.log"; fail "equal recipes: exits $status0 and $status1"; }
reference=$elapsed
two_nodes run "" "--set optim.lr=1e-2 --set run.seed=8"
[[ $status0 -eq 2 && $status1 -eq 2 ]] || { cat "$work/run_0.log" "$work/run_1.log"; fail "exits $status0 and $status1, expected 2 and 2"; }
message="recipe mismatch: rank 1 has run.seed: 8, rank 0 has run.seed: 1234 (and 1 more key: optim.lr); start every rank with the same recipe and --set options"
for rank in 0 1; do
  expect_line "$work/run_$rank.log" "[rank $rank]: $message"
  ! grep -q "frame #\|Exception raised from" "$work/run_$rank.log" || { cat "$work/run_$rank.log"; fail "a C++ stack trace"; }
done
# Each rank says it once (the launchers' failure reports quote it besides).
for rank in 0 1; do
  count=$(grep -c "^\[rank $rank\]: recipe mismatch" "$work/run_$rank.log" || true)
  [[ $count -eq 1 ]] || { cat "$work/run_$rank.log"; fail "rank $rank says it $count times"; }
done
# Stopped within 5 s of the time equal recipes take to start and train one step, far from the 60 s
# a timeout would take.
awk -v t="$elapsed" -v r="$reference" 'BEGIN { exit !(t < r + 5) }' ||
  fail "the job took $elapsed s to stop, $reference s for one step with equal recipes"
[[ ! -e $work/run/checkpoints && ! -e $work/run/metrics.jsonl ]] || { find "$work/run"; fail "the run wrote outputs"; }
[[ -z $(find "$work/run" -name recipe.yaml 2>/dev/null) ]] || fail "a recipe.yaml was written"
check_neighbours "$work/neighbours"
echo "stopped after $elapsed s ($reference s for one step with equal recipes)"
grep -h "^\[rank [01]\]: recipe mismatch" "$work/run_0.log" "$work/run_1.log"
